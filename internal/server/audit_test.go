package server_test

import (
	"encoding/csv"
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

var (
	auditRow  = regexp.MustCompile(`data-testid="audit-row"`)
	auditMore = regexp.MustCompile(`href="(/audit\?[^"]*)" [^>]*data-testid="more"`)
)

// The audit trail pages every event newest first without repeating or losing one, filters by
// package, actor, kind, queue and dates, refuses a filter it cannot read by name, and masks the
// details by the reader's role, in the page and both exports.
func TestAuditTrail(t *testing.T) {
	t.Parallel()
	app := setup(t)
	const q = "aud"
	key := app.botKey(t, "aud_bot", q)
	app.user(t, "agent@example.com", auth.RoleAgent, q)
	admin := app.user(t, "adm@example.com", auth.RoleAdmin)
	app.user(t, "sup@example.com", auth.RoleSupervisor)
	// Agents see this queue's customers while the agent resolves: what they write names one they
	// saw, masked below the PII role (handoff.WrittenMaskFor) by what they saw then.
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET pii_min_role = 'agent' WHERE name = $1`, q); err != nil {
		t.Fatal(err)
	}
	agent, sup, adm := app.client(t), app.client(t), app.client(t)
	app.login(t, agent, "agent@example.com")
	app.login(t, sup, "sup@example.com")
	app.login(t, adm, "adm@example.com")

	// Cold packages: a warm one nobody is online for adds a warm_timeout row to the counts.
	for range 55 {
		p := harborFor(t, q).(map[string]any)
		p["transfer_mode"] = "cold"
		expect(t, "submit", app.submit(t, key, p), http.StatusCreated)
	}
	pkg := grepPackage(t, q)
	pkg["transfer_mode"] = "cold"
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	if status, _, body := postForm(t, agent, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d %s", status, body)
	}
	note := "Refunded " + grepName + " in full"
	if status, _, body := postForm(t, agent, app.URL+"/handoffs/"+id+"/resolve", url.Values{"code": {"refunded"}, "note": {note}}); status != http.StatusSeeOther {
		t.Fatalf("resolve: %d %s", status, body)
	}
	// From now on only admins see this queue's customers unmasked.
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET pii_min_role = 'admin' WHERE name = $1`, q); err != nil {
		t.Fatal(err)
	}
	// A roster's presence changes, which the trail leaves out unless asked for.
	if _, err := app.DB.Exec(t.Context(), `INSERT INTO events (at, kind, detail) SELECT now(), 'presence', '{}' FROM generate_series(1, 7)`); err != nil {
		t.Fatal(err)
	}
	var total int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM events WHERE kind <> 'presence'`).Scan(&total); err != nil {
		t.Fatal(err)
	}

	// Every page, followed by its "older" link, until the last.
	rows, pages := 0, 0
	for next := "/audit"; next != ""; pages++ {
		page := mustGet(t, sup, app.URL+next)
		rows += len(auditRow.FindAllString(page, -1))
		next = ""
		if m := auditMore.FindStringSubmatch(page); m != nil {
			next = html.UnescapeString(m[1])
		}
		if pages > 10 {
			t.Fatal("the pages do not end")
		}
	}
	if rows != total || pages != 2 {
		t.Errorf("%d rows on %d pages, want the log's %d on 2", rows, pages, total)
	}

	count := func(c *http.Client, query string) int {
		t.Helper()
		return len(auditRow.FindAllString(mustGet(t, c, app.URL+"/audit?"+query), -1))
	}
	for query, want := range map[string]int{
		"package=" + id:                  3, // queued, accepted, resolved
		"actor=AGENT@example.com":        2,
		"kind=resolved":                  1,
		"kind=resolved&queue=" + q:       1,
		"queue=" + q + "&kind=queued":    50, // the first page of 56
		"since=2999-01-01":               0,
		"until=2000-01-01":               0,
		"since=2000-01-01&kind=accepted": 1,
	} {
		if got := count(sup, query); got != want {
			t.Errorf("/audit?%s: %d rows, want %d", query, got, want)
		}
	}
	// The 7 presence changes above, and any the desk's own presence keeping wrote meanwhile.
	if got := count(sup, "kind=presence"); got < 7 {
		t.Errorf("/audit?kind=presence: %d rows, want the 7 written at least", got)
	}
	presence := regexp.MustCompile(`data-testid="audit-row" data-kind="presence"`)
	if n := len(presence.FindAllString(mustGet(t, sup, app.URL+"/audit"), -1)); n != 0 {
		t.Errorf("the trail lists %d presence changes unasked, want none", n)
	}
	if n := len(presence.FindAllString(mustGet(t, sup, app.URL+"/audit?presence=show"), -1)); n < 7 {
		t.Errorf("the trail with presence=show lists %d presence changes, want the 7 written at least", n)
	}
	for query, param := range map[string]string{
		"kind=bogus": "kind", "since=yesterday": "since", "colour=red": "colour", "package=ho_none": "package",
		"actor=nobody@example.com": "actor", "queue=nope": "queue", "after=garbage": "after",
		"since=2026-06-02&until=2026-06-01": "until",
	} {
		for _, path := range []string{"/audit?", "/audit/export.csv?", "/audit/export.jsonl?"} {
			if path != "/audit?" && param == "after" {
				continue
			}
			resp, body := get(t, sup, app.URL+path+query)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, param) {
				t.Errorf("%s%s: %d, want 400 naming %s:\n%.300s", path, query, resp.StatusCode, param, body)
			}
		}
	}

	// The supervisor is below the queue's PII role: the note's name is masked in the page and both
	// exports. The admin reads it, and that export is recorded.
	for _, path := range []string{"/audit?package=", "/audit/export.csv?package=", "/audit/export.jsonl?package="} {
		body := mustGet(t, sup, app.URL+path+id)
		if strings.Contains(body, "Zephyrbrook") || !strings.Contains(body, "Refunded Q. Z. in full") {
			t.Errorf("%s as a supervisor below the PII role: the note is not masked:\n%s", path, body)
		}
	}
	csvBody := mustGet(t, adm, app.URL+"/audit/export.csv?package="+id)
	records, err := csv.NewReader(strings.NewReader(csvBody)).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 4 || strings.Join(records[0], ",") != "seq,at,actor,kind,package,queue,subject,detail,summary" ||
		records[1][3] != "resolved" || records[1][2] != "agent@example.com" || !strings.Contains(records[1][7], note) ||
		records[1][8] != "agent@example.com resolved the package as refunded, paying back 49.99 USD. Note: “"+note+"”" {
		t.Errorf("the admin's CSV export:\n%s", csvBody)
	}
	lines := strings.Split(strings.TrimSpace(mustGet(t, adm, app.URL+"/audit/export.jsonl?kind=resolved")), "\n")
	var line struct {
		Kind, Actor, Package, Queue, Summary string
		Detail                               map[string]any
	}
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &line) != nil || line.Package != id || line.Queue != q ||
		line.Detail["note"] != note || line.Detail["outcome"] != "refunded" || !strings.HasPrefix(line.Summary, "agent@example.com resolved") {
		t.Errorf("the admin's JSONL export: %q", lines)
	}
	var exports int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM pii_views v JOIN handoffs h ON h.id = ANY (v.handoff_ids)
		WHERE v.user_id = $1 AND v.via = 'export' AND h.handoff_id = $2`, admin.ID, id).Scan(&exports); err != nil {
		t.Fatal(err)
	}
	if exports != 2 {
		t.Errorf("%d export records of the admin's two exports, want one each", exports)
	}
	page := mustGet(t, adm, app.URL+"/audit?package="+id)
	if !strings.Contains(page, `data-testid="pii-view"`) || !strings.Contains(page, "adm@example.com · export") {
		t.Errorf("the package's trail does not list who read its PII:\n%s", page)
	}
}

// A filter the trail cannot read answers 400 with the page itself: the complaint beside the field
// it is about, the other fields as they were filled in, and no trail. Times read to the second
// with their zone, and each event as a sentence.
func TestAuditRefusedFilterKeepsTheForm(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "sup@example.com", auth.RoleSupervisor)
	sup := app.client(t)
	app.login(t, sup, "sup@example.com")
	key := app.botKey(t, "aud_bot", "aud")
	expect(t, "submit", app.submit(t, key, harborFor(t, "aud")), http.StatusCreated)

	for _, c := range []struct{ query, field, message string }{
		{"actor=sup%40example.com&kind=queued&since=yesterday", "since", "since &#34;yesterday&#34; is neither"},
		{"actor=sup%40example.com&kind=queued&queue=nope", "queue", "queue &#34;nope&#34; does not exist"},
		{"actor=sup%40example.com&kind=queued&presence=yes", "presence", "presence &#34;yes&#34;"},
	} {
		resp, body := get(t, sup, app.URL+"/audit?"+c.query)
		if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Errorf("%s: %d %s, want the page with 400", c.query, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		complaint := regexp.MustCompile(`id="audit-error-` + c.field + `"[^>]*>([^<]*)<`).FindStringSubmatch(body)
		if complaint == nil || !strings.Contains(complaint[1], c.message) {
			t.Errorf("%s: the complaint beside %s is %q, want %q:\n%s", c.query, c.field, complaint, c.message, body)
		}
		if !strings.Contains(body, `aria-describedby="audit-error-`+c.field+`"`) {
			t.Errorf("%s: the field %s does not point to its complaint", c.query, c.field)
		}
		if !strings.Contains(body, `name="actor" value="sup@example.com"`) || !strings.Contains(body, `<option value="queued" selected>`) {
			t.Errorf("%s: the rest of the form is lost:\n%s", c.query, body)
		}
		if strings.Contains(body, `data-testid="audit-row"`) || strings.Contains(body, `data-testid="export-csv"`) {
			t.Errorf("%s: a refused filter still lists events or offers an export", c.query)
		}
	}
	resp, body := get(t, sup, app.URL+"/audit?colour=red")
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `data-testid="filter-error"`) || !strings.Contains(body, "colour") {
		t.Errorf("an unknown parameter: %d, want the page with 400 naming it above the form:\n%s", resp.StatusCode, body)
	}

	page := mustGet(t, sup, app.URL+"/audit")
	if !regexp.MustCompile(`<time datetime="[^"]+" data-testid="audit-time">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC</time>`).MatchString(page) {
		t.Errorf("the trail's times are not to the second with their zone:\n%s", page)
	}
	if !strings.Contains(page, "Bot aud_bot sent the package to aud (trigger policy boundary)") {
		t.Errorf("the queued event does not read as a sentence:\n%s", page)
	}
	if strings.Contains(page, `{&#34;`) {
		t.Errorf("the page still shows raw JSON:\n%s", page)
	}
}
