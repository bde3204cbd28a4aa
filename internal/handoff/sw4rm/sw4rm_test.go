package sw4rm

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/golden"
	"github.com/handoffdesk/desk/internal/handoff"
)

var update = flag.Bool("update", false, "rewrite the golden file from the code")

const (
	requestFile  = "testdata/harbor-request.json"
	contextFile  = "testdata/harbor-context.json"
	harborGolden = "testdata/harbor-v1.golden.json"
)

// harborRequest returns the Harbor escalation as a SW4RM HandoffRequest,
// decoded for editing; its context_snapshot is base64.
func harborRequest(t *testing.T) obj {
	t.Helper()
	var req obj
	if err := json.Unmarshal(readFile(t, requestFile), &req); err != nil {
		t.Fatal(err)
	}
	return req
}

// minimalRequest returns the least a SW4RM request needs to become a package.
func minimalRequest() obj {
	return obj{
		"from_agent": "tier1-support",
		"reason":     "Customer asks to speak to a person about closing their account.",
		"metadata":   obj{"contact_id": "cust_0001"},
	}
}

func toPackage(t *testing.T, body []byte) handoff.Package {
	t.Helper()
	req, ctx, err := Decode(body)
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	p, err := req.Package(ctx, "billing_t2")
	if err != nil {
		t.Fatalf("Package: %v", err)
	}
	return p
}

func TestHarbor(t *testing.T) {
	p := toPackage(t, readFile(t, requestFile))
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if err := p.ValidateForQueue(handoff.QueueRules{RequiredEntityKeys: []string{"account_id"}}); err != nil {
		t.Fatalf("ValidateForQueue: %v", err)
	}
	golden.MatchJSON(t, harborGolden, p, "TestHarbor", *update)

	// What the golden file shows but a reader could miss.
	checks := []struct {
		what      string
		got, want any
	}{
		{"handoff_id from request_id", p.HandoffID, "ho_sw4rm_8f3a91c2"},
		{"source_run_id from metadata.run_id", p.SourceRunID, "run_t1_22a7"},
		{"target_profile is the routed queue", p.TargetProfile, "billing_t2"},
		{"warm by preserve_history", p.TransferMode, handoff.TransferModeWarm},
		{"metadata.trigger wins over capabilities", p.Trigger, handoff.TriggerPolicyBoundary},
		{"metadata.user_verified", p.UserVerified, true},
		{"metadata.refund", *p.Refund, handoff.Refund{Amount: "49.99", Currency: "USD"}},
		{"unknown metadata key becomes an entity", p.StructuredEntities["product_sku"].Text(), "PRO-MONTHLY"},
		{"tool state without action shape is summed up", p.StructuredEntities["tool_state.charge_ids"].Text(), `["ch_44b","ch_44c"]`},
		{"tool-call-only message dropped", len(p.Transcript), 5},
		{"human is user", p.Transcript[1].Role, handoff.RoleUser},
		{"ai is assistant", p.Transcript[2].Role, handoff.RoleAssistant},
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

func TestInlineContextEqualsBase64(t *testing.T) {
	var ctx obj
	if err := json.Unmarshal(readFile(t, contextFile), &ctx); err != nil {
		t.Fatal(err)
	}
	req := harborRequest(t)
	delete(req, "request_id") // so that the derived ids are compared too
	base64Form := toPackage(t, encode(t, req))
	req["context_snapshot"] = ctx
	inline := toPackage(t, encode(t, req))

	a, b := encode(t, base64Form), encode(t, inline)
	if !bytes.Equal(a, b) {
		t.Errorf("inline context gives another package:\nbase64: %s\ninline: %s", a, b)
	}
}

func TestDerivedID(t *testing.T) {
	req := minimalRequest()
	first := toPackage(t, encode(t, req))
	if !strings.HasPrefix(first.HandoffID, "sw4rm_") || !isHandoffID(first.HandoffID) {
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
		if got := toPackage(t, body).HandoffID; got != first.HandoffID {
			t.Errorf("%s: handoff_id %q, want %q", name, got, first.HandoffID)
		}
	}

	req["reason"] = "Customer asks to speak to a person about their invoice."
	if got := toPackage(t, encode(t, req)).HandoffID; got == first.HandoffID {
		t.Errorf("another request got the same handoff_id %q", got)
	}
}

func TestSyntaxErrors(t *testing.T) {
	withSnapshot := func(snapshot string) []byte {
		req := minimalRequest()
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
			_, _, err := Decode(tt.body)
			serr, ok := errors.AsType[*handoff.SyntaxError](err)
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

func TestValidationErrors(t *testing.T) {
	context := func(ctx any) func(obj) {
		return set("context_snapshot", ctx)
	}
	tests := []struct {
		name   string
		edits  []func(obj)
		fields []handoff.FieldError
	}{
		{"missing from_agent", []func(obj){drop("from_agent")},
			[]handoff.FieldError{{Field: "from_agent", Rule: "required"}}},
		{"no problem statement anywhere", []func(obj){drop("reason")},
			[]handoff.FieldError{{Field: "reason", Rule: "required"}}},
		{"an empty request with an unknown member", []func(obj){func(r obj) { clear(r) }, set("x", 1)},
			[]handoff.FieldError{{Field: "from_agent", Rule: "required"}, {Field: "reason", Rule: "required"}, {Field: "x", Rule: "unknown_field"}}},
		{"wrong JSON types", []func(obj){set("from_agent", 7), set("preserve_history", "yes"), set("capabilities_required", "billing")},
			[]handoff.FieldError{{Field: "capabilities_required", Rule: "type"}, {Field: "from_agent", Rule: "type"}, {Field: "preserve_history", Rule: "type"}}},
		{"context of the wrong type", []func(obj){context(42)},
			[]handoff.FieldError{{Field: "context_snapshot", Rule: "type"}}},
		{"base64 of an array", []func(obj){context(base64.StdEncoding.EncodeToString([]byte(`[1]`)))},
			[]handoff.FieldError{{Field: "context_snapshot", Rule: "type"}}},
		{"inside the context", []func(obj){context(obj{
			"conversation_history": []any{obj{"role": "wizard", "content": "hi"}, obj{"content": "who?"}, obj{"role": "user", "content": "hi", "timestamp": "yesterday"}, "hello"},
			"tool_state":           "idle",
			"colour":               "blue", // a member SW4RM may add later: skipped
		})}, []handoff.FieldError{
			{Field: "context_snapshot.conversation_history[0].role", Rule: "oneof"},
			{Field: "context_snapshot.conversation_history[1].role", Rule: "required"},
			{Field: "context_snapshot.conversation_history[2].timestamp", Rule: "datetime"},
			{Field: "context_snapshot.conversation_history[3]", Rule: "type"},
			{Field: "context_snapshot.tool_state", Rule: "type"},
		}},
		{"package rules named after the request", []func(obj){
			set("request_id", "ho 1!"), set("reason", strings.Repeat("x", 501)), set("to_agent", strings.Repeat("q", 129)),
			set("capabilities_required", []any{"billing", " "}), set("timeout", "soon"),
			setMeta("priority", "asap"), setMeta("contact_email", "dana at example"), setMeta("user_verified", "yes"),
			setMeta("bad key", "v"), setMeta("refund_amount", "49.99"),
		}, []handoff.FieldError{
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
			"calls": append(actionItems(60, "lookup"), obj{"tool": strings.Repeat("t", 129), "result": "ok"}),
		}})}, []handoff.FieldError{{Field: "context_snapshot.tool_state.calls[60].tool", Rule: "max"}}},
		{"negative timeout", []func(obj){set("timeout", -5)},
			[]handoff.FieldError{{Field: "timeout", Rule: "min"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := minimalRequest()
			for _, edit := range tt.edits {
				edit(req)
			}
			_, _, err := Decode(encode(t, req))
			assertFields(t, err, tt.fields...)
			if verr, ok := errors.AsType[*handoff.ValidationError](err); ok {
				for _, f := range verr.Fields {
					if !strings.HasPrefix(f.Message, f.Field) {
						t.Errorf("message %q does not start with its field %q", f.Message, f.Field)
					}
				}
			}
		})
	}
}

func TestBodyMustBeObject(t *testing.T) {
	for _, body := range []string{`[]`, `"request"`, `null`} {
		_, _, err := Decode([]byte(body))
		assertFields(t, err, handoff.FieldError{Field: "", Rule: "type"})
	}
}

func TestMapping(t *testing.T) {
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
		check func(p handoff.Package) string
	}{
		{"warm by default, as in SW4RM", nil, func(p handoff.Package) string {
			return mismatch(p.TransferMode, handoff.TransferModeWarm)
		}},
		{"no preserve_history: cold and no transcript", []func(obj){set("preserve_history", false), set("context_snapshot", obj{"conversation_history": history(3)})},
			func(p handoff.Package) string {
				return mismatch(p.TransferMode, handoff.TransferModeCold) + mismatch(len(p.Transcript), 0)
			}},
		{"trigger: user_request by default", nil, func(p handoff.Package) string {
			return mismatch(p.Trigger, handoff.TriggerUserRequest)
		}},
		{"trigger: capability_mismatch with capabilities", []func(obj){set("capabilities_required", []any{"refunds"})},
			func(p handoff.Package) string { return mismatch(p.Trigger, handoff.TriggerCapabilityMismatch) }},
		{"trigger: an unknown metadata.trigger is ignored", []func(obj){set("capabilities_required", []any{"refunds"}), setMeta("trigger", "escalate")},
			func(p handoff.Package) string { return mismatch(p.Trigger, handoff.TriggerCapabilityMismatch) }},
		{"trigger: a valid metadata.trigger wins", []func(obj){setMeta("trigger", "tool_failure")},
			func(p handoff.Package) string { return mismatch(p.Trigger, handoff.TriggerToolFailure) }},
		{"problem statement: first paragraph of the reason", []func(obj){set("reason", "  Wants a refund.\nCharged twice.\n\nTranscript follows.")},
			func(p handoff.Package) string { return mismatch(p.ProblemStatement, "Wants a refund.\nCharged twice.") }},
		{"problem statement: metadata, cut to 1000", []func(obj){setMeta("problem_statement", strings.Repeat("é", 1200))},
			func(p handoff.Package) string {
				return mismatch(p.ProblemStatement, strings.Repeat("é", 999)+"…")
			}},
		{"transcript: the last 200 turns", []func(obj){set("context_snapshot", obj{"conversation_history": history(250)})},
			func(p handoff.Package) string {
				return mismatch(len(p.Transcript), 200) + mismatch(p.Transcript[0].Content, "message 50")
			}},
		{"tool state: a bare list of actions", []func(obj){set("context_snapshot", obj{"tool_state": actionItems(2, "search_kb")})},
			func(p handoff.Package) string {
				return mismatch(len(p.AttemptedActions), 2) + mismatch(len(p.StructuredEntities), 0)
			}},
		{"tool state: actions capped to the last 50", []func(obj){set("context_snapshot", obj{"tool_state": obj{"calls": actionItems(60, "search_kb")}})},
			func(p handoff.Package) string {
				return mismatch(len(p.AttemptedActions), 50) + mismatch(p.AttemptedActions[0].Result, "result 10")
			}},
		{"tool state: other shapes summed up, keys made to fit", []func(obj){set("context_snapshot", obj{"tool_state": obj{
			"cart items": []any{obj{"sku": "A1", "qty": 2}},
			"empty":      "",
			"retries":    3,
		}})}, func(p handoff.Package) string {
			return mismatch(p.StructuredEntities["tool_state.cart_items"].Text(), `[{"qty":2,"sku":"A1"}]`) +
				mismatch(p.StructuredEntities["tool_state.retries"].Text(), "3") +
				mismatch(len(p.StructuredEntities), 2)
		}},
		{"null counts as absent, as Python's None", []func(obj){
			set("to_agent", nil), set("context_snapshot", nil), set("request_id", nil), set("timeout", nil), setMeta("locale", nil),
		}, func(p handoff.Package) string { return mismatch(p.Locale, "") }},
		{"metadata numbers and booleans as text", []func(obj){setMeta("user_verified", true), setMeta("order_id", 8812)},
			func(p handoff.Package) string {
				return mismatch(p.UserVerified, true) + mismatch(p.StructuredEntities["order_id"].Text(), "8812")
			}},
		{"an empty context_snapshot is no context", []func(obj){set("context_snapshot", "")},
			func(p handoff.Package) string { return mismatch(len(p.Transcript), 0) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := minimalRequest()
			for _, edit := range tt.edits {
				edit(req)
			}
			p := toPackage(t, encode(t, req))
			if err := p.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if problem := tt.check(p); problem != "" {
				t.Error(problem)
			}
		})
	}
}

func TestRequestFields(t *testing.T) {
	req, _, err := Decode(readFile(t, requestFile))
	if err != nil {
		t.Fatal(err)
	}
	if req.ToAgent != "billing_t2" || req.Priority != 2 || req.Timeout != 30*time.Minute || req.CapabilitiesRequired[0] != "billing_refunds" {
		t.Errorf("request = %+v", req)
	}
	for _, body := range []string{`{"timeout": 1.5}`, `{"timeout": "1.5s"}`} {
		r, _, _ := Decode([]byte(body))
		if r.Timeout != 1500*time.Millisecond {
			t.Errorf("%s: Timeout = %v", body, r.Timeout)
		}
	}
}

// A member given again replaces the earlier one, and a null given last
// leaves the default, as it would alone.
func TestRepeatedMemberReplacesTheEarlier(t *testing.T) {
	body := `{"from_agent": 7, "from_agent": "tier1-support", "reason": "Customer asks for a person.",
		"preserve_history": false, "preserve_history": null,
		"context_snapshot": "not base64!", "context_snapshot": {"conversation_history": [{"role": "user", "content": "hi"}]},
		"metadata": {"contact_id": "cust_1", "locale": "fr-FR", "locale": null, "order_id": {}, "order_id": 8812}}`
	req, ctx, err := Decode([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if req.FromAgent != "tier1-support" || !req.PreserveHistory || len(ctx.ConversationHistory) != 1 {
		t.Errorf("request %+v, context %+v", req, ctx)
	}
	if _, ok := req.Metadata["locale"]; ok || req.Metadata["order_id"] != "8812" {
		t.Errorf("metadata = %v", req.Metadata)
	}
}

func TestPackageNeedsAQueue(t *testing.T) {
	req, ctx, err := Decode(encode(t, minimalRequest()))
	if err != nil {
		t.Fatal(err)
	}
	_, err = req.Package(ctx, "")
	assertFields(t, err, handoff.FieldError{Field: "target_profile", Rule: "required"})
}

func TestStatusOf(t *testing.T) {
	want := map[handoff.Status]Status{
		handoff.StatusQueued: Pending, handoff.StatusReserved: Pending,
		handoff.StatusAccepted: Accepted, handoff.StatusAwaitingApproval: Accepted,
		handoff.StatusResolved:      Completed,
		handoff.StatusReturnedToBot: Rejected, handoff.StatusExpired: Rejected, handoff.StatusCanceled: Rejected,
	}
	for status, w := range want {
		if got := StatusOf(status); got != w {
			t.Errorf("StatusOf(%q) = %q, want %q", status, got, w)
		}
	}
}

func setMeta(key string, value any) func(obj) {
	return func(r obj) { r["metadata"].(obj)[key] = value }
}

// actionItems returns n attempted actions in the shape tool_state lists them.
func actionItems(n int, tool string) []any {
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

// FuzzDecode checks that Decode never panics, that its errors are
// complete, and that whatever it accepts converts into a valid package.
func FuzzDecode(f *testing.F) {
	f.Add(readFile(f, requestFile))
	f.Add(encode(f, minimalRequest()))
	for _, body := range []string{``, `{`, `[]`, `{"context_snapshot":"!"}`, `{"context_snapshot":{"tool_state":[{"tool":"t","result":"r"}]}}`} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, ctx, err := Decode(body)
		if _, ok := errors.AsType[*handoff.SyntaxError](err); ok {
			return
		}
		if verr, ok := errors.AsType[*handoff.ValidationError](err); ok {
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

// isHandoffID reports whether id passes the package's rules for handoff_id.
func isHandoffID(id string) bool {
	verr, _ := errors.AsType[*handoff.ValidationError]((&handoff.Package{HandoffID: id}).Validate())
	return verr == nil || !slices.ContainsFunc(verr.Fields, func(f handoff.FieldError) bool { return f.Field == "handoff_id" })
}

// obj is a JSON object under construction in a test.
type obj = map[string]any

func set(field string, value any) func(obj) {
	return func(r obj) { r[field] = value }
}

func drop(field string) func(obj) {
	return func(r obj) { delete(r, field) }
}

func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertFields checks that err is a *handoff.ValidationError with exactly the wanted
// fields and rules, in order, each with a message.
func assertFields(t *testing.T, err error, want ...handoff.FieldError) {
	t.Helper()
	verr, ok := errors.AsType[*handoff.ValidationError](err)
	if !ok {
		t.Fatalf("got %T %v, want *handoff.ValidationError", err, err)
	}
	got := make([]string, len(verr.Fields))
	for i, f := range verr.Fields {
		got[i] = f.Field + " " + f.Rule
		if f.Message == "" {
			t.Errorf("%s %s has no message", f.Field, f.Rule)
		}
	}
	wantS := make([]string, len(want))
	for i, f := range want {
		wantS[i] = f.Field + " " + f.Rule
	}
	if strings.Join(got, "\n") != strings.Join(wantS, "\n") {
		t.Errorf("fields:\n  got  %q\n  want %q\nerror: %v", got, wantS, err)
	}
}
