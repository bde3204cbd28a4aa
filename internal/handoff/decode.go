package handoff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Decode reads a package from a request body and checks it against the rules
// of schema v1.
//
// A body that is not JSON gives a *SyntaxError. JSON that is not a valid
// package gives a *ValidationError naming every problem at once: unknown
// fields at any depth, values of the wrong JSON type, and broken rules. With a
// *ValidationError the returned Package still holds everything that decoded,
// so the caller can look up the target queue and add its rules' problems with
// MergeErrors; values of the wrong type are left out of it.
//
// Decode applies no defaults: an absent priority stays empty for the queue to
// fill. It stores timestamps in UTC. Of a member given twice, the last counts.
func Decode(body []byte) (Package, error) {
	root, err := parseJSON(body)
	if err != nil {
		return Package{}, err
	}
	obj, ok := root.(map[string]any)
	if !ok {
		return Package{}, &ValidationError{Fields: []FieldError{{
			Rule:    ruleType,
			Message: "the body must be a JSON object, not " + jsonTypeName(root),
		}}}
	}
	// Another version's fields would all look wrong by v1's rules; one clear
	// error says more than a page of them.
	if v, ok := obj["schema_version"].(string); ok && v != "" && !check.version.MatchString(v) {
		return Package{}, &ValidationError{Fields: []FieldError{unsupportedVersion(v)}}
	}

	// The body is parsed once: the shape check fills the package from the
	// parsed values as it goes, rather than decoding the body a second time.
	var p Package
	var shape shapeChecker
	shape.decodeStruct("", obj, reflect.ValueOf(&p).Elem())
	p.timesToUTC()
	return p, newValidationError(append(shape.errs, p.fieldErrors()...))
}

// timesToUTC keeps the instants and drops the sender's offsets, which mean
// nothing to the agent and would make equal packages compare unequal.
func (p *Package) timesToUTC() {
	for i := range p.AttemptedActions {
		toUTC(p.AttemptedActions[i].At)
	}
	for i := range p.Transcript {
		toUTC(p.Transcript[i].At)
	}
}

func toUTC(t *time.Time) {
	if t != nil {
		*t = t.UTC()
	}
}

// parseJSON decodes body keeping numbers as written, so that entity values
// survive to the package digit for digit.
func parseJSON(body []byte) (any, error) {
	if v, ok := parseValid(body); ok {
		return v, nil
	}
	// What the quick parser does not take is decoded by encoding/json, which
	// also says where a body that is not JSON went wrong.
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err == nil && skipSpace(body, int(dec.InputOffset())) == len(body) {
		return root, nil
	}
	err := json.Unmarshal(body, new(any))
	if serr, ok := errors.AsType[*json.SyntaxError](err); ok {
		return nil, newSyntaxError(body, serr.Offset, serr.Error())
	}
	return nil, err
}

// parseValid decodes a body of valid JSON in one pass to what
// json.Decoder.UseNumber gives: map[string]any, []any, string, json.Number,
// bool or nil. It reports false for anything it is not sure of, invalid JSON
// included, and parseJSON then asks encoding/json. encoding/json's decoder
// reads every body twice (once to find where the value ends, once to decode
// it); intake decodes every package, so the common case is worth a parser of
// its own.
func parseValid(body []byte) (any, bool) {
	p := jsonParser{data: body}
	v, ok := p.value(0)
	if !ok || skipSpace(body, p.pos) != len(body) {
		return nil, false
	}
	return v, true
}

// maxParseDepth bounds the recursion of jsonParser; deeper bodies, which no
// package has, are left to encoding/json.
const maxParseDepth = 64

// jsonParser reads the JSON in data; pos is the offset of the next byte.
type jsonParser struct {
	data []byte
	pos  int
}

func (p *jsonParser) value(depth int) (any, bool) {
	p.pos = skipSpace(p.data, p.pos)
	if p.pos >= len(p.data) {
		return nil, false
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.string()
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, false
}

func (p *jsonParser) object(depth int) (map[string]any, bool) {
	if depth > maxParseDepth {
		return nil, false
	}
	p.pos++ // {
	obj := map[string]any{}
	if p.pos = skipSpace(p.data, p.pos); p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return obj, true
	}
	for {
		if p.pos = skipSpace(p.data, p.pos); p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, false
		}
		key, ok := p.string()
		if !ok {
			return nil, false
		}
		if p.pos = skipSpace(p.data, p.pos); p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, false
		}
		p.pos++
		v, ok := p.value(depth)
		if !ok {
			return nil, false
		}
		obj[key] = v // as encoding/json does, the last of a repeated name counts
		if more, ok := p.next('}'); !more {
			return obj, ok
		}
	}
}

func (p *jsonParser) array(depth int) ([]any, bool) {
	if depth > maxParseDepth {
		return nil, false
	}
	p.pos++ // [
	items := []any{}
	if p.pos = skipSpace(p.data, p.pos); p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return items, true
	}
	for {
		v, ok := p.value(depth)
		if !ok {
			return nil, false
		}
		items = append(items, v)
		if more, ok := p.next(']'); !more {
			return items, ok
		}
	}
}

// next moves past the comma or the closing byte that follows a member or an
// item, and reports whether another one follows and whether the JSON is well
// formed so far.
func (p *jsonParser) next(closing byte) (more, ok bool) {
	if p.pos = skipSpace(p.data, p.pos); p.pos >= len(p.data) {
		return false, false
	}
	c := p.data[p.pos]
	p.pos++
	return c == ',', c == ',' || c == closing
}

// string decodes the string at p.pos. A string with escapes or invalid UTF-8,
// once checked to be well formed, is unquoted by encoding/json itself, so that
// every replacement character lands where it would.
func (p *jsonParser) string() (string, bool) {
	start := p.pos
	p.pos++ // "
	plain := true
	for p.pos < len(p.data) {
		switch c := p.data[p.pos]; {
		case c == '"':
			p.pos++
			raw := p.data[start:p.pos]
			if plain {
				return string(raw[1 : len(raw)-1]), true
			}
			var s string
			return s, json.Unmarshal(raw, &s) == nil
		case c == '\\':
			plain = false
			if !p.escape() {
				return "", false
			}
		case c < ' ':
			return "", false
		case c < utf8.RuneSelf:
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.data[p.pos:])
			if r == utf8.RuneError && size == 1 {
				plain = false
			}
			p.pos += size
		}
	}
	return "", false
}

// escape checks the escape sequence at p.pos and moves past it.
func (p *jsonParser) escape() bool {
	if p.pos+1 >= len(p.data) {
		return false
	}
	switch p.data[p.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		p.pos += 2
		return true
	case 'u':
		if p.pos+6 > len(p.data) {
			return false
		}
		for _, h := range p.data[p.pos+2 : p.pos+6] {
			if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
				return false
			}
		}
		p.pos += 6
		return true
	}
	return false
}

// number reads a number by JSON's grammar, keeping it as written.
func (p *jsonParser) number() (any, bool) {
	start := p.pos
	if p.data[p.pos] == '-' {
		p.pos++
	}
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
	case p.digits() == 0:
		return nil, false
	}
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		p.pos++
		if p.digits() == 0 {
			return nil, false
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if p.digits() == 0 {
			return nil, false
		}
	}
	return json.Number(p.data[start:p.pos]), true
}

func (p *jsonParser) digits() int {
	start := p.pos
	for p.pos < len(p.data) && '0' <= p.data[p.pos] && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos - start
}

func (p *jsonParser) literal(word string) bool {
	end := p.pos + len(word)
	if end > len(p.data) || string(p.data[p.pos:end]) != word {
		return false
	}
	p.pos = end
	return true
}

// skipSpace returns the offset of the first byte at or after i that is not
// JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// shapeChecker compares decoded JSON with the Go types of the package. It
// records unknown fields and values of the wrong JSON type, and leaves them
// out of what it decodes.
type shapeChecker struct {
	errs []FieldError
}

// decode stores v in dst, of the type v should have, and reports whether v
// fits that type; when it does not, dst is left as it was.
func (c *shapeChecker) decode(path string, v any, dst reflect.Value) bool {
	if dst.Kind() == reflect.Pointer {
		elem := reflect.New(dst.Type().Elem())
		if !c.decode(path, v, elem.Elem()) {
			return false
		}
		dst.Set(elem)
		return true
	}
	switch dst.Type() {
	case reflect.TypeFor[time.Time]():
		s, ok := v.(string)
		if !ok {
			return c.wrongType(path, v, "an RFC 3339 timestamp string")
		}
		var tm time.Time
		if err := tm.UnmarshalText([]byte(s)); err != nil {
			c.add(path, ruleDatetime, path+" must be an RFC 3339 timestamp, like 2026-06-02T14:03:11Z")
			return false
		}
		dst.Set(reflect.ValueOf(tm))
		return true
	case reflect.TypeFor[EntityValue]():
		ev, ok := entityFromJSON(v)
		if !ok {
			return c.wrongType(path, v, "a string, number, boolean or list of strings")
		}
		dst.Set(reflect.ValueOf(ev))
		return true
	}

	switch dst.Kind() {
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return c.wrongType(path, v, "a string")
		}
		dst.SetString(s)
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return c.wrongType(path, v, "a boolean")
		}
		dst.SetBool(b)
	case reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			return c.wrongType(path, v, "an array")
		}
		// An item of the wrong type stays the zero value, which keeps the
		// indexes of the items after it; its own errors the type error shadows.
		s := reflect.MakeSlice(dst.Type(), len(items), len(items))
		for i, item := range items {
			c.decode(path+"["+strconv.Itoa(i)+"]", item, s.Index(i))
		}
		dst.Set(s)
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return c.wrongType(path, v, "an object")
		}
		m := reflect.MakeMapWithSize(dst.Type(), len(obj))
		val := reflect.New(dst.Type().Elem()).Elem()
		for key, item := range obj {
			val.SetZero()
			if c.decode(path+"."+key, item, val) {
				m.SetMapIndex(reflect.ValueOf(key).Convert(dst.Type().Key()), val)
			}
		}
		dst.Set(m)
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return c.wrongType(path, v, "an object")
		}
		c.decodeStruct(path, obj, dst)
	default:
		panic("handoff: no JSON shape for " + dst.Type().String())
	}
	return true
}

// decodeStruct stores the members of obj in the fields of dst, a struct, by
// their JSON names, and records the members that name no field.
func (c *shapeChecker) decodeStruct(path string, obj map[string]any, dst reflect.Value) {
	t := dst.Type()
	known := 0
	for i, f := range structFields(t) {
		v, ok := obj[f.name]
		if !ok {
			continue
		}
		known++
		fieldPath := joinPath(path, f.name)
		if !c.decode(fieldPath, v, dst.Field(i)) {
			continue
		}
		if s, ok := v.(string); ok && s == "" && !f.required {
			c.add(fieldPath, ruleEmpty, fieldPath+" must not be empty; leave the field out instead")
		}
	}
	if known == len(obj) {
		return
	}
	for name := range obj {
		if !hasJSONField(t, name) {
			fieldPath := joinPath(path, name)
			c.add(fieldPath, ruleUnknownField, fieldPath+" is not a field of the handoff package (schema v1)")
		}
	}
}

// jsonField is what decoding needs of a struct field, read once per type.
type jsonField struct {
	name     string
	required bool
}

var jsonFields sync.Map // reflect.Type → []jsonField, indexed like the struct's fields

// structFields lists the JSON names of t's fields, in field order.
func structFields(t reflect.Type) []jsonField {
	if fields, ok := jsonFields.Load(t); ok {
		return fields.([]jsonField)
	}
	fields := make([]jsonField, 0, t.NumField())
	for f := range t.Fields() {
		fields = append(fields, jsonField{name: jsonName(f), required: slices.Contains(tagRules(f), ruleRequired)})
	}
	jsonFields.Store(t, fields)
	return fields
}

func (c *shapeChecker) wrongType(path string, v any, want string) bool {
	c.add(path, ruleType, fmt.Sprintf("%s must be %s, not %s", path, want, jsonTypeName(v)))
	return false
}

func (c *shapeChecker) add(path, rule, message string) {
	c.errs = append(c.errs, FieldError{Field: path, Rule: rule, Message: message})
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func hasJSONField(t reflect.Type, name string) bool {
	return slices.ContainsFunc(structFields(t), func(f jsonField) bool { return f.name == name })
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

func jsonTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	}
	return "an object"
}
