package handoff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"
)

func compareDecode(t *testing.T, body []byte) {
	p1, e1 := oldDecode(body)
	p2, e2 := Decode(body)
	if fmt.Sprint(e1) != fmt.Sprint(e2) || fmt.Sprintf("%T", e1) != fmt.Sprintf("%T", e2) {
		if e1 != nil && (bytes.Contains([]byte(e1.Error()), []byte("shape-checked"))) {
			t.Logf("old internal error: %v; new: %v", e1, e2)
			return
		}
		t.Fatalf("errors differ for %q:\n old %v\n new %v", body, e1, e2)
	}
	if !reflect.DeepEqual(p1, p2) {
		t.Fatalf("packages differ for %q:\n old %#v\n new %#v", body, p1, p2)
	}
	j1, _ := json.Marshal(p1)
	j2, _ := json.Marshal(p2)
	if !bytes.Equal(j1, j2) {
		t.Fatalf("canonical differs")
	}
}

func TestZZEquiv(t *testing.T) {
	paths, _ := filepath.Glob("testdata/corpus/*/*.json")
	more, _ := filepath.Glob("testdata/*.json")
	paths = append(paths, more...)
	more, _ = filepath.Glob("testdata/fuzz/FuzzZZEquiv/*")
	for _, p := range paths {
		b, _ := os.ReadFile(p)
		compareDecode(t, b)
	}
}

func FuzzZZEquiv(f *testing.F) {
	paths, _ := filepath.Glob("testdata/corpus/*/*.json")
	more, _ := filepath.Glob("testdata/*.json")
	for _, p := range append(paths, more...) {
		b, _ := os.ReadFile(p)
		f.Add(b)
	}
	for _, body := range []string{``, `{`, `{"a":1}x`, `[]`, `null`, `{"schema_version":"1.0","contact":null}`, ` {} `, `{} {}`, `{}x`, `42`, `"x"`, `1 2`} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) { compareDecode(t, body) })
}

var _ = errors.New
var _ = slices.Contains[[]int]
var _ time.Time
func oldDecode(body []byte) (Package, error) {
	root, err := oldParseJSON(body)
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

	var shape oldShape
	shape.checkStruct("", obj, reflect.TypeFor[Package]())
	clean := body
	if len(shape.errs) > 0 {
		if clean, err = json.Marshal(obj); err != nil {
			return Package{}, fmt.Errorf("handoff: re-encoding the fields that fit: %w", err)
		}
	}
	var p Package
	if err := json.Unmarshal(clean, &p); err != nil {
		// The shape check lets through only what fits, so this is a bug here, not a bad package.
		return Package{}, fmt.Errorf("handoff: decoding a shape-checked package: %w", err)
	}
	p.oldTimesToUTC()
	return p, newValidationError(append(shape.errs, p.fieldErrors()...))
}

// timesToUTC keeps the instants and drops the sender's offsets, which mean
// nothing to the agent and would make equal packages compare unequal.
func (p *Package) oldTimesToUTC() {
	for i := range p.AttemptedActions {
		oldToUTC(p.AttemptedActions[i].At)
	}
	for i := range p.Transcript {
		oldToUTC(p.Transcript[i].At)
	}
}

func oldToUTC(t *time.Time) {
	if t != nil {
		*t = t.UTC()
	}
}

// parseJSON decodes body keeping numbers as written, so that entity values
// survive to the package digit for digit.
func oldParseJSON(body []byte) (any, error) {
	if !json.Valid(body) {
		// Unmarshal is the one that says where the body went wrong.
		err := json.Unmarshal(body, new(any))
		if serr, ok := errors.AsType[*json.SyntaxError](err); ok {
			return nil, newSyntaxError(body, serr.Offset, serr.Error())
		}
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var root any
	err := dec.Decode(&root)
	return root, err
}

// oldShape compares decoded JSON with the Go types of the package. It
// records unknown fields and values of the wrong JSON type, and removes them
// so that what is left decodes into a Package without error.
type oldShape struct {
	errs []FieldError
}

// check reports whether v fits type t; the caller removes v when it does not.
func (c *oldShape) check(path string, v any, t reflect.Type) bool {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t {
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
		return true
	case reflect.TypeFor[EntityValue]():
		if _, ok := entityFromJSON(v); !ok {
			return c.wrongType(path, v, "a string, number, boolean or list of strings")
		}
		return true
	}

	switch t.Kind() {
	case reflect.String:
		if _, ok := v.(string); !ok {
			return c.wrongType(path, v, "a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return c.wrongType(path, v, "a boolean")
		}
	case reflect.Slice:
		items, ok := v.([]any)
		if !ok {
			return c.wrongType(path, v, "an array")
		}
		for i, item := range items {
			if !c.check(fmt.Sprintf("%s[%d]", path, i), item, t.Elem()) {
				// null keeps the indexes of the items after it; it decodes
				// to a zero value whose own errors the type error shadows.
				items[i] = nil
			}
		}
	case reflect.Map:
		obj, ok := v.(map[string]any)
		if !ok {
			return c.wrongType(path, v, "an object")
		}
		for key, val := range obj {
			if !c.check(path+"."+key, val, t.Elem()) {
				delete(obj, key)
			}
		}
	case reflect.Struct:
		obj, ok := v.(map[string]any)
		if !ok {
			return c.wrongType(path, v, "an object")
		}
		c.checkStruct(path, obj, t)
	default:
		panic("handoff: no JSON shape for " + t.String())
	}
	return true
}

func (c *oldShape) checkStruct(path string, obj map[string]any, t reflect.Type) {
	members, known := len(obj), 0
	for f := range t.Fields() {
		name := jsonName(f)
		v, ok := obj[name]
		if !ok {
			continue
		}
		known++
		fieldPath := joinPath(path, name)
		if !c.check(fieldPath, v, f.Type) {
			delete(obj, name)
			continue
		}
		if s, ok := v.(string); ok && s == "" && !slices.Contains(tagRules(f), ruleRequired) {
			c.add(fieldPath, ruleEmpty, fieldPath+" must not be empty; leave the field out instead")
		}
	}
	if known == members {
		return
	}
	for name := range obj {
		if !hasJSONField(t, name) {
			fieldPath := joinPath(path, name)
			c.add(fieldPath, ruleUnknownField, fieldPath+" is not a field of the handoff package (schema v1)")
			delete(obj, name)
		}
	}
}

func (c *oldShape) wrongType(path string, v any, want string) bool {
	c.add(path, ruleType, fmt.Sprintf("%s must be %s, not %s", path, want, jsonTypeName(v)))
	return false
}

func (c *oldShape) add(path, rule, message string) {
	c.errs = append(c.errs, FieldError{Field: path, Rule: rule, Message: message})
}

