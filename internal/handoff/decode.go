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
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var root any
	if err := dec.Decode(&root); err == nil && isJSONSpace(body[dec.InputOffset():]) {
		return root, nil
	}
	// Unmarshal is the one that says where the body went wrong.
	err := json.Unmarshal(body, new(any))
	if serr, ok := errors.AsType[*json.SyntaxError](err); ok {
		return nil, newSyntaxError(body, serr.Offset, serr.Error())
	}
	return nil, err
}

// isJSONSpace reports whether b holds nothing but JSON whitespace, as may
// follow the one value of a body.
func isJSONSpace(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return false
		}
	}
	return true
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
