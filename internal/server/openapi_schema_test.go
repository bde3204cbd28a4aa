package server

import (
	"bytes"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"go.yaml.in/yaml/v4"

	"github.com/handoffdesk/desk/internal/handoff"
)

var update = flag.Bool("update", false, "rewrite the generated end of openapi.yaml from the package's JSON Schema")

// generatedSchemas starts the end of openapi.yaml that is generated: the handoff package's
// schemas, under components.schemas, the last key of the document.
const generatedSchemas = `    # Generated from internal/handoff/schema/handoff-v1.json, itself generated from the Go types
    # of internal/handoff; edit those and run
    #   go test ./internal/handoff -run TestSchemaFresh -update
    #   go test ./internal/server -run TestOpenAPIPackageSchemaFresh -update
    # Nothing below this comment is edited by hand.
`

// The document carries the package's schema itself, so that a tool reading the file alone
// (Redocly, oapi-codegen) needs nothing from a running desk, and it is the schema the desk
// serves: both are generated from the same Go types.
func TestOpenAPIPackageSchemaFresh(t *testing.T) {
	want, err := packageSchemasYAML()
	if err != nil {
		t.Fatal(err)
	}
	head, got, found := bytes.Cut(openAPI, []byte(generatedSchemas))
	if *update {
		if !found {
			head = append(bytes.TrimRight(openAPI, "\n"), '\n')
		}
		// The document is served from the binary and read by bot authors in the repository.
		if err := os.WriteFile("openapi.yaml", append(append(head, generatedSchemas...), want...), 0o644); err != nil { //nolint:gosec // see above
			t.Fatal(err)
		}
		return
	}
	if !found || !bytes.Equal(got, want) {
		t.Fatal("openapi.yaml's package schemas are stale; refresh them with:\n\tgo test ./internal/server -run TestOpenAPIPackageSchemaFresh -update")
	}
}

// packageSchemasYAML turns the package's JSON Schema into entries of components.schemas:
// HandoffPackage and its $defs beside it, with references to them that OpenAPI tools follow.
func packageSchemasYAML() ([]byte, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(handoff.Schema(), &doc); err != nil {
		return nil, err
	}
	root := doc.Content[0]
	pkg := &yaml.Node{Kind: yaml.MappingNode}
	schemas := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{{Kind: yaml.ScalarNode, Value: "HandoffPackage"}, pkg}}
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch k, v := root.Content[i], root.Content[i+1]; k.Value {
		case "$schema":
			// The document's jsonSchemaDialect says the same.
		case "$id":
			// Inside the document an $id would move the base that its references resolve against.
		case "$defs":
			schemas.Content = append(schemas.Content, v.Content...)
		default:
			pkg.Content = append(pkg.Content, k, v)
		}
	}
	relink(schemas)
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(schemas); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	for line := range strings.Lines(b.String()) {
		out.WriteString("    " + line)
	}
	return out.Bytes(), nil
}

// relink points the references between the package's definitions at components.schemas, and
// lets the encoder choose block style and quoting, as the rest of the document is written.
func relink(n *yaml.Node) {
	n.Style = 0
	for i, c := range n.Content {
		relink(c)
		if n.Kind == yaml.MappingNode && i%2 == 1 && n.Content[i-1].Value == "$ref" {
			c.Value = strings.Replace(c.Value, "#/$defs/", "#/components/schemas/", 1)
		}
	}
}

// The document stands on its own: every reference points inside it, none into a $defs that
// OpenAPI tools do not follow, no component name is used twice across the kinds that code
// generators turn into types, and kin-openapi loads and validates it, examples included.
func TestOpenAPIIsSelfContained(t *testing.T) {
	t.Parallel()
	var doc yaml.Node
	if err := yaml.Unmarshal(openAPI, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, n *yaml.Node)
	walk = func(path string, n *yaml.Node) {
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Kind != yaml.MappingNode {
				break
			}
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "$ref" && !strings.HasPrefix(v.Value, "#/components/") {
				t.Errorf("%s: $ref %s points outside the document's components", path, v.Value)
			}
			if k.Value == "$defs" || k.Value == "$id" {
				t.Errorf("%s: %s, which OpenAPI tools do not follow inside a document", path, k.Value)
			}
		}
		for i, c := range n.Content {
			key := ""
			if n.Kind == yaml.MappingNode && i%2 == 1 {
				key = n.Content[i-1].Value
			}
			walk(path+"/"+key, c)
		}
	}
	walk("", doc.Content[0])

	var components struct {
		Components map[string]map[string]any `yaml:"components"`
	}
	if err := yaml.Unmarshal(openAPI, &components); err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, kind := range []string{"schemas", "responses", "parameters", "headers", "requestBodies"} {
		for name := range components.Components[kind] {
			if other, ok := seen[name]; ok {
				t.Errorf("%s is a name under both components.%s and components.%s", name, other, kind)
			}
			seen[name] = kind
		}
	}

	loader := openapi3.NewLoader()
	loaded, err := loader.LoadFromData(openAPI)
	if err != nil {
		t.Fatalf("kin-openapi cannot load the document from the file alone: %v", err)
	}
	if err := loaded.Validate(t.Context()); err != nil {
		t.Errorf("the document is not valid: %v", err)
	}
}
