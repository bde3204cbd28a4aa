package handoff

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
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
// fill. It stores timestamps in UTC.
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

	var shape shapeChecker
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

// shapeChecker compares decoded JSON with the Go types of the package. It
// records unknown fields and values of the wrong JSON type, and removes them
// so that what is left decodes into a Package without error.
type shapeChecker struct {
	errs []FieldError
}

// check reports whether v fits type t; the caller removes v when it does not.
func (c *shapeChecker) check(path string, v any, t reflect.Type) bool {
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

func (c *shapeChecker) checkStruct(path string, obj map[string]any, t reflect.Type) {
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
	for f := range t.Fields() {
		if jsonName(f) == name {
			return true
		}
	}
	return false
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
