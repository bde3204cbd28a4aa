package server_test

import (
	"encoding/csv"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// searchIDs runs /packages?query as c and returns the status, the ids listed, the next page's
// link and the body.
func searchIDs(t *testing.T, app *testApp, c *http.Client, query url.Values) (int, []string, string, string) {
	t.Helper()
	resp, body := get(t, c, app.URL+"/packages?"+query.Encode())
	var ids []string
	for _, m := range regexp.MustCompile(`data-testid="search-row" data-id="([^"]+)"`).FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	more := ""
	if m := regexp.MustCompile(`href="(/packages\?[^"]*after=[^"]*)" [^>]*data-testid="more"`).FindStringSubmatch(body); m != nil {
		more = strings.ReplaceAll(m[1], "&amp;", "&")
	}
	return resp.StatusCode, ids, more, body
}

// searchDesk is a queue whose customers only supervisors see, with account_id a PII entity, an
// agent who works it, a supervisor, and a package in another queue.
type searchDesk struct {
	app                  *testApp
	key                  string // the bot's
	agent, sup           *http.Client
	harbor, named, other string // the Harbor package; one whose problem statement names Dana; another queue's
}

func newSearchDesk(t *testing.T) searchDesk {
	t.Helper()
	app := setup(t)
	key := app.botKey(t, "s_bot", "s_billing", "s_sales")
	app.user(t, "agent@example.com", auth.RoleAgent, "s_billing")
	app.user(t, "sup@example.com", auth.RoleSupervisor)
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET pii_min_role = 'supervisor', pii_entity_keys = '{account_id}'`); err != nil {
		t.Fatal(err)
	}
	d := searchDesk{app: app, key: key, agent: app.client(t), sup: app.client(t)}
	app.login(t, d.agent, "agent@example.com")
	app.login(t, d.sup, "sup@example.com")
	submit := func(queue string, edit func(map[string]any)) string {
		p := harborFor(t, queue).(map[string]any)
		p["transfer_mode"] = "cold"
		if edit != nil {
			edit(p)
		}
		expect(t, "submit", app.submit(t, key, p), http.StatusCreated)
		return p["handoff_id"].(string)
	}
	d.harbor = submit("s_billing", nil)
	d.named = submit("s_billing", func(p map[string]any) {
		p["problem_statement"] = "Dana Whitfield reports a frozen card."
		p["contact"].(map[string]any)["email"] = "dana.w@example.org"
	})
	d.other = submit("s_sales", func(p map[string]any) { p["problem_statement"] = "Duplicate charge in sales." })
	// The supervisor's note, through the desk's own route: its words are found too.
	if status, _, body := postForm(t, d.sup, app.URL+"/handoffs/"+d.named+"/notes", url.Values{"text": {"Whitfield prefers a callback on Tuesdays"}}); status != http.StatusSeeOther {
		t.Fatalf("note: %d\n%s", status, body)
	}
	return d
}

// A supervisor finds a package by its id, its contact's id, name, email or phone, whole or in
// part, and by words of its problem statement, entities and notes.
func TestSearchFindsByIdContactAndWords(t *testing.T) {
	t.Parallel()
	d := newSearchDesk(t)
	contactOf := func(id string) string { return "cust_" + id }
	for _, c := range []struct {
		q    string
		want []string
	}{
		{d.harbor, []string{d.harbor}},
		{contactOf(d.harbor), []string{d.harbor}},
		{"dana.whitfield@example.com", []string{d.other, d.harbor}},
		{"Whitf", []string{d.other, d.named, d.harbor}},
		{"+1-415-555-0134", []string{d.other, d.named, d.harbor}},
		{"example.org", []string{d.named}},
		{"frozen card", []string{d.named}},
		{"acct_9912", []string{d.other, d.named, d.harbor}},
		{"callback tuesdays", []string{d.named}},
		{"goodwill", []string{d.other, d.named, d.harbor}},
		{"nothing-like-this", nil},
	} {
		status, ids, _, body := searchIDs(t, d.app, d.sup, url.Values{"q": {c.q}})
		if status != http.StatusOK || !slices.Equal(ids, c.want) {
			t.Errorf("supervisor q=%q: %d %v, want %v\n%.500s", c.q, status, ids, c.want, body)
		}
	}
}

// An agent finds only their queues' packages, and never by a value their role sees masked: the
// contact's name, email or phone, a PII entity, or a name in free text or a note.
func TestSearchIsNoOracleForWhatTheAgentCannotSee(t *testing.T) {
	t.Parallel()
	d := newSearchDesk(t)
	for _, c := range []struct {
		q    string
		want []string
	}{
		{d.harbor, []string{d.harbor}},
		{d.other, nil}, // another queue's
		{"Dana", nil},
		{"Whitfield", nil},
		{"Whitf", nil},
		{"dana.whitfield@example.com", nil},
		{"example.org", nil},
		{"415-555-0134", nil},
		{"acct_9912", nil},
		{"Whitfield prefers", nil},
		{"frozen card", []string{d.named}},
		{"prefers callback", []string{d.named}},
		{"duplicate charge", []string{d.harbor}},
	} {
		status, ids, _, body := searchIDs(t, d.app, d.agent, url.Values{"q": {c.q}})
		if status != http.StatusOK || !slices.Equal(ids, c.want) {
			t.Errorf("agent q=%q: %d %v, want %v", c.q, status, ids, c.want)
		}
		// The search box keeps what was typed; what follows the form is what was found.
		_, form, _ := strings.Cut(body, `data-testid="search-form"`)
		if _, found, _ := strings.Cut(form, "</form>"); strings.Contains(found, "Whitfield") || strings.Contains(found, "dana.whitfield") {
			t.Errorf("agent q=%q: the page shows the customer unmasked", c.q)
		}
	}
	status, _, _, body := searchIDs(t, d.app, d.agent, url.Values{"queue": {"s_sales"}})
	if status != http.StatusBadRequest || !strings.Contains(body, `data-testid="error-queue"`) {
		t.Errorf("agent filtering another queue: %d, want 400 beside the queue field\n%.800s", status, body)
	}
}

// Every filter narrows the list; a parameter the desk does not know or cannot read is a 400 that
// names it, with the form kept.
func TestSearchFilters(t *testing.T) {
	t.Parallel()
	d := newSearchDesk(t)
	if status, _, body := postForm(t, d.sup, d.app.URL+"/handoffs/"+d.named+"/return", url.Values{"reason": {"needs_more_info"}}); status != http.StatusSeeOther {
		t.Fatalf("return: %d %.300s", status, body)
	}
	if _, err := d.app.DB.Exec(t.Context(), `UPDATE handoffs SET repeat_contact = true, created_at = created_at - interval '2 days'
		WHERE handoff_id = $1`, d.harbor); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		query url.Values
		want  []string
	}{
		{url.Values{}, []string{d.other, d.named, d.harbor}},
		{url.Values{"queue": {"s_sales"}}, []string{d.other}},
		{url.Values{"status": {"returned_to_bot"}}, []string{d.named}},
		{url.Values{"outcome": {"needs_more_info"}}, []string{d.named}},
		{url.Values{"trigger": {"policy_boundary"}}, []string{d.other, d.named, d.harbor}},
		{url.Values{"trigger": {"tool_failure"}}, nil},
		{url.Values{"source_agent": {"tier1-support"}, "queue": {"s_billing"}}, []string{d.named, d.harbor}},
		{url.Values{"repeat": {"true"}}, []string{d.harbor}},
		{url.Values{"repeat": {"false"}, "q": {"duplicate"}}, []string{d.other}},
		{url.Values{"sla_breached": {"true"}}, []string{d.harbor}},
		{url.Values{"until": {"2000-01-01"}}, nil},
	} {
		status, ids, _, body := searchIDs(t, d.app, d.sup, c.query)
		if status != http.StatusOK || !slices.Equal(ids, c.want) {
			t.Errorf("%s: %d %v, want %v\n%.400s", c.query.Encode(), status, ids, c.want, body)
		}
	}
	for _, c := range []struct {
		query url.Values
		param string
	}{
		{url.Values{"qq": {"x"}}, "unknown parameter \"qq\""},
		{url.Values{"status": {"lost"}}, "status \"lost\" is not one of"},
		{url.Values{"trigger": {"boredom"}}, "trigger \"boredom\""},
		{url.Values{"outcome": {"vanished"}}, "outcome \"vanished\""},
		{url.Values{"repeat": {"often"}}, "repeat \"often\""},
		{url.Values{"sla_breached": {"maybe"}}, "sla_breached \"maybe\""},
		{url.Values{"since": {"yesterday"}}, "since \"yesterday\""},
		{url.Values{"since": {"2026-06-02"}, "until": {"2026-06-01"}}, "until 2026-06-01"},
		{url.Values{"after": {"x"}}, "after \"x\""},
		{url.Values{"q": {strings.Repeat("a", 201)}}, "at most 200"},
	} {
		status, _, _, body := searchIDs(t, d.app, d.sup, c.query)
		if status != http.StatusBadRequest || !strings.Contains(body, strings.ReplaceAll(c.param, `"`, "&#34;")) {
			t.Errorf("%s: %d, want 400 saying %s\n%.600s", c.query.Encode(), status, c.param, body)
		}
	}
}

// Pages of 50, newest first, follow each other without repeating or losing a package.
func TestSearchPagesByKeyset(t *testing.T) {
	t.Parallel()
	d := newSearchDesk(t)
	// 117 more packages, as intake would store them: the trigger indexes each.
	if _, err := d.app.DB.Exec(t.Context(), `
		INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package, body_sha256, expires_at)
		SELECT 'ho_page_' || g, h.api_key_id, h.queue_id, 'queued', 1, 'cust_page_' || g, h.source_agent, h.package, h.body_sha256, h.expires_at
		FROM handoffs h, generate_series(1, 117) g WHERE h.handoff_id = $1`, d.harbor); err != nil {
		t.Fatal(err)
	}
	var all []string
	query := url.Values{"q": {"duplicate"}, "queue": {"s_billing"}}
	next := "/packages?" + query.Encode()
	for pages := 0; next != ""; pages++ {
		resp, body := get(t, d.sup, d.app.URL+next)
		if resp.StatusCode != http.StatusOK || pages > 3 {
			t.Fatalf("page %d: %d", pages, resp.StatusCode)
		}
		_, ids, more, _ := searchIDs(t, d.app, d.sup, mustQuery(t, next))
		if len(ids) != 50 && more != "" {
			t.Fatalf("page %d lists %d with a next page", pages, len(ids))
		}
		_ = body
		all = append(all, ids...)
		next = more
	}
	if len(all) != 118 || all[0] != "ho_page_117" || all[len(all)-1] != d.harbor {
		t.Fatalf("%d packages from %v to %v, want 118 from ho_page_117 to %s", len(all), all[0], all[len(all)-1], d.harbor)
	}
	seen := map[string]bool{}
	for _, id := range all {
		if seen[id] {
			t.Fatalf("%s listed twice", id)
		}
		seen[id] = true
	}
}

func mustQuery(t *testing.T, link string) url.Values {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

// Supervisors export what they found as CSV, masked for them, with cells a spreadsheet would run
// made inert; agents may not export.
func TestSearchCSV(t *testing.T) {
	t.Parallel()
	d := newSearchDesk(t)
	if _, err := d.app.DB.Exec(t.Context(), `UPDATE queues SET pii_min_role = 'admin' WHERE name = 's_sales'`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.app.DB.Exec(t.Context(), `UPDATE handoffs SET source_agent = '=HYPERLINK("http://evil")' WHERE handoff_id = $1`, d.harbor); err != nil {
		t.Fatal(err)
	}
	resp, body := get(t, d.sup, d.app.URL+"/packages/export.csv?q=duplicate")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/csv") {
		t.Fatalf("export: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	records, err := csv.NewReader(strings.NewReader(body)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 3 || records[0][0] != "handoff_id" {
		t.Fatalf("export has %d lines, want a header and 2:\n%s", len(records), body)
	}
	byID := map[string][]string{}
	for _, r := range records[1:] {
		byID[r[0]] = r
	}
	if got := byID[d.harbor][5]; got != `'=HYPERLINK("http://evil")` {
		t.Errorf("the formula cell is %q, want it made inert", got)
	}
	if got := byID[d.harbor][10]; got != "Dana Whitfield" {
		t.Errorf("the supervisor sees billing's contact as %q, want it whole", got)
	}
	if got := byID[d.other][10]; got == "Dana Whitfield" || got == "" {
		t.Errorf("the supervisor sees sales' contact as %q, want it masked (sales shows it to admins only)", got)
	}
	if resp, _ := get(t, d.agent, d.app.URL+"/packages/export.csv"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("an agent's export: %d, want 403", resp.StatusCode)
	}
	if resp, body := get(t, d.sup, d.app.URL+"/packages/export.csv?status=lost"); resp.StatusCode != http.StatusBadRequest ||
		!strings.Contains(body, "status") {
		t.Errorf("a bad filter's export: %d, want 400 naming status", resp.StatusCode)
	}
}

// searchCount reads the count line of /packages: the packages over every page and the records
// the record filter selects.
func searchCount(t *testing.T, body string) (packages, records string) {
	t.Helper()
	m := regexp.MustCompile(`data-testid="search-count" data-packages="(\d+)" data-records="(\d+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no count line in:\n%.2000s", body)
	}
	return m[1], m[2]
}

// The filters a dashboard figure needs: the holder, an accept standing, a rejection, open, and
// what was done (replies of each sort, by whom, with a tag, when; outcomes; approvals' decisions),
// each counted over every page with the records it selects.
func TestSearchFiltersByWhatWasDone(t *testing.T) {
	t.Parallel()
	d := newSearchDesk(t)
	app := d.app
	app.user(t, "blake@example.com", auth.RoleAgent, "s_billing")
	blake := app.client(t)
	app.login(t, blake, "blake@example.com")
	post := func(c *http.Client, path string, form url.Values) {
		t.Helper()
		if status, _, body := postForm(t, c, app.URL+path, form); status != http.StatusSeeOther {
			t.Fatalf("%s: %d %.300s", path, status, body)
		}
	}
	draft := harbor(t, nil)["draft_reply"].(string)
	// The agent takes the Harbor package and answers twice: the draft as is, then, when the
	// customer writes again with the bot's fresh draft, their own words.
	post(d.agent, "/handoffs/"+d.harbor+"/accept", nil)
	post(d.agent, "/handoffs/"+d.harbor+"/reply", url.Values{"text": {draft}})
	expect(t, "the customer writes again", app.api(t, http.MethodPost, "/api/v1/handoffs/"+d.harbor+"/messages", d.key,
		map[string]any{"message_id": "m1", "role": "user", "text": "Thanks, and the fee?", "draft_reply": draft}), http.StatusCreated)
	post(d.agent, "/handoffs/"+d.harbor+"/reply", url.Values{"text": {draft + " Anything else?"}, "tags": {"tone"}})
	// Blake takes the named one and rejects it; the agent takes it and resolves it.
	post(blake, "/handoffs/"+d.named+"/accept", nil)
	post(blake, "/handoffs/"+d.named+"/reject", url.Values{"reason": {"not mine"}})
	post(d.agent, "/handoffs/"+d.named+"/accept", nil)
	post(d.agent, "/handoffs/"+d.named+"/resolve", url.Values{"code": {"solved"}})

	for _, c := range []struct {
		query             url.Values
		want              []string
		packages, records string
	}{
		{url.Values{}, []string{d.other, d.named, d.harbor}, "3", "0"},
		{url.Values{"agent": {"Agent@Example.com"}}, []string{d.named, d.harbor}, "2", "0"},
		{url.Values{"agent": {"agent@example.com"}, "open": {"true"}}, []string{d.harbor}, "1", "0"},
		{url.Values{"agent": {"blake@example.com"}}, nil, "0", "0"},
		{url.Values{"accepted": {"false"}}, []string{d.other}, "1", "0"},
		{url.Values{"rejected": {"true"}}, []string{d.named}, "1", "0"},
		{url.Values{"open": {"true"}}, []string{d.other, d.harbor}, "2", "0"},
		{url.Values{"record": {"reply"}}, []string{d.harbor}, "1", "2"},
		{url.Values{"record": {"as_is"}}, []string{d.harbor}, "1", "1"},
		{url.Values{"record": {"edited"}, "tag": {"tone"}}, []string{d.harbor}, "1", "1"},
		{url.Values{"tag": {"too_long"}}, nil, "0", "0"},
		{url.Values{"record": {"scratch"}}, nil, "0", "0"},
		{url.Values{"record": {"draft"}, "record_by": {"blake@example.com"}}, nil, "0", "0"},
		{url.Values{"record_by": {"blake@example.com"}}, []string{d.named}, "1", "1"}, // the rejection
		{url.Values{"record_by": {"agent@example.com"}}, []string{d.named, d.harbor}, "2", "3"},
		{url.Values{"record": {"resolve"}}, []string{d.named}, "1", "1"},
		{url.Values{"record": {"any"}, "record_until": {"2000-01-01"}}, nil, "0", "0"},
		{url.Values{"record": {"decision"}}, nil, "0", "0"},
	} {
		status, ids, _, body := searchIDs(t, app, d.sup, c.query)
		if status != http.StatusOK || !slices.Equal(ids, c.want) {
			t.Errorf("%s: %d %v, want %v\n%.400s", c.query.Encode(), status, ids, c.want, body)
			continue
		}
		if packages, records := searchCount(t, body); packages != c.packages || records != c.records {
			t.Errorf("%s: counted %s packages, %s records; want %s, %s", c.query.Encode(), packages, records, c.packages, c.records)
		}
	}
	// An agent counts only what they may find: their queue's packages.
	if _, _, _, body := searchIDs(t, app, d.agent, url.Values{}); true {
		if packages, _ := searchCount(t, body); packages != "2" {
			t.Errorf("the agent counts %s packages, want their queue's 2", packages)
		}
	}
	// The search box lists, one page at a time, what the viewer may see: it is not counted.
	if _, _, _, body := searchIDs(t, app, d.sup, url.Values{"q": {"duplicate"}}); strings.Contains(body, `data-testid="search-count"`) {
		t.Errorf("a search by words is counted")
	}
	for _, c := range []struct {
		query url.Values
		says  string
	}{
		{url.Values{"agent": {"not an email"}}, "agent: "},
		{url.Values{"record": {"sent"}}, `record "sent" is not one of`},
		{url.Values{"tag": {"rude"}}, `tag "rude" is not one of`},
		{url.Values{"record": {"resolve"}, "tag": {"tone"}}, "record resolve is no reply"},
		{url.Values{"accepted": {"yes"}}, `accepted "yes" is neither`},
		{url.Values{"record_since": {"2026-06-02"}, "record_until": {"2026-06-01"}}, "record_until 2026-06-01"},
	} {
		status, _, _, body := searchIDs(t, app, d.sup, c.query)
		if status != http.StatusBadRequest || !strings.Contains(body, strings.ReplaceAll(c.says, `"`, "&#34;")) {
			t.Errorf("%s: %d, want 400 saying %s\n%.600s", c.query.Encode(), status, c.says, body)
		}
	}
}
