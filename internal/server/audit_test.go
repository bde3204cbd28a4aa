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
	// Only admins see this queue's customers unmasked.
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET pii_min_role = 'admin' WHERE name = $1`, q); err != nil {
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
	var total int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM events`).Scan(&total); err != nil {
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
	if len(records) != 4 || strings.Join(records[0], ",") != "seq,at,actor,kind,package,queue,subject,detail" ||
		records[1][3] != "resolved" || records[1][2] != "agent@example.com" || !strings.Contains(records[1][7], note) {
		t.Errorf("the admin's CSV export:\n%s", csvBody)
	}
	lines := strings.Split(strings.TrimSpace(mustGet(t, adm, app.URL+"/audit/export.jsonl?kind=resolved")), "\n")
	var line struct {
		Kind, Actor, Package, Queue string
		Detail                      map[string]any
	}
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &line) != nil || line.Package != id || line.Queue != q ||
		line.Detail["note"] != note || line.Detail["outcome"] != "refunded" {
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
