package mcp

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"go.yaml.in/yaml/v4"
)

// openAPI is the bot API's OpenAPI document, read once: the tools' input schemas are its request
// bodies' and parameters' schemas, so that a tool and its route describe one set of rules.
type openAPI struct {
	components map[string]any // components.schemas
	parameters map[string]any // components.parameters
}

func readOpenAPI(doc []byte) (openAPI, error) {
	var d struct {
		Components struct {
			Schemas    map[string]any `yaml:"schemas"`
			Parameters map[string]any `yaml:"parameters"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(doc, &d); err != nil {
		return openAPI{}, fmt.Errorf("mcp: reading the OpenAPI document: %w", err)
	}
	return openAPI{components: d.Components.Schemas, parameters: d.Components.Parameters}, nil
}

// prop is one property of a tool's input schema.
type prop struct {
	name     string
	schema   any
	required bool
}

// properties lists the properties of the document's schema name (a request body), in name order.
func (o openAPI) properties(name string) []prop {
	s := o.components[name].(map[string]any)
	required, _ := s["required"].([]any)
	props := s["properties"].(map[string]any)
	var out []prop
	for _, p := range slices.Sorted(maps.Keys(props)) {
		out = append(out, prop{name: p, schema: props[p], required: slices.Contains(required, any(p))})
	}
	return out
}

// object is a tool's input schema: an object of props and nothing else, with the document's
// schemas that they refer to in its $defs.
func object(o openAPI, props ...prop) map[string]any {
	properties, required := map[string]any{}, []string{}
	for _, p := range props {
		properties[p.name] = p.schema
		if p.required {
			required = append(required, p.name)
		}
	}
	s := map[string]any{"type": "object", "properties": properties, "required": required, "additionalProperties": false}
	defs := map[string]any{}
	s["properties"] = o.localRefs(properties, defs)
	if len(defs) > 0 {
		s["$defs"] = defs
	}
	return s
}

// localRefs copies v with each reference to the document's components turned into one to $defs,
// where it copies the component (and what it refers to in turn).
func (o openAPI) localRefs(v any, defs map[string]any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if ref, ok := x.(string); k == "$ref" && ok {
				name, found := strings.CutPrefix(ref, "#/components/schemas/")
				if !found {
					panic("mcp: a tool's schema refers to " + ref)
				}
				out[k] = "#/$defs/" + name
				if _, done := defs[name]; !done {
					defs[name] = nil // taken before it is copied, in case it refers to itself
					defs[name] = o.localRefs(o.components[name], defs)
				}
				continue
			}
			out[k] = o.localRefs(x, defs)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = o.localRefs(x, defs)
		}
		return out
	}
	return v
}

// handoffIDSchema is the schema of a handoff's id, as the routes' path parameter has it.
func handoffIDSchema(o openAPI) map[string]any {
	p := o.parameters["HandoffID"].(map[string]any)
	s := maps.Clone(p["schema"].(map[string]any))
	s["description"] = "The handoff's handoff_id, as handoff_to_human's package gave it."
	return s
}
