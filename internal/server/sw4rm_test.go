package server_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

func sw4rmRequest(t *testing.T, edit func(r map[string]any)) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../handoff/sw4rm/testdata/harbor-request.json")
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(r)
	}
	return r
}

func TestSW4RMAdapter(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "swarm", "billing_t2", "refunds")
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET skills = '{billing_refunds,goodwill}' WHERE name = 'refunds'`); err != nil {
		t.Fatal(err)
	}
	const path = "/api/v1/sw4rm/handoff-requests"

	first := app.api(t, http.MethodPost, path, key, sw4rmRequest(t, nil))
	expect(t, "handoff request", first, 201)
	if first.Body["accepted"] != true || first.Body["status"] != "PENDING" || first.Body["handoff_id"] != "ho_sw4rm_8f3a91c2" {
		t.Fatalf("response: %s", first.Raw)
	}
	if meta := first.Body["metadata"].(map[string]any); meta["queue"] != "billing_t2" {
		t.Errorf("to_agent billing_t2 routed to %v", meta["queue"])
	}
	expect(t, "identical retry", app.api(t, http.MethodPost, path, key, sw4rmRequest(t, nil)), 200)

	refused := app.api(t, http.MethodPost, path, key, sw4rmRequest(t, func(r map[string]any) { r["request_id"] = "ho_sw4rm_second" }))
	expect(t, "second for the same contact", refused, 409)
	meta := refused.Body["metadata"].(map[string]any)
	if refused.Body["accepted"] != false || refused.Body["status"] != "REJECTED" || meta["open_handoff_id"] != "ho_sw4rm_8f3a91c2" {
		t.Errorf("refusal should be a HandoffResponse naming the open handoff: %s", refused.Raw)
	}

	routed := app.api(t, http.MethodPost, path, key, sw4rmRequest(t, func(r map[string]any) {
		r["request_id"], r["to_agent"] = "ho_sw4rm_routed", ""
		r["metadata"].(map[string]any)["contact_id"] = "cust_other"
	}))
	expect(t, "routing by capability", routed, 201)
	if routed.Body["metadata"].(map[string]any)["queue"] != "refunds" {
		t.Errorf("capabilities [billing_refunds] routed to %v, want refunds", routed.Body["metadata"])
	}
	unroutable := app.api(t, http.MethodPost, path, key, sw4rmRequest(t, func(r map[string]any) {
		r["request_id"], r["to_agent"], r["capabilities_required"] = "ho_sw4rm_lost", "", []string{"astrophysics"}
	}))
	expect(t, "no queue fits", unroutable, 422)
	if unroutable.Body["accepted"] != false || unroutable.Body["status"] != "REJECTED" ||
		!strings.Contains(fmt.Sprint(unroutable.Body["rejection_reason"]), "astrophysics") || unroutable.Body["handoff_id"] != "ho_sw4rm_lost" {
		t.Errorf("no capable queue should be a rejected HandoffResponse naming the skills: %s", unroutable.Raw)
	}
	expect(t, "malformed", app.api(t, http.MethodPost, path, key, []byte(`{"from_agent":`)), 400)
	expect(t, "no contact", app.api(t, http.MethodPost, path, key, sw4rmRequest(t, func(r map[string]any) {
		r["request_id"] = "ho_sw4rm_anon"
		delete(r["metadata"].(map[string]any), "contact_id")
	})), 201)
}

// sw4rmResponseMembers are the members of the SDK's HandoffResponse: a client that builds the
// class from the JSON breaks on any other.
var sw4rmResponseMembers = []string{"accepted", "handoff_id", "rejection_reason", "status", "metadata"}

func onlySW4RMMembers(t *testing.T, what string, a apiAnswer) {
	t.Helper()
	for k := range a.Body {
		if !slices.Contains(sw4rmResponseMembers, k) {
			t.Errorf("%s: member %q is no member of SW4RM's HandoffResponse: %s", what, k, a.Raw)
		}
	}
}

// TestSW4RMToItsSpec: the spec's own example request is taken as it stands; every answer is a
// HandoffResponse with the spec's members alone, request_id in a header; a replay of a canceled
// handoff is rejected, not accepted; bad base64 says so once.
func TestSW4RMToItsSpec(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "swarm", "security")
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET skills = '{security_analysis}' WHERE name = 'security'`); err != nil {
		t.Fatal(err)
	}
	const path = "/api/v1/sw4rm/handoff-requests"
	// The spec's "Basic Handoff with History Preservation", its context serialized and in base64.
	context := `{"conversation_history":[{"role":"user","content":"Review this code for security issues"},` +
		`{"role":"assistant","content":"I'll need to hand this off to a specialist."}],"tool_state":{},"metadata":{"original_request_id":"req-123"}}`
	example := map[string]any{
		"from_agent": "general-agent-1", "to_agent": "security-specialist-1",
		"reason":           "Task requires specialized security analysis capabilities",
		"context_snapshot": base64.StdEncoding.EncodeToString([]byte(context)), "preserve_history": true,
		"capabilities_required": []string{"security_analysis"}, "metadata": map[string]any{"urgency": "high"},
	}
	taken := app.api(t, http.MethodPost, path, key, example)
	expect(t, "the spec's example", taken, 201)
	onlySW4RMMembers(t, "the spec's example", taken)
	if taken.Body["accepted"] != true || taken.Body["status"] != "PENDING" || taken.Body["metadata"].(map[string]any)["queue"] != "security" {
		t.Errorf("the spec's example: %s", taken.Raw)
	}
	id := taken.Body["handoff_id"].(string)
	pkg := app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, key, nil)
	if contact := fmt.Sprint(pkg.Body["contact_id"]); contact != "anon_"+id {
		t.Errorf("the spec's example has contact %q, want one made from its id: %s", contact, pkg.Raw)
	}

	withID := app.api(t, http.MethodPost, path, key, sw4rmRequest(t, func(r map[string]any) {
		r["to_agent"], r["capabilities_required"] = "security", []string{"security_analysis"}
	}))
	expect(t, "with request_id", withID, 201)
	onlySW4RMMembers(t, "with request_id", withID)
	if got := withID.Header.Get("SW4RM-Request-Id"); got != "ho_sw4rm_8f3a91c2" {
		t.Errorf("SW4RM-Request-Id %q, want the request's request_id", got)
	}
	expect(t, "cancel", app.api(t, http.MethodPost, "/api/v1/handoffs/ho_sw4rm_8f3a91c2/cancel", key, nil), 200)
	replay := app.api(t, http.MethodPost, path, key, sw4rmRequest(t, func(r map[string]any) {
		r["to_agent"], r["capabilities_required"] = "security", []string{"security_analysis"}
	}))
	expect(t, "replay of a canceled request", replay, 200)
	onlySW4RMMembers(t, "replay of a canceled request", replay)
	if replay.Body["accepted"] != false || replay.Body["status"] != "REJECTED" || !strings.Contains(fmt.Sprint(replay.Body["rejection_reason"]), "canceled") {
		t.Errorf("a replay of a canceled handoff: %s, want accepted false, REJECTED, saying canceled", replay.Raw)
	}

	bad := app.api(t, http.MethodPost, path, key, []byte(`{"from_agent":"a","reason":"r","context_snapshot":"@@not base64@@"}`))
	expect(t, "bad base64", bad, 400)
	if msg := fmt.Sprint(bad.Body["error"]); !strings.HasPrefix(msg, "context_snapshot is not valid base64 at byte 52") || strings.Contains(msg, "JSON") {
		t.Errorf("bad base64 reads %q, want it said once, as base64", msg)
	}
	malformed := app.api(t, http.MethodPost, path, key, []byte(`{"from_agent":`))
	if msg := fmt.Sprint(malformed.Body["error"]); strings.Count(msg, "malformed JSON") != 1 {
		t.Errorf("malformed JSON reads %q, want it said once", msg)
	}
	// A gzip body that is corrupt inside, or whose checksum is wrong, is a 400 naming the encoding,
	// as on the package route (readJSON).
	raw, err := json.Marshal(sw4rmRequest(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		"corrupt deflate in gzip": append(gzipped(t, nil)[:10], 0xff, 0xff, 0xff, 0xff),
		"checksum wrong":          corruptCRC(gzipped(t, raw)),
	} {
		got := app.api(t, http.MethodPost, path, key, body, "Content-Encoding", "gzip")
		if got.Status != http.StatusBadRequest || !strings.Contains(fmt.Sprint(got.Body["error"]), "the gzip body is corrupt") {
			t.Errorf("%s: %d %s, want 400 saying the gzip body is corrupt", name, got.Status, got.Raw)
		}
	}
}

// TestSW4RMToolSecretsReachNoPageOrExport: a connection string in the tool configurations, a
// credential-named member and a URL's password never reach a page, the API or the eval export,
// redacted or not.
func TestSW4RMToolSecretsReachNoPageOrExport(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "swarm", "billing_t2")
	app.user(t, "agent@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "adm@example.com", auth.RoleAdmin)
	agent, admin := app.client(t), app.client(t)
	app.login(t, agent, "agent@example.com")
	app.login(t, admin, "adm@example.com")
	secrets := []string{"s3cr3t-pw-4411", "sk-live-0042-meta", "tok-active-0099", "rootpw-cache-77", "KV-SECRET-5", "eyJ-bearer-88", "pwd-member-9"}
	req := sw4rmRequest(t, func(r map[string]any) {
		r["metadata"].(map[string]any)["api_key"] = secrets[1]
		// A connection string under a neutral name: its password goes, the rest stays.
		r["metadata"].(map[string]any)["db"] = "Server=db;User Id=sa;Password=" + secrets[4] + ";"
		r["context_snapshot"] = map[string]any{
			"conversation_history": []any{map[string]any{"role": "user", "content": "I was charged twice"}},
			"tool_state": map[string]any{
				"configurations": map[string]any{"database": map[string]any{"connection_string": "postgres://app:" + secrets[0] + "@db/prod"}},
				"active_calls": []any{map[string]any{"call_id": "call_1", "tool": "crm", "auth_token": secrets[2],
					"args": "Authorization: Bearer " + secrets[5]}},
				"cached_results": map[string]any{"call_2": map[string]any{"source": "mysql://root:" + secrets[3] + "@10.0.0.1/crm", "rows": 3,
					"pwd": secrets[6]}},
			},
		}
	})
	expect(t, "submit", app.api(t, http.MethodPost, "/api/v1/sw4rm/handoff-requests", key, req), 201)
	id := "ho_sw4rm_8f3a91c2"
	if status, _, body := postForm(t, agent, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d %s", status, body)
	}
	if status, _, body := postForm(t, agent, app.URL+"/handoffs/"+id+"/reply", url.Values{"text": {"We refunded the second charge."}}); status != http.StatusSeeOther {
		t.Fatalf("reply: %d %s", status, body)
	}
	var seen int
	check := func(where, body string) {
		t.Helper()
		seen++
		for _, s := range secrets {
			if strings.Contains(body, s) {
				t.Errorf("%s shows %q", where, s)
			}
		}
	}
	for _, c := range []struct {
		who    string
		client *http.Client
		paths  []string
	}{
		{"agent", agent, []string{"/handoffs/" + id, "/sidebar/" + id, "/mine"}},
		{"admin", admin, []string{"/handoffs/" + id, "/audit?package=" + id, "/evals/export.jsonl?format=openai-sft",
			"/evals/export.jsonl?format=openai-sft&redact=true", "/evals/export.jsonl", "/packages/export.csv"}},
	} {
		for _, p := range c.paths {
			resp, body := get(t, c.client, app.URL+p)
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s GET %s: %d", c.who, p, resp.StatusCode)
			}
			check(c.who+" GET "+p, body)
		}
	}
	check("the bot's GET", app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, key, nil).Raw)
	if _, body := get(t, admin, app.URL+"/evals/export.jsonl?format=openai-sft"); !strings.Contains(body, "We refunded the second charge.") {
		t.Errorf("the export lacks the reply, so it proves nothing:\n%.500s", body)
	}
	t.Logf("checked %d answers", seen)
}
