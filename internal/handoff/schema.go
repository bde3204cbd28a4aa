package handoff

import _ "embed"

// The schema is generated from the Go types by the test that keeps it fresh:
//
//	go test ./internal/handoff -run TestSchemaFresh -update
//
// A string, not a []byte, so nobody can change what the app serves.
//
//go:embed schema/handoff-v1.json
var schemaV1 string

// SchemaID is the $id of the JSON Schema: the path the app serves it at.
const SchemaID = "/api/v1/schema/handoff-v1.json"

// Schema returns the JSON Schema (draft 2020-12) of the handoff package v1.
func Schema() []byte {
	return []byte(schemaV1)
}
