package server_test

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// post sends body to path as contentType through c, with its length announced when known (-1
// sends it chunked), and answers the status and the body.
func post(t *testing.T, c *http.Client, u, contentType string, body io.Reader, length int64) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, body)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = length
	req.Header.Set("Content-Type", contentType)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(answer)
}

// filler is n bytes of 'x', made as they are read.
func filler(n int64) io.Reader { return io.LimitReader(xs{}, n) }

type xs struct{}

func (xs) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

// acceptedPackage submits a package to billing_t2 and has a logged-in agent accept it.
func acceptedPackage(t *testing.T, app *testApp) (*http.Client, string) {
	t.Helper()
	key := app.botKey(t, "tier1", "billing_t2", "tech_t2")
	app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2", "tech_t2")
	c := app.client(t)
	app.login(t, c, "bea@example.com")
	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	resp, err := c.PostForm(app.URL+"/handoffs/"+id+"/accept", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("accept: %d", resp.StatusCode)
	}
	return c, id
}

// Form bodies are read up to 128 KiB, on /login before anyone is known as on every other form, and
// a larger one is answered 413 naming the limit.
func TestFormBodiesAreCapped(t *testing.T) {
	t.Parallel()
	app := setup(t)
	c, id := acceptedPackage(t, app)
	const form = "application/x-www-form-urlencoded"
	const loginHead = "email=bea%40example.com&password="
	login := func(password io.Reader) io.Reader { return io.MultiReader(strings.NewReader(loginHead), password) }
	head := "--b\r\nContent-Disposition: form-data; name=\"email\"\r\n\r\nbea@example.com\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"password\"; filename=\"p\"\r\n\r\n"
	multipart := io.MultiReader(strings.NewReader(head), filler(60<<20), strings.NewReader("\r\n--b--\r\n"))
	reason := io.MultiReader(strings.NewReader("reason="), filler(200<<10))
	for _, r := range []struct {
		what, path, contentType string
		body                    io.Reader
		length                  int64
	}{
		{"9 MB login form", "/login", form, login(filler(9 << 20)), int64(len(loginHead) + 9<<20)},
		{"9 MB login form, chunked", "/login", form, login(filler(9 << 20)), -1},
		{"60 MB multipart login, chunked", "/login", "multipart/form-data; boundary=b", multipart, -1},
		{"200 KiB reject reason", "/handoffs/" + id + "/reject", form, reason, -1},
	} {
		status, body := post(t, c, app.URL+r.path, r.contentType, r.body, r.length)
		if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "128 KiB") {
			t.Errorf("%s: %d, want 413 naming the limit\n%.300s", r.what, status, body)
		}
	}
	// Just under the limit is read: the password is checked, and is wrong.
	status, body := post(t, app.client(t), app.URL+"/login", form, login(filler(127<<10)), -1)
	if status != http.StatusUnauthorized {
		t.Errorf("a 127 KiB login form: %d, want 401\n%.300s", status, body)
	}
	var state string
	if err := app.DB.QueryRow(t.Context(), `SELECT status FROM handoffs WHERE handoff_id = $1`, id).Scan(&state); err != nil || state != "accepted" {
		t.Errorf("after the refused reject the package is %q (%v), want still accepted", state, err)
	}
}

// Every reason and note an agent writes is capped at 4,000 characters, counted as characters,
// and one over is answered 422 naming the field, before it reaches the event log or a webhook.
func TestReasonsAndNotesAreCapped(t *testing.T) {
	t.Parallel()
	app := setup(t)
	c, id := acceptedPackage(t, app)
	long := strings.Repeat("n", 4001)
	for _, r := range []struct {
		action string
		form   url.Values
		field  string
	}{
		{"reject", url.Values{"reason": {long}}, "reason"},
		{"return", url.Values{"reason": {"needs_more_info"}, "note": {long}}, "note"},
		{"transfer", url.Values{"queue": {"tech_t2"}, "note": {long}}, "note"},
		{"resolve", url.Values{"code": {"solved"}, "note": {long}}, "note"},
	} {
		status, body := post(t, c, app.URL+"/handoffs/"+id+"/"+r.action, "application/x-www-form-urlencoded", strings.NewReader(r.form.Encode()), -1)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, r.field+" is 4001 characters; at most 4000") {
			t.Errorf("%s with a %s of 4001 characters: %d, want 422 naming the field\n%.300s", r.action, r.field, status, body)
		}
	}
	var changes int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM events e JOIN handoffs h ON h.id = e.handoff_id
		WHERE h.handoff_id = $1 AND e.kind NOT IN ('queued', 'warm_timeout', 'accepted')`, id).Scan(&changes); err != nil || changes != 0 {
		t.Errorf("%d events (%v) after refused actions, want none", changes, err)
	}

	// 4,000 characters pass however many bytes they take: here 16,000, 48,000 once form-encoded.
	wide := strings.Repeat("😀", 4000)
	status, body := post(t, c, app.URL+"/handoffs/"+id+"/resolve", "application/x-www-form-urlencoded",
		strings.NewReader(url.Values{"code": {"solved"}, "note": {wide}}.Encode()), -1)
	if status != http.StatusSeeOther {
		t.Fatalf("resolve with a note of 4000 wide characters: %d\n%.300s", status, body)
	}
	var note string
	if err := app.DB.QueryRow(t.Context(), `SELECT outcome_note FROM handoffs WHERE handoff_id = $1`, id).Scan(&note); err != nil || note != wide {
		t.Errorf("stored note of %d bytes (%v), want the 4000 characters sent", len(note), err)
	}
}

// A NUL character, invalid UTF-8 or a number out of range in the path, the query, a form or a
// bot's JSON is the client's mistake: a 4xx that names what is wrong, never a 500 from
// PostgreSQL.
func TestBadTextAndNumbersAre4xx(t *testing.T) {
	t.Parallel()
	app := setup(t)
	c, id := acceptedPackage(t, app)
	key := app.botKey(t, "tier1-again", "billing_t2")
	const form = "application/x-www-form-urlencoded"
	// An address too long for the index of login failures, which compresses what it can.
	random := make([]byte, 10000)
	_, _ = rand.Read(random)
	long := hex.EncodeToString(random)
	for _, r := range []struct {
		method, path, contentType, body string
		status                          int
		want                            string
	}{
		{"POST", "/login", form, "email=bea%00%40example.com&password=x", 400, `form field "email" contains a NUL character`},
		{"POST", "/login", form, "email=bea%FF%40example.com&password=x", 400, `form field "email" is not valid UTF-8`},
		{"POST", "/login", form, "email=%zz", 400, "the form cannot be read"},
		{"POST", "/login", form, "email=" + long + "%40example.com&password=x", 422, "the email is 20012 characters; no address is over 254"},
		{"GET", "/handoffs/ho%00x", "", "", 400, "the id in the path contains a NUL character"},
		{"GET", "/handoffs/ho%FFx", "", "", 400, "the id in the path is not valid UTF-8"},
		{"GET", "/sidebar/ho%00x", "", "", 400, "the id in the path contains a NUL character"},
		{"POST", "/handoffs/ho%00x/accept", form, "", 400, "the id in the path contains a NUL character"},
		{"GET", "/queues/billing%00", "", "", 400, "the name in the path contains a NUL character"},
		{"POST", "/queues/billing%00/next", form, "", 400, "the name in the path contains a NUL character"},
		{"GET", "/queues/billing_t2?after=70000.0.1", "", "", 400, `cursor "70000.0.1" is not one this desk made`},
		{"GET", "/queues/billing_t2?after=%00", "", "", 400, `query parameter "after" contains a NUL character`},
		{"GET", "/ws?handoff=ho%00x", "", "", 400, `query parameter "handoff" contains a NUL character`},
		{"POST", "/handoffs/" + id + "/reject", form, "reason=a%00b", 400, `form field "reason" contains a NUL character`},
		{"POST", "/handoffs/" + id + "/transfer", form, "queue=tech%00&note=n", 400, `form field "queue" contains a NUL character`},
	} {
		req, err := http.NewRequest(r.method, app.URL+r.path, strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		if r.contentType != "" {
			req.Header.Set("Content-Type", r.contentType)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != r.status || !strings.Contains(string(body), strings.ReplaceAll(r.want, `"`, "&#34;")) {
			t.Errorf("%s %s %q: %d, want %d naming the problem (%s)\n%.400s", r.method, r.path, r.body, resp.StatusCode, r.status, r.want, body)
		}
	}

	nul := func(edit func(p map[string]any)) []byte {
		raw, err := json.Marshal(harbor(t, func(p map[string]any) {
			p["contact"].(map[string]any)["id"] = p["handoff_id"] // a contact of its own, whom no guard stops
			edit(p)
		}))
		if err != nil {
			t.Fatal(err)
		}
		return bytes.ReplaceAll(raw, []byte("NUL"), []byte(`\u0000`))
	}
	for _, r := range []struct {
		method, path string
		body         any
		status       int
		want         string
	}{
		{"POST", "/api/v1/handoffs", nul(func(p map[string]any) { p["contact"].(map[string]any)["id"] = "cust_NUL" }), 422,
			`"field":"contact.id","rule":"nul","message":"contact.id contains a NUL character`},
		{"POST", "/api/v1/handoffs", nul(func(p map[string]any) { p["draft_reply"] = "Hi NUL" }), 422, `"field":"draft_reply","rule":"nul"`},
		{"POST", "/api/v1/handoffs", nul(func(p map[string]any) { p["structured_entities"].(map[string]any)["charge_ids"] = []string{"NUL"} }), 422,
			`"field":"structured_entities.charge_ids","rule":"nul"`},
		{"POST", "/api/v1/sw4rm/handoff-requests", bytes.ReplaceAll(mustJSON(t, sw4rmRequest(t, func(r map[string]any) { r["from_agent"] = "bot NUL" })),
			[]byte("NUL"), []byte(`\u0000`)), 422, `"field":"from_agent","rule":"nul"`},
		{"GET", "/api/v1/handoffs/ho%00x", nil, 400, "the id in the path contains a NUL character"},
		{"POST", "/api/v1/handoffs/ho%00x/cancel", nil, 400, "the id in the path contains a NUL character"},
		{"GET", "/api/v1/handoffs?contact_id=cust%00", nil, 400, `query parameter \"contact_id\" contains a NUL character`},
	} {
		got := app.api(t, r.method, r.path, key, r.body)
		if got.Status != r.status || !strings.Contains(got.Raw, r.want) {
			t.Errorf("%s %s: %d, want %d naming the problem (%s)\n%.600s", r.method, r.path, got.Status, r.status, r.want, got.Raw)
		}
	}
	// A key's first characters find its row: ones that are not UTF-8, or a character cut in two,
	// are a key the desk never issued.
	for _, bad := range []string{"hdk_\xff\xff\xff\xff\xff\xff\xff\xffxyz", "hdk_aéééé1234"} {
		got := app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, bad, nil)
		if got.Status != http.StatusUnauthorized || !strings.Contains(got.Raw, "the API key is missing, unknown or revoked") {
			t.Errorf("key %q: %d, want 401\n%s", bad, got.Status, got.Raw)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}
