package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	schemavalidator "github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/mcp/mcptest"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// bearer sends a bot's key with every request, and tells onCall of each tools/call it sends.
type bearer struct {
	key    string
	onCall func(body []byte)
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	if b.onCall != nil && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(body, []byte(`"tools/call"`)) {
			b.onCall(body)
		}
	}
	return http.DefaultTransport.RoundTrip(r)
}

// mcpSession connects the Go SDK's client to the desk's /mcp as the bot holding key.
func mcpSession(t *testing.T, deskURL string, rt http.RoundTripper) *sdk.ClientSession {
	t.Helper()
	client := sdk.NewClient(&sdk.Implementation{Name: "test-bot", Version: "1.0.0"}, nil)
	session, err := client.Connect(t.Context(), &sdk.StreamableClientTransport{Endpoint: deskURL + "/mcp",
		HTTPClient: &http.Client{Transport: rt}, DisableStandaloneSSE: true, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = session.Close() })
	return session
}

// call calls a tool and returns its result with the structured content as a map.
func call(t *testing.T, s *sdk.ClientSession, tool string, args any) (*sdk.CallToolResult, map[string]any) {
	t.Helper()
	res, err := s.CallTool(t.Context(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	var structured map[string]any
	raw, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &structured); err != nil {
		t.Fatalf("%s: structured content %s: %v", tool, raw, err)
	}
	return res, structured
}

func resultText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// mustCall calls a tool that must succeed.
func mustCall(t *testing.T, s *sdk.ClientSession, tool string, args any) map[string]any {
	t.Helper()
	res, body := call(t, s, tool, args)
	if res.IsError {
		t.Fatalf("%s refused: %s", tool, resultText(res))
	}
	return body
}

// mcpDesk is a desk with an agent of billing_t2 signed in and a bot key on that queue.
type mcpDesk struct {
	*testApp
	key   string
	agent *http.Client
}

func newMCPDesk(t *testing.T) mcpDesk {
	t.Helper()
	app := setupHooks(t, server.Config{}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	key := app.botKey(t, "tier1", "billing_t2")
	dana := app.client(t)
	app.login(t, dana, "dana@example.com")
	return mcpDesk{testApp: app, key: key, agent: dana}
}

func (d mcpDesk) act(t *testing.T, id, action string, form url.Values) {
	t.Helper()
	if status, _, body := postForm(t, d.agent, d.URL+"/handoffs/"+id+"/"+action, form); status != http.StatusSeeOther {
		t.Fatalf("%s: %d\n%.400s", action, status, body)
	}
}

// A bot's model lists the tools, hands off with a package the desk refuses, repairs it from the
// refusal and hands off again; relays the customer's message, waits for the human (a wait that
// times out, then one the agent's reply ends) and is refused talking over the human.
func TestMCPHandoffRepairRelayAndWait(t *testing.T) {
	t.Parallel()
	d := newMCPDesk(t)
	var mu sync.Mutex
	var calls [][]byte
	session := mcpSession(t, d.URL, bearer{key: d.key, onCall: func(body []byte) {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, body)
	}})

	tools, err := session.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	schemas := map[string]*schemavalidator.Schema{}
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
		schemas[tool.Name] = compileInput(t, tool)
		if tool.Description == "" {
			t.Errorf("%s has no description", tool.Name)
		}
		if tool.Name == "handoff_to_human" {
			served := d.api(t, http.MethodGet, "/api/v1/schema/handoff-v1.json", "", nil)
			got, _ := json.Marshal(tool.InputSchema)
			var want, have any
			_ = json.Unmarshal([]byte(served.Raw), &want)
			_ = json.Unmarshal(got, &have)
			if !jsonEqual(want, have) {
				t.Errorf("handoff_to_human's input schema is not the served JSON Schema:\n%.300s", got)
			}
		}
	}
	slices.Sort(names)
	if want := []string{"cancel_handoff", "get_handoff", "get_messages", "handoff_to_human", "list_open_handoffs", "post_customer_message", "record_csat"}; !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}

	// What a model sends, as it reads the schemas: the calls below that the desk takes are valid.
	valid := func(tool string, args any) any {
		t.Helper()
		raw, _ := json.Marshal(args)
		doc, err := schemavalidator.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas[tool].Validate(doc); err != nil {
			t.Errorf("%s's input schema refuses %s: %v", tool, raw, err)
		}
		return args
	}

	// The model's first try: no problem statement, an email that is none, a priority of its own.
	pkg := harbor(t, func(p map[string]any) {
		p["transfer_mode"] = "cold"
		delete(p, "problem_statement")
		p["contact"].(map[string]any)["email"] = "dana at example"
		p["priority"] = "asap"
	})
	id := pkg["handoff_id"].(string)
	res, refusal := call(t, session, "handoff_to_human", pkg)
	if !res.IsError {
		t.Fatalf("an invalid package was taken: %s", resultText(res))
	}
	t.Logf("the refusal as the model reads it:\n%s", resultText(res))
	for _, want := range []string{"HTTP 422", "- problem_statement [required]", "- contact.email [email]", "- priority [oneof]: priority must be one of: low, normal, high, urgent"} {
		if !strings.Contains(resultText(res), want) {
			t.Errorf("the refusal's text lacks %q:\n%s", want, resultText(res))
		}
	}
	// Its structured content is exactly what REST answers for the same package.
	rest := d.submit(t, d.key, pkg)
	if rest.Status != http.StatusUnprocessableEntity || !jsonEqual(rest.Body, refusal) {
		t.Errorf("MCP refused with %v, REST with %d %s", refusal, rest.Status, rest.Raw)
	}

	// The repair, then the same call again (a retry after a lost answer) answers the same.
	pkg["problem_statement"] = "Duplicate charge $49.99 on 2026-06-01; user wants refund."
	pkg["contact"].(map[string]any)["email"] = "dana.whitfield@example.com"
	pkg["priority"] = "high"
	receipt := mustCall(t, session, "handoff_to_human", valid("handoff_to_human", pkg))
	if receipt["handoff_id"] != id || receipt["status"] != "queued" || receipt["queue"] != "billing_t2" || !strings.HasSuffix(receipt["url"].(string), "/handoffs/"+id) {
		t.Errorf("receipt %v", receipt)
	}
	if again := mustCall(t, session, "handoff_to_human", pkg); !jsonEqual(again, receipt) {
		t.Errorf("the same package again answered %v, first %v", again, receipt)
	}
	if got := mustCall(t, session, "get_handoff", valid("get_handoff", map[string]any{"handoff_id": id})); got["status"] != "queued" || got["contact_id"] != "cust_9912" {
		t.Errorf("get_handoff: %v", got)
	}
	open := mustCall(t, session, "list_open_handoffs", valid("list_open_handoffs", map[string]any{"contact_id": "cust_9912"}))
	if hs := open["handoffs"].([]any); len(hs) != 1 || hs[0].(map[string]any)["handoff_id"] != id {
		t.Errorf("list_open_handoffs: %v", open)
	}

	// The customer writes; the bad relay names every field, the handoff_id among them.
	res, bad := call(t, session, "post_customer_message", map[string]any{"role": "agent", "text": "x"})
	if !res.IsError || bad["code"] != "invalid" || !strings.Contains(resultText(res), "- handoff_id [required]") ||
		!strings.Contains(resultText(res), "- role [oneof]") || !strings.Contains(resultText(res), "- message_id [required]") {
		t.Errorf("a bad relay: %s", resultText(res))
	}
	msg := map[string]any{"handoff_id": id, "message_id": "msg_1", "role": "user", "text": "Which card will it go back to?",
		"draft_reply": "The Visa ending in 4417."}
	if posted := mustCall(t, session, "post_customer_message", valid("post_customer_message", msg)); posted["seq"] != 1.0 || posted["message_id"] != "msg_1" {
		t.Errorf("posted %v", posted)
	}

	// Nobody has answered yet: a short wait ends with no message, the package still queued.
	start := time.Now()
	waited := mustCall(t, session, "get_messages", valid("get_messages", map[string]any{"handoff_id": id, "after": 1, "wait_seconds": 1}))
	if len(waited["messages"].([]any)) != 0 || waited["status"] != "queued" || time.Since(start) < time.Second {
		t.Errorf("a wait with no reply answered %v after %s", waited, time.Since(start))
	}
	if res, bad := call(t, session, "get_messages", map[string]any{"handoff_id": id, "wait_seconds": 31}); !res.IsError ||
		!strings.Contains(resultText(res), "- wait_seconds [max]: wait_seconds must be at most 30") || bad["code"] != "invalid" {
		t.Errorf("wait_seconds 31: %s", resultText(res))
	}

	// A long wait, under way before the agent accepts and replies, ends with the reply.
	mu.Lock()
	sent := len(calls)
	mu.Unlock()
	answer := make(chan map[string]any, 1)
	go func() {
		res, err := session.CallTool(context.Background(), &sdk.CallToolParams{Name: "get_messages",
			Arguments: map[string]any{"handoff_id": id, "after": 1, "wait_seconds": 30}})
		if err != nil || res.IsError {
			t.Errorf("the long wait: %v %v", err, res)
			answer <- nil
			return
		}
		raw, _ := json.Marshal(res.StructuredContent)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		answer <- body
	}()
	waitFor(t, "the long wait's call is sent", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(calls) > sent
	})
	d.act(t, id, "accept", nil)
	d.act(t, id, "reply", url.Values{"text": {"It goes back to the Visa ending in 4417."}})
	got := <-answer
	if got == nil {
		t.FailNow()
	}
	msgs := got["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["role"] != "agent" || msgs[0].(map[string]any)["text"] != "It goes back to the Visa ending in 4417." ||
		msgs[0].(map[string]any)["in_reply_to"] != 1.0 || got["status"] != "accepted" {
		t.Errorf("the wait ended with %v", got)
	}

	// The bot does not talk over the human: the refusal says so, with REST's reason.
	res, refused := call(t, session, "post_customer_message", map[string]any{"handoff_id": id, "message_id": "bot_1", "role": "assistant", "text": "Still there?"})
	if !res.IsError || refused["reason"] != "agent_holds" || !strings.Contains(resultText(res), "HTTP 409") {
		t.Errorf("the bot's own message while the agent holds it: %s", resultText(res))
	}

	// The agent hands back; a wait then answers at once, with the package the bot's again.
	d.act(t, id, "return", url.Values{"reason": {"resolved_by_policy"}, "note": {"refund issued"}})
	back := mustCall(t, session, "get_messages", map[string]any{"handoff_id": id, "after": 2, "wait_seconds": 30})
	if back["status"] != "returned_to_bot" {
		t.Errorf("after the return: %v", back)
	}
	handed := mustCall(t, session, "get_handoff", map[string]any{"handoff_id": id})
	if hb, _ := handed["hand_back"].(map[string]any); handed["outcome"] != "resolved_by_policy" || hb["last_seq"] != 2.0 ||
		hb["last_reply"].(map[string]any)["text"] != "It goes back to the Visa ending in 4417." {
		t.Errorf("get_handoff after the return: %v", handed)
	}
	// A success's structured content is the REST route's answer whole, hand-back and all.
	if rec := d.api(t, http.MethodGet, "/api/v1/handoffs/"+id, d.key, nil); rec.Status != http.StatusOK || !jsonEqual(rec.Body, handed) {
		t.Errorf("get_handoff answered %v, REST %d %s", handed, rec.Status, rec.Raw)
	}

	// The customer's verdict on the agents' part, once; a score out of range names its rule.
	if res, _ := call(t, session, "record_csat", map[string]any{"handoff_id": id, "score": 6, "leg": "human"}); !res.IsError ||
		!strings.Contains(resultText(res), "- score [max]: score must be at most 5") {
		t.Errorf("a score of 6: %s", resultText(res))
	}
	verdict := mustCall(t, session, "record_csat", valid("record_csat", map[string]any{"handoff_id": id, "score": 5, "leg": "human", "comment": "Quick and kind."}))
	if verdict["score"] != 5.0 || verdict["leg"] != "human" || verdict["comment"] != "Quick and kind." {
		t.Errorf("record_csat: %v", verdict)
	}
	if res, again := call(t, session, "record_csat", map[string]any{"handoff_id": id, "score": 4, "leg": "human"}); !res.IsError || again["reason"] != "csat_given" {
		t.Errorf("the same leg again: %s", resultText(res))
	}
}

// compileInput compiles a tool's input schema as JSON Schema 2020-12, formats asserted.
func compileInput(t *testing.T, tool *sdk.Tool) *schemavalidator.Schema {
	t.Helper()
	raw, err := json.Marshal(tool.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := schemavalidator.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	url := "https://desk.example/mcp/" + tool.Name + ".json"
	c := schemavalidator.NewCompiler()
	c.AssertFormat()
	c.DefaultDraft(schemavalidator.Draft2020)
	if err := c.AddResource(url, doc); err != nil {
		t.Fatal(err)
	}
	schema, err := c.Compile(url)
	if err != nil {
		t.Fatalf("%s's input schema: %v", tool.Name, err)
	}
	return schema
}

// jsonEqual compares two decoded JSON values.
func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

// The key's queues scope every tool; a call without a valid key is refused before any tool runs.
func TestMCPKeyScopesAndRefusals(t *testing.T) {
	t.Parallel()
	d := newMCPDesk(t)
	pkg := harbor(t, func(p map[string]any) { p["transfer_mode"] = "cold" })
	id := pkg["handoff_id"].(string)
	expect(t, "submit", d.submit(t, d.key, pkg), http.StatusCreated)

	otherKey := d.botKey(t, "other-bot", "sales")
	other := mcpSession(t, d.URL, bearer{key: otherKey})
	rest := d.api(t, http.MethodGet, "/api/v1/handoffs/"+id, otherKey, nil)
	for _, c := range []struct {
		tool string
		args map[string]any
	}{
		{"get_handoff", map[string]any{"handoff_id": id}},
		{"cancel_handoff", map[string]any{"handoff_id": id}},
		{"get_messages", map[string]any{"handoff_id": id}},
		{"post_customer_message", map[string]any{"handoff_id": id, "message_id": "m1", "role": "user", "text": "hi"}},
	} {
		res, body := call(t, other, c.tool, c.args)
		if !res.IsError || body["code"] != "not_found" || !jsonEqual(body, rest.Body) {
			t.Errorf("%s on another key's package: %s\n(REST: %s)", c.tool, resultText(res), rest.Raw)
		}
	}
	if open := mustCall(t, other, "list_open_handoffs", map[string]any{"contact_id": "cust_9912"}); len(open["handoffs"].([]any)) != 0 {
		t.Errorf("another key lists %v", open)
	}
	// Its own key may cancel it; the package answers canceled, as REST's cancel does.
	own := mcpSession(t, d.URL, bearer{key: d.key})
	if got := mustCall(t, own, "cancel_handoff", map[string]any{"handoff_id": id}); got["status"] != "canceled" {
		t.Errorf("cancel_handoff: %v", got)
	}
	// A guard's refusal says when to try again: the same bot to the same queue for the same
	// customer within the pair cooldown.
	res, guard := call(t, own, "handoff_to_human", harbor(t, func(p map[string]any) { p["transfer_mode"] = "cold" }))
	if !res.IsError || guard["code"] != "rate_limited" || guard["reason"] != "circular_handoff" ||
		!regexp.MustCompile(`(?s)HTTP 429\): .*\nTry again in \d+ seconds, not before\.$`).MatchString(resultText(res)) {
		t.Errorf("a handoff the pair guard refuses: %q %v", resultText(res), guard)
	}
	if !strings.Contains(resultText(res), "relay their message to that handoff with post_customer_message") {
		t.Errorf("the pair guard's refusal does not say which tool to use instead: %s", resultText(res))
	}

	revoked := d.botKey(t, "revoked", "billing_t2")
	if _, err := d.DB.Exec(t.Context(), `UPDATE api_keys SET revoked_at = now() WHERE name = 'revoked'`); err != nil {
		t.Fatal(err)
	}
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`
	for _, key := range []string{"", "hd_not_a_key", revoked} {
		req, err := http.NewRequest(http.MethodPost, d.URL+"/mcp", strings.NewReader(initialize))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if key != "" {
			req.Header.Set("Authorization", "Bearer "+key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), `Bearer realm="handoff-desk"`) ||
			!strings.Contains(string(body), `"code":"unauthorized"`) {
			t.Errorf("key %q: %d %q %s", key, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
		}
	}
}

// A bot built on the TypeScript SDK (npm's @modelcontextprotocol/sdk) reads the same tools and
// answers: the refusal with every bad field, the repair, a relay, a wait, a cancel.
func TestMCPWithTheTypeScriptClient(t *testing.T) {
	t.Parallel()
	d := newMCPDesk(t)
	pkg := harbor(t, func(p map[string]any) {
		p["transfer_mode"] = "cold"
		p["contact"].(map[string]any)["email"] = "dana at example"
	})
	id := pkg["handoff_id"].(string)
	repaired := harbor(t, func(p map[string]any) { p["handoff_id"], p["transfer_mode"] = id, "cold" })
	s := mcptest.Run(t, d.URL+"/mcp", d.key, []mcptest.Call{
		{Name: "handoff_to_human", Arguments: pkg},
		{Name: "handoff_to_human", Arguments: repaired},
		{Name: "post_customer_message", Arguments: map[string]any{"handoff_id": id, "message_id": "m1", "role": "user", "text": "Still there?"}},
		{Name: "get_messages", Arguments: map[string]any{"handoff_id": id, "wait_seconds": 1}},
		{Name: "cancel_handoff", Arguments: map[string]any{"handoff_id": id}},
		{Name: "get_handoff", Arguments: map[string]any{"handoff_id": "ho_nobody"}},
	})
	if s.Server != "handoff-desk" || !strings.Contains(s.Instructions, "handoff_to_human") || len(s.Tools) != 7 {
		t.Errorf("server %q, %d tools, instructions %q", s.Server, len(s.Tools), s.Instructions)
	}
	r := s.Results
	if !r[0].IsError || !strings.Contains(r[0].Text, "- contact.email [email]") || r[0].StructuredContent["code"] != "invalid" {
		t.Errorf("the invalid package: %+v", r[0])
	}
	if r[1].IsError || r[1].StructuredContent["handoff_id"] != id || r[1].StructuredContent["status"] != "queued" {
		t.Errorf("the repaired package: %+v", r[1])
	}
	if r[2].IsError || r[2].StructuredContent["seq"] != 1.0 {
		t.Errorf("the relay: %+v", r[2])
	}
	if msgs, _ := r[3].StructuredContent["messages"].([]any); r[3].IsError || len(msgs) != 1 || r[3].StructuredContent["status"] != "queued" {
		t.Errorf("the wait: %+v", r[3])
	}
	if r[4].IsError || r[4].StructuredContent["status"] != "canceled" {
		t.Errorf("the cancel: %+v", r[4])
	}
	if !r[5].IsError || r[5].StructuredContent["code"] != "not_found" || !strings.Contains(r[5].Text, "HTTP 404") {
		t.Errorf("an unknown handoff: %+v", r[5])
	}
}

// Every tool refuses bad arguments by naming the field and its rule; the refusals whose REST
// message names a route tell the model which tool to call instead; and a key's queues bound
// record_csat and handoff_to_human as they bound the other tools. Where a REST route takes the
// same call, the refusal's structured content is its answer exactly.
func TestMCPRefusalsNameTheFieldAndTheWayOn(t *testing.T) {
	t.Parallel()
	d := newMCPDesk(t)
	forContact := func(contact string) map[string]any {
		return harbor(t, func(p map[string]any) {
			p["transfer_mode"] = "cold"
			p["contact"].(map[string]any)["id"] = contact
		})
	}
	open := forContact("cust_open")
	expect(t, "submit the open package", d.submit(t, d.key, open), http.StatusCreated)
	openID := open["handoff_id"].(string)
	closed := forContact("cust_closed")
	expect(t, "submit the closed package", d.submit(t, d.key, closed), http.StatusCreated)
	closedID := closed["handoff_id"].(string)
	expect(t, "cancel it", d.api(t, http.MethodPost, "/api/v1/handoffs/"+closedID+"/cancel", d.key, nil), http.StatusOK)

	otherKey := d.botKey(t, "other-bot", "sales")
	own, other := mcpSession(t, d.URL, bearer{key: d.key}), mcpSession(t, d.URL, bearer{key: otherKey})
	again := forContact("cust_open")
	relay := map[string]any{"message_id": "late", "role": "user", "text": "Are you still there?"}
	verdict := map[string]any{"score": 4, "leg": "bot"}
	type rest struct{ method, path, key string } // the same call as a request; "" for none
	for _, c := range []struct {
		name    string
		session *sdk.ClientSession
		tool    string
		args    map[string]any
		rest    rest
		body    any // the request's body, when it differs from args
		want    []string
		reason  string         // the body's reason, or its code
		has     map[string]any // members the body must hold besides
	}{
		{name: "get_handoff without handoff_id", session: own, tool: "get_handoff", args: map[string]any{},
			want: []string{"HTTP 422", "- handoff_id [required]"}, reason: "invalid"},
		{name: "get_handoff with a malformed handoff_id", session: own, tool: "get_handoff", args: map[string]any{"handoff_id": "ho bad/id"},
			want: []string{"HTTP 422", "- handoff_id [handoff_id]"}, reason: "invalid"},
		{name: "cancel_handoff with a number for handoff_id", session: own, tool: "cancel_handoff", args: map[string]any{"handoff_id": 42},
			want: []string{"HTTP 422", "- handoff_id [type]: handoff_id must be a string"}, reason: "invalid"},
		{name: "cancel_handoff with an argument it does not take", session: own, tool: "cancel_handoff", args: map[string]any{"handoff_id": openID, "why": "left"},
			want: []string{"HTTP 422", "- why [unknown_field]"}, reason: "invalid"},
		{name: "list_open_handoffs without contact_id", session: own, tool: "list_open_handoffs", args: map[string]any{},
			want: []string{"HTTP 422", "- contact_id [required]"}, reason: "invalid"},
		{name: "list_open_handoffs with a contact_id too long", session: own, tool: "list_open_handoffs", args: map[string]any{"contact_id": strings.Repeat("c", 129)},
			want: []string{"HTTP 422", "- contact_id [max]"}, reason: "invalid"},
		{name: "handoff_to_human for a customer with a handoff open", session: own, tool: "handoff_to_human", args: again,
			rest:   rest{http.MethodPost, "/api/v1/handoffs", d.key},
			want:   []string{"HTTP 409", fmt.Sprintf("relay their messages to it with post_customer_message {handoff_id: %q} instead of handing off again", openID)},
			reason: "open_handoff", has: map[string]any{"open_handoff_id": openID}},
		{name: "post_customer_message to a canceled handoff", session: own, tool: "post_customer_message", args: with(relay, "handoff_id", closedID),
			rest: rest{http.MethodPost, "/api/v1/handoffs/" + closedID + "/messages", d.key}, body: relay,
			want:   []string{"HTTP 409", "The handoff is canceled: the conversation is yours; call handoff_to_human with a new package"},
			reason: "handoff_closed", has: map[string]any{"status": "canceled"}},
		{name: "record_csat on another key's handoff", session: other, tool: "record_csat", args: with(verdict, "handoff_id", closedID),
			rest: rest{http.MethodPost, "/api/v1/handoffs/" + closedID + "/csat", otherKey}, body: verdict,
			want: []string{"HTTP 404"}, reason: "not_found"},
		{name: "handoff_to_human to a queue outside the key's", session: other, tool: "handoff_to_human", args: forContact("cust_elsewhere"),
			rest: rest{http.MethodPost, "/api/v1/handoffs", otherKey},
			want: []string{"HTTP 403", `may not send to queue "billing_t2"`}, reason: "forbidden"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, body := call(t, c.session, c.tool, c.args)
			if !res.IsError {
				t.Fatalf("taken: %s", resultText(res))
			}
			for _, want := range c.want {
				if !strings.Contains(resultText(res), want) {
					t.Errorf("the refusal lacks %q:\n%s", want, resultText(res))
				}
			}
			if body["reason"] != c.reason && body["code"] != c.reason {
				t.Errorf("the refusal's reason and code are %v and %v, want %s", body["reason"], body["code"], c.reason)
			}
			for k, v := range c.has {
				if body[k] != v {
					t.Errorf("the refusal's %s is %v, want %v", k, body[k], v)
				}
			}
			if c.rest.path == "" {
				return
			}
			sent := c.body
			if sent == nil {
				sent = c.args
			}
			if answer := d.api(t, c.rest.method, c.rest.path, c.rest.key, sent); !jsonEqual(answer.Body, body) {
				t.Errorf("MCP refused with %v, REST with %d %s", body, answer.Status, answer.Raw)
			}
		})
	}
	if body := mustCall(t, own, "get_handoff", map[string]any{"handoff_id": closedID}); body["status"] != "canceled" {
		t.Errorf("the refused verdict changed the package: %v", body)
	}
	var verdicts int
	if err := d.DB.QueryRow(t.Context(), `SELECT count(*) FROM csat`).Scan(&verdicts); err != nil || verdicts != 0 {
		t.Errorf("another key's verdict was kept: %d (%v)", verdicts, err)
	}
}

// with is args with one more argument, args left as they were.
func with(args map[string]any, key string, value any) map[string]any {
	out := maps.Clone(args)
	out[key] = value
	return out
}
