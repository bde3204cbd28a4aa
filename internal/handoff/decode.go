package handoff

import (
	"cmp"
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-playground/validator/v10"
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
	r := NewReader(body)
	var p Package
	dst := reflect.ValueOf(&p).Elem()
	isObject := r.Object("a JSON object", func(name string) { readField(r, dst, name) })
	if err := r.End(); err != nil {
		return Package{}, err
	}
	if !isObject {
		return Package{}, NewValidationError(r.Problems())
	}
	// Another version's fields would all look wrong by v1's rules; one clear
	// error says more than a page of them.
	if v := p.SchemaVersion; v != "" && !check.version.MatchString(v) {
		return Package{}, &ValidationError{Fields: []FieldError{unsupportedVersion(v)}}
	}
	p.timesToUTC()
	return p, NewValidationError(append(r.Problems(), p.fieldErrors()...))
}

// DecodeObject reads body into dst, a pointer to a struct with json and validate tags, by the
// rules Decode applies to a package: a *SyntaxError for a body that is not JSON, a
// *ValidationError naming every unknown member (as "not a field of " + what), value of the wrong
// JSON type and broken rule at once. Other documents of the bot API (a conversation's message)
// then answer exactly as a package does.
func DecodeObject(body []byte, dst any, what string) error {
	r := NewReader(body)
	r.object = what
	v := reflect.ValueOf(dst).Elem()
	isObject := r.Object("a JSON object", func(name string) { readField(r, v, name) })
	if err := r.End(); err != nil {
		return err
	}
	if !isObject {
		return NewValidationError(r.Problems())
	}
	var errs []FieldError
	verrs, _ := errors.AsType[validator.ValidationErrors](check.validate.Struct(dst))
	for _, fe := range verrs {
		errs = append(errs, fieldError(fe))
	}
	return NewValidationError(append(r.Problems(), errs...))
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

// readValue reads the next value into dst, by dst's Go type, and reports
// whether the value fits that type; when it does not, dst is left as it was.
func readValue(r *Reader, dst reflect.Value) bool {
	if dst.Kind() == reflect.Pointer {
		elem := reflect.New(dst.Type().Elem())
		if !readValue(r, elem.Elem()) {
			return false
		}
		dst.Set(elem)
		return true
	}
	switch dst.Type() {
	case reflect.TypeFor[time.Time]():
		s, ok := r.String("an RFC 3339 timestamp string")
		if !ok {
			return false
		}
		var tm time.Time
		if err := tm.UnmarshalText([]byte(s)); err != nil {
			r.Problem(RuleDatetime, "must be an RFC 3339 timestamp, like 2026-06-02T14:03:11Z")
			return false
		}
		dst.Set(reflect.ValueOf(tm))
		return true
	case reflect.TypeFor[EntityValue]():
		kind := r.Kind()
		ev, ok := entityFromJSON(r.Value())
		if !ok {
			r.wrongType(kind, "a string, number, boolean or list of strings")
			return false
		}
		dst.Set(reflect.ValueOf(ev))
		return true
	}

	switch dst.Kind() {
	case reflect.String:
		s, ok := r.String("a string")
		if ok {
			dst.SetString(s)
		}
		return ok
	case reflect.Int64:
		n, ok := r.Number("a whole number")
		if !ok {
			return false
		}
		i, err := n.Int64()
		if err != nil {
			r.Problem(RuleType, "must be a whole number")
			return false
		}
		dst.SetInt(i)
		return true
	case reflect.Bool:
		b, ok := r.Bool("a boolean")
		if ok {
			dst.SetBool(b)
		}
		return ok
	case reflect.Slice:
		// An item of the wrong type stays the zero value, which keeps the
		// indexes of the items after it; its own errors the type error shadows.
		items := reflect.MakeSlice(dst.Type(), 0, 0)
		zero := reflect.Zero(dst.Type().Elem())
		ok := r.Array("an array", func(i int) {
			items = reflect.Append(items, zero)
			readValue(r, items.Index(i))
		})
		if ok {
			dst.Set(items)
		}
		return ok
	case reflect.Map:
		m := reflect.MakeMap(dst.Type())
		val := reflect.New(dst.Type().Elem()).Elem()
		ok := r.Object("an object", func(key string) {
			k := reflect.ValueOf(key).Convert(dst.Type().Key())
			val.SetZero()
			if readValue(r, val) {
				m.SetMapIndex(k, val)
			} else {
				m.SetMapIndex(k, reflect.Value{}) // in case an earlier member of that name fitted
			}
		})
		if ok {
			dst.Set(m)
		}
		return ok
	case reflect.Struct:
		return r.Object("an object", func(name string) { readField(r, dst, name) })
	}
	panic("handoff: no JSON shape for " + dst.Type().String())
}

// readField reads the member name of a JSON object into the field of dst, a
// struct, with that JSON name, and records a member that names no field.
func readField(r *Reader, dst reflect.Value, name string) {
	fields := structFields(dst.Type())
	i, ok := fields.index[name]
	if !ok {
		r.Unknown(cmp.Or(r.object, "the handoff package (schema v1)"))
		return
	}
	f := dst.Field(i)
	f.SetZero() // in case an earlier member of that name set it
	if readValue(r, f) && f.Kind() == reflect.String && f.Len() == 0 && !fields.required[i] {
		r.Problem(ruleEmpty, "must not be empty; leave the field out instead")
	}
}

// jsonFields is what decoding needs of a struct type, read once per type.
type jsonFields struct {
	index    map[string]int // field index by JSON name
	required []bool         // by field index
}

var structFieldsCache sync.Map // reflect.Type → *jsonFields

// structFields describes the JSON fields of t, a struct.
func structFields(t reflect.Type) *jsonFields {
	if fields, ok := structFieldsCache.Load(t); ok {
		return fields.(*jsonFields)
	}
	fields := &jsonFields{index: make(map[string]int, t.NumField()), required: make([]bool, t.NumField())}
	for i := range t.NumField() {
		f := t.Field(i)
		fields.index[jsonName(f)] = i
		fields.required[i] = slices.Contains(tagRules(f), RuleRequired)
	}
	structFieldsCache.Store(t, fields)
	return fields
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}
