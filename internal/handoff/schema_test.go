package handoff

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/invopop/jsonschema"
)

var update = flag.Bool("update", false, "rewrite schema/handoff-v1.json and the golden files from the code")

const schemaFile = "schema/handoff-v1.json"

// TestSchemaFresh keeps the committed schema equal to what the Go types say.
func TestSchemaFresh(t *testing.T) {
	got, err := generateSchema()
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		// The schema is served from the binary and read by bot authors in the repository.
		if err := os.WriteFile(schemaFile, got, 0o644); err != nil { //nolint:gosec // see above
			t.Fatal(err)
		}
		return
	}
	if string(got) != schemaV1 {
		t.Fatalf("%s is stale; refresh it with:\n\tgo test ./internal/handoff -run TestSchemaFresh -update", schemaFile)
	}
}

// Schema patterns for rules whose Go side is not a pattern.
const (
	notBlankSchemaPattern = `\S`
	// What url.Parse takes as a scheme; the Go rule asks url.Parse.
	schemeSchemaPattern = `^[A-Za-z][A-Za-z0-9+.-]*:`
	// The shape of an ISO 4217 code; the Go rule checks the code list.
	currencySchemaPattern = `^[A-Z]{3}$`
)

// generateSchema reflects the package's types with invopop/jsonschema, then
// adds what reflection cannot see: the validate tags and the map rules.
func generateSchema() ([]byte, error) {
	r := &jsonschema.Reflector{
		ExpandedStruct: true,
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if t == reflect.TypeFor[EntityValue]() {
				return entityValueSchema()
			}
			return nil
		},
	}
	if err := r.AddGoComments("github.com/handoffdesk/desk/internal/handoff", "."); err != nil {
		return nil, err
	}
	s := r.Reflect(&Package{})
	s.ID = SchemaID
	s.Title = "Handoff package v1"
	s.Description = "What a support bot sends when it hands a conversation to a human: " +
		"everything the agent needs to take over without asking the customer to repeat anything."

	for _, t := range structTypes(reflect.TypeFor[Package]()) {
		def := s
		if t != reflect.TypeFor[Package]() {
			def = s.Definitions[t.Name()]
		}
		if def == nil {
			return nil, fmt.Errorf("no schema definition for %s", t)
		}
		if err := constrain(def, t); err != nil {
			return nil, fmt.Errorf("%s: %w", t.Name(), err)
		}
	}

	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(s); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// structTypes lists t and the struct types of its fields, at any depth.
func structTypes(t reflect.Type) []reflect.Type {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || t == reflect.TypeFor[time.Time]() || t == reflect.TypeFor[EntityValue]() {
		return nil
	}
	types := []reflect.Type{t}
	for f := range t.Fields() {
		types = append(types, structTypes(f.Type)...)
	}
	return types
}

// constrain translates the validate tags of t's fields into keywords of def.
func constrain(def *jsonschema.Schema, t reflect.Type) error {
	var required []string
	for f := range t.Fields() {
		field := jsonName(f)
		prop, ok := def.Properties.Get(field)
		if !ok {
			return fmt.Errorf("no property %q", field)
		}
		if f.Type.Kind() == reflect.Map {
			prop.PropertyNames = &jsonschema.Schema{Pattern: keyPattern}
		}
		if f.Type.Kind() == reflect.Struct && hasRequiredField(f.Type) {
			// Go cannot miss a struct value, only the required fields in it.
			required = append(required, field)
		}
		target, typ := prop, f.Type
		for rule := range strings.SplitSeq(f.Tag.Get("validate"), ",") {
			ruleName, param, _ := strings.Cut(rule, "=")
			switch ruleName {
			case "", "omitempty":
			case "dive":
				target, typ = target.Items, typ.Elem()
			case "required":
				if target == prop {
					required = append(required, field)
				}
				if typ.Kind() == reflect.String && target != prop {
					target.MinLength = uintPtr(1)
				}
			case "notblank":
				addPattern(target, notBlankSchemaPattern)
			case "max":
				n, err := strconv.ParseUint(param, 10, 64)
				if err != nil {
					return fmt.Errorf("%s: %w", f.Name, err)
				}
				switch typ.Kind() {
				case reflect.String:
					target.MaxLength = &n
				case reflect.Slice:
					target.MaxItems = &n
				case reflect.Map:
					target.MaxProperties = &n
				default:
					return fmt.Errorf("%s: max on a %s", f.Name, typ)
				}
			case "oneof":
				values, ok := allowedValues(reflect.Zero(typ).Interface())
				if !ok {
					return fmt.Errorf("%s: oneof on %s, which is not an enum", f.Name, typ)
				}
				for _, v := range values {
					target.Enum = append(target.Enum, v)
				}
			case "email":
				target.Format = "email"
			case "uri":
				target.Format = "uri"
				addPattern(target, schemeSchemaPattern)
			case "bcp47":
				addPattern(target, bcp47Pattern)
			case "iso4217":
				addPattern(target, currencySchemaPattern)
			case "schema_version":
				addPattern(target, versionPattern)
			case "handoff_id":
				addPattern(target, handoffIDPattern)
			case "single_paragraph":
				addPattern(target, singleParagraphPattern)
			case RuleVisibleText:
				addPattern(target, visibleTextPattern)
			case "amount":
				addPattern(target, amountPattern)
				target.Not = &jsonschema.Schema{Pattern: zeroAmountPattern}
			default:
				return fmt.Errorf("%s: no JSON Schema for validate rule %q; teach constrain", f.Name, rule)
			}
		}
		if f.Type.Kind() == reflect.String && prop.Enum == nil {
			// Present means not empty: see Package.
			prop.MinLength = uintPtr(1)
		}
	}
	def.Required = required
	return nil
}

func hasRequiredField(t reflect.Type) bool {
	for f := range t.Fields() {
		if slices.Contains(tagRules(f), "required") {
			return true
		}
	}
	return false
}

func entityValueSchema() *jsonschema.Schema {
	text := func() *jsonschema.Schema {
		return &jsonschema.Schema{Type: "string", MaxLength: uintPtr(maxEntityText)}
	}
	return &jsonschema.Schema{
		Description: "A string, a number, a boolean or a list of strings.",
		AnyOf: []*jsonschema.Schema{
			text(),
			{Type: "number"},
			{Type: "boolean"},
			{Type: "array", Items: text(), MaxItems: uintPtr(maxEntityListItems)},
		},
	}
}

// addPattern adds a pattern next to any the schema has: a schema holds one.
func addPattern(s *jsonschema.Schema, pattern string) {
	if s.Pattern == "" {
		s.Pattern = pattern
		return
	}
	s.AllOf = append(s.AllOf, &jsonschema.Schema{Pattern: pattern})
}

func uintPtr(n uint64) *uint64 { return &n }
