package handoff

import (
	"bytes"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	schemavalidator "github.com/santhosh-tekuri/jsonschema/v6"
)

// TestCorpus holds the Go rules and the published JSON Schema to the same
// verdict on every package under testdata/corpus: each good one passes both,
// each bad one fails both, and the Go rules report exactly the one problem its
// file name announces: <field>~<rule>[~<variant>].json, "body" standing for
// the body as a whole.
//
// The schema can only approximate some Go rules, so the corpus leaves out the
// packages on which the two would disagree; TestRules covers them:
//   - a well-formed language tag that names no language, such as "zz"
//     (the schema checks BCP 47 syntax, Go also the IANA registry);
//   - three capital letters that are no currency, such as "XYZ"
//     (the schema checks the shape, Go the ISO 4217 list);
//   - addresses and URIs on which the validator's and the JSON Schema
//     library's format checkers differ in detail.
func TestCorpus(t *testing.T) {
	schema := compileSchema(t)

	good := append(glob(t, "testdata/corpus/good/*.json"), harborFile)
	for _, path := range good {
		t.Run("good/"+filepath.Base(path), func(t *testing.T) {
			body := readFile(t, path)
			if _, err := Decode(body); err != nil {
				t.Errorf("Go rules reject it: %v", err)
			}
			if err := validateSchema(schema, body); err != nil {
				t.Errorf("JSON Schema rejects it: %#v", err)
			}
		})
	}

	for _, path := range glob(t, "testdata/corpus/bad/*.json") {
		name := strings.TrimSuffix(filepath.Base(path), ".json")
		t.Run("bad/"+name, func(t *testing.T) {
			parts := strings.Split(name, "~")
			if len(parts) < 2 {
				t.Fatalf("name %q is not <field>~<rule>[~<variant>]", name)
			}
			want := FieldError{Field: parts[0], Rule: parts[1]}
			if want.Field == "body" {
				want.Field = ""
			}
			body := readFile(t, path)
			_, err := Decode(body)
			assertFields(t, err, want)
			err = validateSchema(schema, body)
			if err == nil {
				t.Fatalf("JSON Schema accepts it")
			}
			if !schemaBlames(err, want.Field) {
				t.Errorf("JSON Schema rejects it for another reason: %#v", err)
			}
		})
	}
}

// compileSchema compiles the embedded schema the way a bot author's tools
// would, with formats asserted rather than merely annotated.
func compileSchema(t *testing.T) *schemavalidator.Schema {
	t.Helper()
	doc, err := schemavalidator.UnmarshalJSON(bytes.NewReader(Schema()))
	if err != nil {
		t.Fatal(err)
	}
	url := "https://desk.example" + SchemaID
	c := schemavalidator.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile(url)
	if err != nil {
		t.Fatal(err)
	}
	return schema
}

func validateSchema(schema *schemavalidator.Schema, body []byte) error {
	doc, err := schemavalidator.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return err
	}
	return schema.Validate(doc)
}

// schemaBlames reports whether one of the schema's findings sits at field,
// inside it, or at an object around it, where a missing or unknown property
// is reported.
func schemaBlames(err error, field string) bool {
	verr, ok := errors.AsType[*schemavalidator.ValidationError](err)
	if !ok {
		return false
	}
	if len(verr.Causes) == 0 {
		loc := instancePath(verr.InstanceLocation)
		return within(field, loc) || within(loc, field)
	}
	for _, cause := range verr.Causes {
		if schemaBlames(cause, field) {
			return true
		}
	}
	return false
}

// instancePath writes a JSON Schema instance location as a FieldError path.
func instancePath(tokens []string) string {
	var path string
	for _, tok := range tokens {
		if tok != "" && strings.Trim(tok, "0123456789") == "" {
			path += "[" + tok + "]"
		} else {
			path = joinPath(path, tok)
		}
	}
	return path
}

func joinPath(parent, name string) string {
	if parent == "" {
		return name
	}
	return parent + "." + name
}

func glob(t testing.TB, pattern string) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.FromSlash(pattern))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no files match %s: %v", pattern, errors.Join(err))
	}
	return paths
}
