package sw4rm

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
)

// specExample is the request of the SW4RM spec's "Basic Handoff with History Preservation", as
// its SDK serializes it: the context compact JSON, then base64 as protobuf's JSON mapping writes
// bytes.
func specExample() obj {
	context := `{"conversation_history":[{"role":"user","content":"Review this code for security issues"},` +
		`{"role":"assistant","content":"I'll need to hand this off to a specialist."}],"tool_state":{},` +
		`"metadata":{"original_request_id":"req-123"}}`
	return obj{
		"from_agent":            "general-agent-1",
		"to_agent":              "security-specialist-1",
		"reason":                "Task requires specialized security analysis capabilities",
		"context_snapshot":      base64.StdEncoding.EncodeToString([]byte(context)),
		"preserve_history":      true,
		"capabilities_required": []any{"security_analysis"},
		"metadata":              obj{"urgency": "high"},
	}
}

// The spec's own example is taken as it stands: the contact is made from the handoff's id, and
// a nested metadata value or a member the context's schema does not list is no fault.
func TestSpecExampleIsAccepted(t *testing.T) {
	p := toPackage(t, encode(t, specExample()))
	if !strings.HasPrefix(p.Contact.ID, "anon_sw4rm_") || p.Contact.ID != "anon_"+p.HandoffID {
		t.Errorf("contact %q for handoff %q, want one made from the handoff's id", p.Contact.ID, p.HandoffID)
	}
	if len(p.Transcript) != 2 || p.StructuredEntities["urgency"].Text() != "high" {
		t.Errorf("transcript %v, entities %v", p.Transcript, p.StructuredEntities)
	}

	req := specExample()
	req["metadata"] = obj{"customer_id": "cust_77", "routing": obj{"tier": 2, "tags": []any{"a", "b"}}}
	req["context_snapshot"] = obj{"conversation_history": []any{}, "tool_state": obj{}, "metadata": obj{"agent_id": "a1"},
		"checkpoint": obj{"step": 4}}
	p = toPackage(t, encode(t, req))
	if p.Contact.ID != "cust_77" {
		t.Errorf("contact %q, want metadata.customer_id", p.Contact.ID)
	}
	if got := p.StructuredEntities["routing"].Text(); got != `{"tags":["a","b"],"tier":2}` {
		t.Errorf("a nested metadata value is kept as %q, want its JSON", got)
	}
}

// Tool configurations and every member named like a credential are dropped at the door, and a
// URL's password is removed wherever tool state or metadata holds one: none reaches the package.
func TestToolSecretsNeverReachThePackage(t *testing.T) {
	req := minimalRequest()
	req["metadata"].(obj)["api_key"] = "sk-live-metadata-0042"
	req["metadata"].(obj)["callback"] = "https://bot:hunter2-meta@hooks.example.com/x"
	// A connection string under a neutral name, and an environment line in a value.
	req["metadata"].(obj)["db"] = "Server=db;User Id=sa;Password=KV-SECRET-1;"
	req["metadata"].(obj)["env"] = "AWS_REGION=eu-west-1 AWS_SECRET_ACCESS_KEY=wJalr-AWS-SECRET-7 DEBUG=0"
	req["context_snapshot"] = obj{"tool_state": obj{
		"configurations": obj{"database": obj{"connection_string": "postgres://app:s3cr3t-pw@db.internal/prod", "timeout_ms": 30000}},
		"active_calls": []any{obj{"call_id": "call_1", "tool": "crm", "auth_token": "tok-active-0099", "started_at": "x",
			"args": "curl -H 'Authorization: Bearer eyJ-args-bearer-55' https://crm.example.com", "log": "sent bearer eyJhbGci.bare-bearer-66"}},
		"cached_results": obj{"call_abc123": obj{"dsn": "mysql://root:rootpw-cache@10.0.0.1/crm", "total": 3,
			"note": "fetched from redis://:redispw-note@cache:6379/0",
			"auth": "auth-member-11", "pwd": "pwd-member-12", "userPass": "pass-member-13", "creds": obj{"pass": "pass-member-14"},
			"compass": "north", "author": "Jane"}},
	}}
	p := toPackage(t, encode(t, req))
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"s3cr3t-pw", "sk-live-metadata-0042", "hunter2-meta", "tok-active-0099", "rootpw-cache", "redispw-note",
		"connection_string", "configurations", "KV-SECRET-1", "wJalr-AWS-SECRET-7", "eyJ-args-bearer-55", "bare-bearer-66",
		"auth-member-11", "pwd-member-12", "pass-member-13", "pass-member-14"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the package holds %q:\n%s", secret, raw)
		}
	}
	for _, kept := range []string{"redis://:[removed]@cache:6379/0", "call_1", "Server=db;User Id=sa;Password=[removed];",
		"AWS_REGION=eu-west-1 AWS_SECRET_ACCESS_KEY=[removed] DEBUG=0", "Authorization: [removed]", "north", "Jane"} {
		if !strings.Contains(string(raw), kept) {
			t.Errorf("what is not secret is kept, the secret in it removed: no %q in\n%s", kept, raw)
		}
	}
}
