package handoff

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

const (
	sw4rmRequestFile = "testdata/sw4rm/harbor-request.json"
	sw4rmContextFile = "testdata/sw4rm/harbor-context.json"
	sw4rmGolden      = "testdata/sw4rm/harbor-v1.golden.json"
)

// sw4rmHarbor returns the Harbor escalation as a SW4RM HandoffRequest,
// decoded for editing; its context_snapshot is base64.
func sw4rmHarbor(t *testing.T) obj {
	t.Helper()
	var req obj
	if err := json.Unmarshal(readFile(t, sw4rmRequestFile), &req); err != nil {
		t.Fatal(err)
	}
	return req
}

// minimalSW4RM returns the least a SW4RM request needs to become a package.
func minimalSW4RM() obj {
	return obj{
		"from_agent": "tier1-support",
		"reason":     "Customer asks to speak to a person about closing their account.",
		"metadata":   obj{"contact_id": "cust_0001"},
	}
}

func sw4rmPackage(t *testing.T, body []byte) Package {
	t.Helper()
	req, ctx, err := DecodeSW4RM(body)
	if err != nil {
		t.Fatalf("DecodeSW4RM: %v", err)
	}
	p, err := req.Package(ctx, "billing_t2")
	if err != nil {
		t.Fatalf("Package: %v", err)
	}
	return p
}

func TestSW4RMHarbor(t *testing.T) {
	p := sw4rmPackage(t, readFile(t, sw4rmRequestFile))
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if err := p.ValidateForQueue(QueueRules{RequiredEntityKeys: []string{"account_id"}}); err != nil {
		t.Fatalf("ValidateForQueue: %v", err)
	}
	matchGolden(t, sw4rmGolden, p, "TestSW4RMHarbor")

	// What the golden file shows but a reader could miss.
	checks := []struct {
		what      string
		got, want any
	}{
		{"handoff_id from request_id", p.HandoffID, "ho_sw4rm_8f3a91c2"},
		{"source_run_id from metadata.run_id", p.SourceRunID, "run_t1_22a7"},
		{"target_profile is the routed queue", p.TargetProfile, "billing_t2"},
		{"warm by preserve_history", p.TransferMode, TransferModeWarm},
		{"metadata.trigger wins over capabilities", p.Trigger, TriggerPolicyBoundary},
		{"metadata.user_verified", p.UserVerified, true},
		{"metadata.refund", *p.Refund, Refund{Amount: "49.99", Currency: "USD"}},
		{"unknown metadata key becomes an entity", p.StructuredEntities["product_sku"].Text(), "PRO-MONTHLY"},
		{"tool state without action shape is summed up", p.StructuredEntities["tool_state.charge_ids"].Text(), `["ch_44b","ch_44c"]`},
		{"tool-call-only message dropped", len(p.Transcript), 5},
		{"human is user", p.Transcript[1].Role, RoleUser},
		{"ai is assistant", p.Transcript[2].Role, RoleAssistant},
		{"Unix seconds read", *p.Transcript[3].At, time.Date(2026, 6, 2, 14, 3, 11, 0, time.UTC)},
		{"content parts joined", strings.HasPrefix(p.Transcript[4].Content, "I see two charges."), true},
		{"actions from tool_state", len(p.AttemptedActions), 2},
		{"action ok", *p.AttemptedActions[1].OK, false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.what, c.got, c.want)
		}
	}
}

func TestSW4RMInlineContextEqualsBase64(t *testing.T) {
	var ctx obj
	if err := json.Unmarshal(readFile(t, sw4rmContextFile), &ctx); err != nil {
		t.Fatal(err)
	}
	req := sw4rmHarbor(t)
	delete(req, "request_id") // so that the derived ids are compared too
	base64Form := sw4rmPackage(t, encode(t, req))
	req["context_snapshot"] = ctx
	inline := sw4rmPackage(t, encode(t, req))

	a, b := encode(t, base64Form), encode(t, inline)
	if !bytes.Equal(a, b) {
		t.Errorf("inline context gives another package:\nbase64: %s\ninline: %s", a, b)
	}
}

func TestSW4RMDerivedID(t *testing.T) {
	req := minimalSW4RM()
	first := sw4rmPackage(t, encode(t, req))
	if !strings.HasPrefix(first.HandoffID, "sw4rm_") || !check.handoffID.MatchString(first.HandoffID) {
		t.Fatalf("derived handoff_id %q", first.HandoffID)
	}
	if first.SourceRunID != first.HandoffID {
		t.Errorf("source_run_id = %q, want the handoff_id without request_id or metadata.run_id", first.SourceRunID)
	}

	reformatted, err := json.MarshalIndent(req, "", "\t")
	if err != nil {
		t.Fatal(err)
	}
	reordered := []byte(`{"metadata": {"contact_id": "cust_0001"}, "reason": "Customer asks to speak to a person about closing their account.", "from_agent": "tier1-support"}`)
	for name, body := range map[string][]byte{"same body": encode(t, req), "reformatted": reformatted, "reordered": reordered} {
		if got := sw4rmPackage(t, body).HandoffID; got != first.HandoffID {
			t.Errorf("%s: handoff_id %q, want %q", name, got, first.HandoffID)
		}
	}

	req["reason"] = "Customer asks to speak to a person about their invoice."
	if got := sw4rmPackage(t, encode(t, req)).HandoffID; got == first.HandoffID {
		t.Errorf("another request got the same handoff_id %q", got)
	}
}

func TestSW4RMSyntaxErrors(t *testing.T) {
	withSnapshot := func(snapshot string) []byte {
		req := minimalSW4RM()
		req["context_snapshot"] = snapshot
		return encodeNoEscape(t, req)
	}
	badBase64 := withSnapshot("eyJjb252ZXJz!XRpb24ifQ==")
	tests := []struct {
		name       string
		body       []byte
		wantInMsg  string
		wantOffset int64
	}{
		{"malformed JSON", []byte(`{"from_agent": "tier1",`), "unexpected end of JSON input", 23},
		{"bad base64", badBase64, "context_snapshot is not valid base64", int64(bytes.IndexByte(badBase64, '!') + 1)},
		{"snapshot not JSON", withSnapshot(base64.StdEncoding.EncodeToString([]byte(`{"tool_state": }`))), "in context_snapshot after base64 decoding", 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := DecodeSW4RM(tt.body)
			serr, ok := errors.AsType[*SyntaxError](err)
			if !ok {
				t.Fatalf("got %T %v, want *SyntaxError", err, err)
			}
			if !strings.Contains(err.Error(), tt.wantInMsg) {
				t.Errorf("message %q does not contain %q", err, tt.wantInMsg)
			}
			if serr.Offset != tt.wantOffset {
				t.Errorf("Offset = %d, want %d", serr.Offset, tt.wantOffset)
			}
		})
	}
}

// encodeNoEscape keeps characters such as + and ! as they are, so that a
// test can find them in the body.
func encodeNoEscape(t *testing.T, v any) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSW4RMValidationErrors(t *testing.T) {
	context := func(ctx any) func(obj) {
		return set("context_snapshot", ctx)
	}
	tests := []struct {
		name   string
		edits  []func(obj)
		fields []FieldError
	}{
		{"missing from_agent", []func(obj){drop("from_agent")},
			[]FieldError{{Field: "from_agent", Rule: "required"}}},
		{"missing contact", []func(obj){setSW4RMMeta("contact_id", nil)},
			[]FieldError{{Field: "metadata.contact_id", Rule: "required"}}},
		{"no metadata at all", []func(obj){drop("metadata")},
			[]FieldError{{Field: "metadata.contact_id", Rule: "required"}}},
		{"no problem statement anywhere", []func(obj){drop("reason")},
			[]FieldError{{Field: "reason", Rule: "required"}}},
		{"an empty request with an unknown member", []func(obj){func(r obj) { clear(r) }, set("x", 1)},
			[]FieldError{{Field: "from_agent", Rule: "required"}, {Field: "metadata.contact_id", Rule: "required"}, {Field: "reason", Rule: "required"}, {Field: "x", Rule: "unknown_field"}}},
		{"wrong JSON types", []func(obj){set("from_agent", 7), set("preserve_history", "yes"), set("capabilities_required", "billing"), setSW4RMMeta("customer", obj{"tier": "gold"})},
			[]FieldError{{Field: "capabilities_required", Rule: "type"}, {Field: "from_agent", Rule: "type"}, {Field: "metadata.customer", Rule: "type"}, {Field: "preserve_history", Rule: "type"}}},
		{"context of the wrong type", []func(obj){context(42)},
			[]FieldError{{Field: "context_snapshot", Rule: "type"}}},
		{"base64 of an array", []func(obj){context(base64.StdEncoding.EncodeToString([]byte(`[1]`)))},
			[]FieldError{{Field: "context_snapshot", Rule: "type"}}},
		{"inside the context", []func(obj){context(obj{
			"conversation_history": []any{obj{"role": "wizard", "content": "hi"}, obj{"content": "who?"}, obj{"role": "user", "content": "hi", "timestamp": "yesterday"}, "hello"},
			"tool_state":           "idle",
			"colour":               "blue",
		})}, []FieldError{
			{Field: "context_snapshot.colour", Rule: "unknown_field"},
			{Field: "context_snapshot.conversation_history[0].role", Rule: "oneof"},
			{Field: "context_snapshot.conversation_history[1].role", Rule: "required"},
			{Field: "context_snapshot.conversation_history[2].timestamp", Rule: "datetime"},
			{Field: "context_snapshot.conversation_history[3]", Rule: "type"},
			{Field: "context_snapshot.tool_state", Rule: "type"},
		}},
		{"package rules named after the request", []func(obj){
			set("request_id", "ho 1!"), set("reason", strings.Repeat("x", 501)), set("to_agent", strings.Repeat("q", 129)),
			set("capabilities_required", []any{"billing", " "}), set("timeout", "soon"),
			setSW4RMMeta("priority", "asap"), setSW4RMMeta("contact_email", "dana at example"), setSW4RMMeta("user_verified", "yes"),
			setSW4RMMeta("bad key", "v"), setSW4RMMeta("refund_amount", "49.99"),
		}, []FieldError{
			{Field: "capabilities_required[1]", Rule: "notblank"},
			{Field: "metadata.bad key", Rule: "key"},
			{Field: "metadata.contact_email", Rule: "email"},
			{Field: "metadata.priority", Rule: "oneof"},
			{Field: "metadata.refund_currency", Rule: "required"},
			{Field: "metadata.user_verified", Rule: "type"},
			{Field: "reason", Rule: "max"},
			{Field: "request_id", Rule: "handoff_id"},
			{Field: "timeout", Rule: "duration"},
			{Field: "to_agent", Rule: "max"},
		}},
		{"actions keep their place after the cap", []func(obj){context(obj{"tool_state": obj{
			"calls": append(sw4rmActionItems(60, "lookup"), obj{"tool": strings.Repeat("t", 129), "result": "ok"}),
		}})}, []FieldError{{Field: "context_snapshot.tool_state.calls[60].tool", Rule: "max"}}},
		{"negative timeout", []func(obj){set("timeout", -5)},
			[]FieldError{{Field: "timeout", Rule: "min"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := minimalSW4RM()
			for _, edit := range tt.edits {
				edit(req)
			}
			_, _, err := DecodeSW4RM(encode(t, req))
			assertFields(t, err, tt.fields...)
			if verr, ok := errors.AsType[*ValidationError](err); ok {
				for _, f := range verr.Fields {
					if !strings.HasPrefix(f.Message, f.Field) {
						t.Errorf("message %q does not start with its field %q", f.Message, f.Field)
					}
				}
			}
		})
	}
}

func TestSW4RMBodyMustBeObject(t *testing.T) {
	for _, body := range []string{`[]`, `"request"`, `null`} {
		_, _, err := DecodeSW4RM([]byte(body))
		assertFields(t, err, FieldError{Field: "", Rule: "type"})
	}
}

func TestSW4RMMapping(t *testing.T) {
	history := func(n int) []any {
		msgs := make([]any, n)
		for i := range msgs {
			msgs[i] = obj{"role": "user", "content": fmt.Sprint("message ", i)}
		}
		return msgs
	}
	tests := []struct {
		name  string
		edits []func(obj)
		check func(p Package) string
	}{
		{"warm by default, as in SW4RM", nil, func(p Package) string {
			return mismatch(p.TransferMode, TransferModeWarm)
		}},
		{"no preserve_history: cold and no transcript", []func(obj){set("preserve_history", false), set("context_snapshot", obj{"conversation_history": history(3)})},
			func(p Package) string {
				return mismatch(p.TransferMode, TransferModeCold) + mismatch(len(p.Transcript), 0)
			}},
		{"trigger: user_request by default", nil, func(p Package) string {
			return mismatch(p.Trigger, TriggerUserRequest)
		}},
		{"trigger: capability_mismatch with capabilities", []func(obj){set("capabilities_required", []any{"refunds"})},
			func(p Package) string { return mismatch(p.Trigger, TriggerCapabilityMismatch) }},
		{"trigger: an unknown metadata.trigger is ignored", []func(obj){set("capabilities_required", []any{"refunds"}), setSW4RMMeta("trigger", "escalate")},
			func(p Package) string { return mismatch(p.Trigger, TriggerCapabilityMismatch) }},
		{"trigger: a valid metadata.trigger wins", []func(obj){setSW4RMMeta("trigger", "tool_failure")},
			func(p Package) string { return mismatch(p.Trigger, TriggerToolFailure) }},
		{"problem statement: first paragraph of the reason", []func(obj){set("reason", "  Wants a refund.\nCharged twice.\n\nTranscript follows.")},
			func(p Package) string { return mismatch(p.ProblemStatement, "Wants a refund.\nCharged twice.") }},
		{"problem statement: metadata, cut to 1000", []func(obj){setSW4RMMeta("problem_statement", strings.Repeat("é", 1200))},
			func(p Package) string {
				return mismatch(p.ProblemStatement, strings.Repeat("é", 999)+"…")
			}},
		{"transcript: the last 200 turns", []func(obj){set("context_snapshot", obj{"conversation_history": history(250)})},
			func(p Package) string {
				return mismatch(len(p.Transcript), 200) + mismatch(p.Transcript[0].Content, "message 50")
			}},
		{"tool state: a bare list of actions", []func(obj){set("context_snapshot", obj{"tool_state": sw4rmActionItems(2, "search_kb")})},
			func(p Package) string {
				return mismatch(len(p.AttemptedActions), 2) + mismatch(len(p.StructuredEntities), 0)
			}},
		{"tool state: actions capped to the last 50", []func(obj){set("context_snapshot", obj{"tool_state": obj{"calls": sw4rmActionItems(60, "search_kb")}})},
			func(p Package) string {
				return mismatch(len(p.AttemptedActions), 50) + mismatch(p.AttemptedActions[0].Result, "result 10")
			}},
		{"tool state: other shapes summed up, keys made to fit", []func(obj){set("context_snapshot", obj{"tool_state": obj{
			"cart items": []any{obj{"sku": "A1", "qty": 2}},
			"empty":      "",
			"retries":    3,
		}})}, func(p Package) string {
			return mismatch(p.StructuredEntities["tool_state.cart_items"].Text(), `[{"qty":2,"sku":"A1"}]`) +
				mismatch(p.StructuredEntities["tool_state.retries"].Text(), "3") +
				mismatch(len(p.StructuredEntities), 2)
		}},
		{"null counts as absent, as Python's None", []func(obj){
			set("to_agent", nil), set("context_snapshot", nil), set("request_id", nil), set("timeout", nil), setSW4RMMeta("locale", nil),
		}, func(p Package) string { return mismatch(p.Locale, "") }},
		{"metadata numbers and booleans as text", []func(obj){setSW4RMMeta("user_verified", true), setSW4RMMeta("order_id", 8812)},
			func(p Package) string {
				return mismatch(p.UserVerified, true) + mismatch(p.StructuredEntities["order_id"].Text(), "8812")
			}},
		{"an empty context_snapshot is no context", []func(obj){set("context_snapshot", "")},
			func(p Package) string { return mismatch(len(p.Transcript), 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := minimalSW4RM()
			for _, edit := range tt.edits {
				edit(req)
			}
			p := sw4rmPackage(t, encode(t, req))
			if err := p.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if problem := tt.check(p); problem != "" {
				t.Error(problem)
			}
		})
	}
}

func TestSW4RMRequestFields(t *testing.T) {
	req, _, err := DecodeSW4RM(readFile(t, sw4rmRequestFile))
	if err != nil {
		t.Fatal(err)
	}
	if req.ToAgent != "billing_t2" || req.Priority != 2 || req.Timeout != 30*time.Minute || req.CapabilitiesRequired[0] != "billing_refunds" {
		t.Errorf("request = %+v", req)
	}
	for _, body := range []string{`{"timeout": 1.5}`, `{"timeout": "1.5s"}`} {
		r, _, _ := DecodeSW4RM([]byte(body))
		if r.Timeout != 1500*time.Millisecond {
			t.Errorf("%s: Timeout = %v", body, r.Timeout)
		}
	}
}

func TestSW4RMPackageNeedsAQueue(t *testing.T) {
	req, ctx, err := DecodeSW4RM(encode(t, minimalSW4RM()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = req.Package(ctx, "")
	assertFields(t, err, FieldError{Field: "target_profile", Rule: "required"})
}

func TestSW4RMStatusOf(t *testing.T) {
	want := map[Status]SW4RMStatus{
		StatusQueued: SW4RMPending, StatusReserved: SW4RMPending,
		StatusAccepted: SW4RMAccepted, StatusAwaitingApproval: SW4RMAccepted,
		StatusResolved:      SW4RMCompleted,
		StatusReturnedToBot: SW4RMRejected, StatusExpired: SW4RMRejected, StatusCanceled: SW4RMRejected,
	}
	for status, w := range want {
		if got := SW4RMStatusOf(status); got != w {
			t.Errorf("SW4RMStatusOf(%q) = %q, want %q", status, got, w)
		}
	}
}

func setSW4RMMeta(key string, value any) func(obj) {
	return func(r obj) { r["metadata"].(obj)[key] = value }
}

// sw4rmActionItems returns n attempted actions in the shape tool_state lists them.
func sw4rmActionItems(n int, tool string) []any {
	list := make([]any, n)
	for i := range list {
		list[i] = obj{"tool": tool, "result": fmt.Sprint("result ", i), "ok": true}
	}
	return list
}

// mismatch returns "" when got equals want, else a line saying how it differs.
func mismatch[T comparable](got, want T) string {
	if got == want {
		return ""
	}
	return fmt.Sprintf("got %v, want %v; ", got, want)
}

// FuzzDecodeSW4RM checks that DecodeSW4RM never panics, that its errors are
// complete, and that whatever it accepts converts into a valid package.
func FuzzDecodeSW4RM(f *testing.F) {
	f.Add(readFile(f, sw4rmRequestFile))
	f.Add(encode(f, minimalSW4RM()))
	for _, body := range []string{``, `{`, `[]`, `{"context_snapshot":"!"}`, `{"context_snapshot":{"tool_state":[{"tool":"t","result":"r"}]}}`} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ctx, err := DecodeSW4RM(body)
		if _, ok := errors.AsType[*SyntaxError](err); ok {
			return
		}
		if verr, ok := errors.AsType[*ValidationError](err); ok {
			for _, fe := range verr.Fields {
				if fe.Rule == "" || fe.Message == "" {
					t.Fatalf("incomplete field error %+v", fe)
				}
			}
			return
		}
		if err != nil {
			t.Fatalf("unexpected error type %T: %v", err, err)
		}
		p, err := req.Package(ctx, "billing_t2")
		if err != nil {
			t.Fatalf("accepted request does not convert: %v", err)
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("converted package is invalid: %v", err)
		}
	})
}
