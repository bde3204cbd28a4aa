package handoff

import (
	"encoding/json"
	"errors"
	"slices"
)

// EntityKind is the JSON type of an EntityValue.
type EntityKind int

const (
	EntityString EntityKind = iota + 1
	EntityNumber
	EntityBool
	EntityList
)

// EntityValue is the value of one structured entity: a string, a number, a
// boolean or a list of strings. Anything else (objects, null, lists of other
// things) is refused, so that every entity renders as a plain field for the
// agent. The zero EntityValue is invalid.
type EntityValue struct {
	kind EntityKind
	// text holds a string, or a number's literal so it never loses digits to a float.
	text    string
	boolean bool
	list    []string
}

// StringEntity returns a string entity value.
func StringEntity(s string) EntityValue { return EntityValue{kind: EntityString, text: s} }

// NumberEntity returns a number entity value; n must be a valid JSON number.
func NumberEntity(n json.Number) EntityValue { return EntityValue{kind: EntityNumber, text: string(n)} }

// BoolEntity returns a boolean entity value.
func BoolEntity(b bool) EntityValue { return EntityValue{kind: EntityBool, boolean: b} }

// Kind reports which of the JSON types the value holds.
func (v EntityValue) Kind() EntityKind { return v.kind }

// Text returns a string value, or "" for other kinds.
func (v EntityValue) Text() string {
	if v.kind != EntityString {
		return ""
	}
	return v.text
}

// Number returns a number value as written in the package, or "" for other kinds.
func (v EntityValue) Number() json.Number {
	if v.kind != EntityNumber {
		return ""
	}
	return json.Number(v.text)
}

// Bool returns a boolean value, or false for other kinds.
func (v EntityValue) Bool() bool { return v.kind == EntityBool && v.boolean }

// List returns a copy of a list value, or nil for other kinds.
func (v EntityValue) List() []string {
	if v.kind != EntityList {
		return nil
	}
	return slices.Clone(v.list)
}

// isEmpty reports whether the value carries nothing a queue could rely on.
func (v EntityValue) isEmpty() bool {
	switch v.kind {
	case EntityString:
		return v.text == ""
	case EntityList:
		return len(v.list) == 0
	}
	return v.kind == 0
}

// MarshalJSON implements json.Marshaler.
func (v EntityValue) MarshalJSON() ([]byte, error) {
	switch v.kind {
	case EntityString:
		return json.Marshal(v.text)
	case EntityNumber:
		return json.Marshal(json.Number(v.text))
	case EntityBool:
		return json.Marshal(v.boolean)
	case EntityList:
		return json.Marshal(append([]string{}, v.list...))
	}
	return nil, errors.New("handoff: the zero EntityValue has no JSON form")
}

// UnmarshalJSON implements json.Unmarshaler.
func (v *EntityValue) UnmarshalJSON(data []byte) error {
	r := NewReader(data)
	raw := r.Value()
	if err := r.End(); err != nil {
		return err
	}
	ev, ok := entityFromJSON(raw)
	if !ok {
		return errors.New("handoff: an entity value must be a string, number, boolean or list of strings")
	}
	*v = ev
	return nil
}

// entityFromJSON converts a value as Reader.Value reads it, and reports
// whether it is one an entity may hold.
func entityFromJSON(raw any) (EntityValue, bool) {
	switch x := raw.(type) {
	case string:
		return StringEntity(x), true
	case json.Number:
		return NumberEntity(x), true
	case bool:
		return BoolEntity(x), true
	case []any:
		items := make([]string, len(x))
		for i, item := range x {
			s, ok := item.(string)
			if !ok {
				return EntityValue{}, false
			}
			items[i] = s
		}
		return EntityValue{kind: EntityList, list: items}, true
	}
	return EntityValue{}, false
}
