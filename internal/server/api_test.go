package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/queue"
)

var idCounter atomic.Int64

// harbor returns the spec's example package with a fresh id, changed by edit.
func harbor(t *testing.T, edit func(p map[string]any)) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../handoff/testdata/harbor-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	p["handoff_id"] = fmt.Sprintf("ho_test_%d", idCounter.Add(1))
	if edit != nil {
		edit(p)
	}
	return p
}

// botKey issues an API key for the named queues, creating them if needed.
func (a *testApp) botKey(t *testing.T, name string, queues ...string) string {
	t.Helper()
	ctx := context.Background()
	var ids []int64
	for _, qn := range queues {
		q, err := a.Queues.ByName(ctx, qn)
		if err != nil {
			if q, err = a.Queues.Create(ctx, queue.New{Name: qn}); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, q.ID)
	}
	k, err := a.Auth.CreateAPIKey(ctx, auth.NewAPIKey{Name: name, QueueIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	return k.Key
}

type apiAnswer struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    string
}

func (a *testApp) api(t *testing.T, method, path, key string, body any, headers ...string) apiAnswer {
	t.Helper()
	var reader io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		reader = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		reader = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, a.URL+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := conforming(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	ans := apiAnswer{Status: resp.StatusCode, Header: resp.Header, Raw: string(raw)}
	_ = json.Unmarshal(raw, &ans.Body)
	return ans
}

func (a *testApp) submit(t *testing.T, key string, pkg any) apiAnswer {
	t.Helper()
	return a.api(t, http.MethodPost, "/api/v1/handoffs", key, pkg)
}

func expect(t *testing.T, what string, got apiAnswer, status int) {
	t.Helper()
	if got.Status != status {
		t.Fatalf("%s: status %d, want %d\n%s", what, got.Status, status, got.Raw)
	}
}

func TestSubmitCreatesAndReplays(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	pkg := harbor(t, nil)

	first := app.submit(t, key, pkg)
	expect(t, "first submit", first, http.StatusCreated)
	want := map[string]any{"handoff_id": pkg["handoff_id"], "status": "queued", "queue": "billing_t2", "position": 0.0,
		"url": app.URL + "/handoffs/" + pkg["handoff_id"].(string)}
	for k, v := range want {
		if first.Body[k] != v {
			t.Errorf("201 body %s = %v, want %v", k, first.Body[k], v)
		}
	}

	again := app.submit(t, key, pkg)
	expect(t, "same id and body", again, http.StatusOK)
	if again.Raw != first.Raw {
		t.Errorf("replay answered %s, want the first answer %s", again.Raw, first.Raw)
	}

	pkg["problem_statement"] = "Something else entirely."
	expect(t, "same id, other body", app.submit(t, key, pkg), http.StatusConflict)

	// Urgent packages overtake; position counts what is offered first.
	second := app.submit(t, key, harbor(t, func(p map[string]any) { p["contact"].(map[string]any)["id"] = "cust_2"; p["priority"] = "low" }))
	expect(t, "low priority", second, http.StatusCreated)
	if second.Body["position"] != 1.0 {
		t.Errorf("low-priority package position %v, want 1", second.Body["position"])
	}
	third := app.submit(t, key, harbor(t, func(p map[string]any) { p["contact"].(map[string]any)["id"] = "cust_3"; p["priority"] = "urgent" }))
	if third.Body["position"] != 0.0 {
		t.Errorf("urgent package position %v, want 0", third.Body["position"])
	}
}

// corruptCRC flips a bit of the checksum that ends a gzip stream.
func corruptCRC(gz []byte) []byte {
	out := slices.Clone(gz)
	out[len(out)-8] ^= 1
	return out
}

func gzipped(t *testing.T, data []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSubmitRefusesBadRequests(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	otherKey := app.botKey(t, "tech-bot", "tech_t2")
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET required_entity_keys = '{account_id,order_id}' WHERE name = 'billing_t2'`); err != nil {
		t.Fatal(err)
	}
	valid := func() map[string]any {
		return harbor(t, func(p map[string]any) { p["structured_entities"].(map[string]any)["order_id"] = "ord_1" })
	}
	raw, _ := json.Marshal(valid())
	huge := harbor(t, func(p map[string]any) { p["draft_reply"] = strings.Repeat("x", 300<<10) })
	hugeRaw, _ := json.Marshal(huge)

	cases := []struct {
		name    string
		key     string
		body    any
		headers []string
		status  int
		want    string
	}{
		{"no key", "", valid(), nil, 401, "Authorization: Bearer"},
		{"unknown key", "hdk_notakey_at_all_000000000000", valid(), nil, 401, "missing, unknown or revoked"},
		{"key not on the queue", otherKey, valid(), nil, 403, `may not send to queue "billing_t2"`},
		{"malformed JSON", key, []byte(`{"schema_version": "1.0",`), nil, 400, "malformed JSON"},
		{"not JSON", key, raw, []string{"Content-Type", "text/plain"}, 415, "application/json"},
		{"unknown encoding", key, raw, []string{"Content-Encoding", "br"}, 415, "gzip"},
		{"corrupt gzip", key, []byte("not gzip"), []string{"Content-Encoding", "gzip"}, 400, "not valid gzip"},
		// A gzip header, then a stream deflate cannot read (a reserved block type).
		{"corrupt deflate in gzip", key, append(gzipped(t, nil)[:10], 0xff, 0xff, 0xff, 0xff), []string{"Content-Encoding", "gzip"}, 400,
			"the gzip body is corrupt"},
		{"right-to-left override in source_agent", key, harbor(t, func(p map[string]any) { p["source_agent"] = "tier1\u202etroppus" }), nil,
			422, `"field":"source_agent","rule":"visible_text"`},
		{"zero-width space in the contact's name", key, harbor(t, func(p map[string]any) {
			p["contact"].(map[string]any)["display_name"] = "Dana\u200bWhitfield"
		}), nil, 422, `"field":"contact.display_name","rule":"visible_text"`},
		{"checksum wrong", key, corruptCRC(gzipped(t, raw)), []string{"Content-Encoding", "gzip"}, 400, "the gzip body is corrupt"},
		{"over 256 KiB", key, hugeRaw, nil, 413, "over 256 KiB"},
		{"over 256 KiB once gunzipped", key, gzipped(t, hugeRaw), []string{"Content-Encoding", "gzip"}, 413, "after decompression"},
		{"gzip accepted", key, gzipped(t, raw), []string{"Content-Encoding", "gzip"}, 201, `"status":"queued"`},
		{"unknown queue", key, harbor(t, func(p map[string]any) { p["target_profile"] = "nope" }), nil, 422, `"field":"target_profile"`},
		{"missing required entity", key, harbor(t, nil), nil, 422, `"field":"structured_entities.order_id","rule":"required"`},
	}
	for _, c := range cases {
		got := app.api(t, http.MethodPost, "/api/v1/handoffs", c.key, c.body, c.headers...)
		if got.Status != c.status || !strings.Contains(got.Raw, c.want) && !strings.Contains(fmt.Sprint(got.Body["error"]), c.want) {
			t.Errorf("%s: %d %s, want %d containing %q", c.name, got.Status, got.Raw, c.status, c.want)
		}
	}

	// Every bad field in one answer, the queue's own rules included.
	bad := harbor(t, func(p map[string]any) {
		p["channel_origin"] = "pigeon"
		delete(p, "problem_statement")
		p["sentiment"] = "meh"
		p["citations"] = []string{"not a uri"}
		p["surprise"] = true
	})
	got := app.submit(t, key, bad)
	expect(t, "six problems", got, 422)
	var fields []string
	for _, f := range got.Body["fields"].([]any) {
		fm := f.(map[string]any)
		fields = append(fields, fm["field"].(string)+":"+fm["rule"].(string))
		if fm["message"] == "" {
			t.Errorf("field %v has no message", fm)
		}
	}
	if strings.Join(fields, " ") != "channel_origin:oneof citations[0]:uri problem_statement:required sentiment:oneof structured_entities.order_id:required surprise:unknown_field" {
		t.Errorf("422 fields %v, want every problem named", fields)
	}
}

func TestGuards(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2", "billing_escalations")
	ctx := t.Context()
	exec := func(sql string) {
		t.Helper()
		if _, err := app.DB.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	forContact := func(contact, source string) map[string]any {
		return harbor(t, func(p map[string]any) {
			p["contact"].(map[string]any)["id"] = contact
			p["source_agent"] = source
		})
	}
	cancel := func(a apiAnswer) {
		t.Helper()
		expect(t, "cancel", app.api(t, http.MethodPost, "/api/v1/handoffs/"+a.Body["handoff_id"].(string)+"/cancel", key, nil), 200)
	}

	t.Run("one open handoff per contact", func(t *testing.T) {
		first := app.submit(t, key, forContact("c_open", "bot-a"))
		expect(t, "first", first, 201)
		second := app.submit(t, key, forContact("c_open", "bot-b"))
		expect(t, "second while open", second, 409)
		if second.Body["reason"] != "open_handoff" || second.Body["open_handoff_id"] != first.Body["handoff_id"] {
			t.Errorf("409 should name the open handoff: %s", second.Raw)
		}
	})

	t.Run("same source to same queue refused for 30 minutes", func(t *testing.T) {
		first := app.submit(t, key, forContact("c_pair", "bot-a"))
		expect(t, "first", first, 201)
		cancel(first)
		again := app.submit(t, key, forContact("c_pair", "bot-a"))
		expect(t, "circular", again, 429)
		if again.Body["reason"] != "circular_handoff" || again.Header.Get("Retry-After") == "" {
			t.Errorf("429 wants reason circular_handoff and Retry-After: %v %s", again.Header, again.Raw)
		}
		expect(t, "another source", app.submit(t, key, forContact("c_pair", "bot-b")), 201)
	})

	t.Run("three an hour per contact", func(t *testing.T) {
		for i := range 3 {
			a := app.submit(t, key, forContact("c_hour", fmt.Sprintf("bot-%d", i)))
			expect(t, "within the limit", a, 201)
			cancel(a)
		}
		over := app.submit(t, key, forContact("c_hour", "bot-9"))
		expect(t, "fourth in an hour", over, 429)
		if over.Body["reason"] != "contact_hourly_limit" || over.Header.Get("Retry-After") == "" {
			t.Errorf("want contact_hourly_limit with Retry-After: %v %s", over.Header, over.Raw)
		}
	})

	t.Run("ten a day per contact", func(t *testing.T) {
		for i := range 10 {
			a := app.submit(t, key, forContact("c_day", fmt.Sprintf("bot-%d", i)))
			expect(t, "within the limit", a, 201)
			cancel(a)
			// Age it past the hourly window so only the daily guard is left to count it.
			exec(fmt.Sprintf(`UPDATE handoffs SET created_at = now() - interval '2 hours' WHERE handoff_id = '%s'`, a.Body["handoff_id"]))
		}
		over := app.submit(t, key, forContact("c_day", "bot-99"))
		if over.Status != 429 || over.Body["reason"] != "contact_daily_limit" {
			t.Fatalf("eleventh in a day: %d %s", over.Status, over.Raw)
		}
	})

	t.Run("guards are configured per queue", func(t *testing.T) {
		exec(`UPDATE queues SET guard_one_open = false, guard_pair_cooldown = '0', guard_contact_hourly = 5 WHERE name = 'billing_t2'`)
		for i := range 5 {
			expect(t, "relaxed queue", app.submit(t, key, forContact("c_relaxed", "bot-a")), 201)
			_ = i
		}
		expect(t, "sixth", app.submit(t, key, forContact("c_relaxed", "bot-a")), 429)
	})

	t.Run("a long chain goes to the escalation queue", func(t *testing.T) {
		exec(`UPDATE queues SET escalation_queue_id = (SELECT id FROM queues WHERE name = 'billing_escalations') WHERE name = 'billing_t2'`)
		a := app.submit(t, key, harbor(t, func(p map[string]any) {
			p["contact"].(map[string]any)["id"] = "c_chain"
			p["handoff_chain"] = []string{"tier1-support", "billing-bot", "retention-bot"}
		}))
		expect(t, "chain of 3", a, 201)
		if a.Body["queue"] != "billing_escalations" || a.Body["escalated"] != true {
			t.Errorf("chain of 3 landed in %v (escalated %v), want billing_escalations", a.Body["queue"], a.Body["escalated"])
		}
	})
}

func TestGuardsHoldUnderRaces(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	const racers = 12

	race := func(pkgs []map[string]any) map[int]int {
		statuses := map[int]int{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, p := range pkgs {
			wg.Go(func() {
				a := app.submit(t, key, p)
				mu.Lock()
				statuses[a.Status]++
				mu.Unlock()
			})
		}
		wg.Wait()
		return statuses
	}

	var sameContact []map[string]any
	for i := range racers {
		sameContact = append(sameContact, harbor(t, func(p map[string]any) {
			p["contact"].(map[string]any)["id"] = "c_race"
			p["source_agent"] = fmt.Sprintf("bot-%d", i)
		}))
	}
	if got := race(sameContact); got[201] != 1 || got[409] != racers-1 {
		t.Errorf("%d racing packages for one contact: %v, want exactly one 201 and the rest 409", racers, got)
	}

	one := harbor(t, func(p map[string]any) { p["contact"].(map[string]any)["id"] = "c_same" })
	var sameBody []map[string]any
	for range racers {
		sameBody = append(sameBody, one)
	}
	if got := race(sameBody); got[201] != 1 || got[200] != racers-1 {
		t.Errorf("%d racing copies of one package: %v, want one 201 and the rest 200", racers, got)
	}
	var rows int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM handoffs WHERE contact_id IN ('c_race', 'c_same')`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 2 {
		t.Errorf("%d rows stored, want 2", rows)
	}
}

func TestReadListAndCancel(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	otherKey := app.botKey(t, "tech-bot", "tech_t2")
	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), 201)

	got := app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, key, nil)
	expect(t, "get", got, 200)
	if got.Body["status"] != "queued" || got.Body["queue"] != "billing_t2" || got.Body["expires_at"] == nil {
		t.Errorf("get: %s", got.Raw)
	}
	expect(t, "get from a key of another queue", app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, otherKey, nil), 404)
	expect(t, "get unknown", app.api(t, http.MethodGet, "/api/v1/handoffs/nope", key, nil), 404)

	list := app.api(t, http.MethodGet, "/api/v1/handoffs?contact_id=cust_9912&open=true", key, nil)
	expect(t, "list open", list, 200)
	if items := list.Body["handoffs"].([]any); len(items) != 1 || items[0].(map[string]any)["handoff_id"] != id {
		t.Errorf("open list: %s", list.Raw)
	}
	expect(t, "list without contact", app.api(t, http.MethodGet, "/api/v1/handoffs?open=true", key, nil), 400)
	expect(t, "list with a bad flag", app.api(t, http.MethodGet, "/api/v1/handoffs?contact_id=x&open=maybe", key, nil), 400)

	canceled := app.api(t, http.MethodPost, "/api/v1/handoffs/"+id+"/cancel", key, nil)
	expect(t, "cancel", canceled, 200)
	if canceled.Body["status"] != "canceled" || canceled.Body["closed_at"] == nil {
		t.Errorf("cancel: %s", canceled.Raw)
	}
	again := app.api(t, http.MethodPost, "/api/v1/handoffs/"+id+"/cancel", key, nil)
	if again.Status != 409 || !strings.Contains(again.Raw, "already canceled") {
		t.Errorf("second cancel: %d %s", again.Status, again.Raw)
	}
	expect(t, "cancel unknown", app.api(t, http.MethodPost, "/api/v1/handoffs/nope/cancel", key, nil), 404)
	if list := app.api(t, http.MethodGet, "/api/v1/handoffs?contact_id=cust_9912&open=true", key, nil); len(list.Body["handoffs"].([]any)) != 0 {
		t.Errorf("canceled package still listed as open: %s", list.Raw)
	}

	var events []string
	rows, err := app.DB.Query(t.Context(), `SELECT event FROM webhook_outbox WHERE handoff_id = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var e string
		_ = rows.Scan(&e)
		events = append(events, e)
	}
	// The package is warm and nobody was online to ring: its bot heard so before it canceled.
	if strings.Join(events, ",") != "queued,warm_timeout,canceled" {
		t.Errorf("outbox events %v, want queued,warm_timeout,canceled", events)
	}
}

func TestSchemaAndOpenAPIServed(t *testing.T) {
	t.Parallel()
	app := setup(t)
	schema := app.api(t, http.MethodGet, "/api/v1/schema/handoff-v1.json", "", nil)
	if schema.Status != 200 || schema.Body["title"] == nil || schema.Header.Get("Content-Type") != "application/schema+json" {
		t.Errorf("schema: %d %v", schema.Status, schema.Header)
	}
	spec := app.api(t, http.MethodGet, "/api/openapi.yaml", "", nil)
	if spec.Status != 200 || !strings.Contains(spec.Raw, "/api/v1/handoffs") {
		t.Errorf("openapi: %d", spec.Status)
	}
}

// HEAD on the documents answers as GET does, headers and all, without the body.
func TestDocumentsAnswerHEADLikeGET(t *testing.T) {
	t.Parallel()
	app := setup(t)
	for _, path := range []string{"/api/openapi.yaml", "/api/v1/schema/handoff-v1.json"} {
		get := app.api(t, http.MethodGet, path, "", nil)
		head := app.api(t, http.MethodHead, path, "", nil)
		if get.Status != http.StatusOK || head.Status != http.StatusOK || head.Raw != "" {
			t.Errorf("%s: GET %d, HEAD %d with a body of %d bytes; want 200, 200 and none", path, get.Status, head.Status, len(head.Raw))
			continue
		}
		get.Header.Del("Date")
		head.Header.Del("Date")
		if !maps.EqualFunc(get.Header, head.Header, slices.Equal) {
			t.Errorf("%s: HEAD's headers %v, GET's %v", path, head.Header, get.Header)
		}
		if n, err := strconv.Atoi(head.Header.Get("Content-Length")); err != nil || n != len(get.Raw) {
			t.Errorf("%s: HEAD says Content-Length %q, GET sends %d bytes", path, head.Header.Get("Content-Length"), len(get.Raw))
		}
	}
}
