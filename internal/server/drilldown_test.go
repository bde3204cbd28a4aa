package server_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/dashboard"
)

// drill is a count on a page and the link to its packages.
type drill struct {
	n, counts, href string
}

var drillRe = regexp.MustCompile(`<a href="([^"]+)"[^>]*data-drill="(packages|records)" data-n="(\d+)"`)

// drills are the counts of a page that link to /packages.
func drills(t *testing.T, page string) []drill {
	t.Helper()
	var ds []drill
	for _, m := range drillRe.FindAllStringSubmatch(page, -1) {
		ds = append(ds, drill{href: html.UnescapeString(m[1]), counts: m[2], n: m[3]})
	}
	return ds
}

// drillDesk is a desk of two queues whose packages went every way a figure counts: accepted,
// answered with the draft as is, edited, from scratch, resolved, returned for a reason, rejected,
// expired, canceled, a repeat contact, a refund decided, some in the window before.
func drillDesk(t *testing.T) (*testApp, *http.Client) {
	t.Helper()
	app := setup(t)
	key := app.botKey(t, "d_bot", "d_billing", "d_sales")
	app.user(t, "ann@example.com", auth.RoleAgent, "d_billing", "d_sales")
	app.user(t, "bo@example.com", auth.RoleAgent, "d_billing")
	sam := app.user(t, "sam@example.com", auth.RoleSupervisor)
	if _, err := app.DB.Exec(t.Context(), `UPDATE users SET capacity = 20`); err != nil {
		t.Fatal(err)
	}
	ann, bo, sup := app.client(t), app.client(t), app.client(t)
	app.login(t, ann, "ann@example.com")
	app.login(t, bo, "bo@example.com")
	app.login(t, sup, "sam@example.com")
	n := 0
	submit := func(queue, source, contact string, edit func(map[string]any)) string {
		t.Helper()
		n++
		id := fmt.Sprintf("ho_drill_%d", n)
		p := harborFor(t, queue).(map[string]any)
		p["handoff_id"], p["transfer_mode"], p["source_agent"] = id, "cold", source
		p["contact"].(map[string]any)["id"] = contact
		if edit != nil {
			edit(p)
		}
		expect(t, "submit "+id, app.submit(t, key, p), http.StatusCreated)
		return id
	}
	do := func(c *http.Client, id, action string, form url.Values) {
		t.Helper()
		if status, _, body := postForm(t, c, app.URL+"/handoffs/"+id+"/"+action, form); status != http.StatusSeeOther {
			t.Fatalf("%s %s: %d\n%.300s", action, id, status, body)
		}
	}
	draft := harbor(t, nil)["draft_reply"].(string)
	// The window before: two packages a day and a bit back.
	old1 := submit("d_billing", "tier1", "c_old1", nil)
	do(ann, old1, "accept", nil)
	do(ann, old1, "reply", url.Values{"text": {draft}})
	do(ann, old1, "resolve", url.Values{"code": {"solved"}})
	old2 := submit("d_sales", "tier1", "c_old2", nil)
	do(ann, old2, "accept", nil)
	do(ann, old2, "return", url.Values{"reason": {"needs_more_info"}})
	if _, err := app.DB.Exec(t.Context(), `
		UPDATE handoffs SET created_at = created_at - interval '30 hours', enqueued_at = enqueued_at - interval '30 hours',
			accepted_at = accepted_at - interval '30 hours', closed_at = closed_at - interval '30 hours'
		WHERE handoff_id = ANY($1)`, []string{old1, old2}); err != nil {
		t.Fatal(err)
	}
	// This window.
	p1 := submit("d_billing", "tier1", "c1", nil)
	do(ann, p1, "accept", nil)
	do(ann, p1, "reply", url.Values{"text": {draft}})
	// The customer writes again, and the bot drafts the answer to that turn: the second reply is
	// an edit of that draft.
	expect(t, "the customer writes again", app.api(t, http.MethodPost, "/api/v1/handoffs/"+p1+"/messages", key,
		map[string]any{"message_id": "m1", "role": "user", "text": "And the fee?", "draft_reply": draft}), http.StatusCreated)
	do(ann, p1, "reply", url.Values{"text": {draft + " Anything else?"}, "tags": {"tone"}})
	do(ann, p1, "resolve", url.Values{"code": {"refunded"}})
	p2 := submit("d_billing", "tier2", "c2", nil)
	do(bo, p2, "accept", nil)
	do(bo, p2, "reject", url.Values{"reason": {"not mine"}})
	do(ann, p2, "accept", nil)
	do(ann, p2, "reply", url.Values{"text": {"We are on it."}, "tags": {"too_long"}})
	do(ann, p2, "return", url.Values{"reason": {"needs_more_info"}})
	p3 := submit("d_billing", "tier1", "c3", func(p map[string]any) { delete(p, "draft_reply") })
	do(bo, p3, "accept", nil)
	do(bo, p3, "reply", url.Values{"text": {"Written from scratch."}})
	p4 := submit("d_sales", "tier2", "c4", func(p map[string]any) { p["trigger"] = "low_confidence" })
	do(ann, p4, "accept", nil)
	do(ann, p4, "return", url.Values{"reason": {"wrong_escalation"}})
	p5 := submit("d_sales", "tier1", "c5", nil)
	expect(t, "cancel", app.api(t, http.MethodPost, "/api/v1/handoffs/"+p5+"/cancel", key, nil), http.StatusOK)
	p6 := submit("d_billing", "tier1", "c6", nil)
	if _, err := app.DB.Exec(t.Context(), `UPDATE handoffs SET status = 'expired', closed_at = now(), outcome = 'expired' WHERE handoff_id = $1`, p6); err != nil {
		t.Fatal(err)
	}
	// c1 again, from another bot: a repeat contact, still waiting.
	submit("d_billing", "tier2", "c1", nil)
	submit("d_sales", "tier1", "c8", nil)
	// A refund approval on p3, decided by the supervisor.
	if _, err := app.DB.Exec(t.Context(), `
		INSERT INTO approvals (handoff_id, queue_id, amount, currency, requested_by, note, requested_at, expires_at, state, decided_by, decided_at)
		SELECT h.id, h.queue_id, 120, 'USD', h.assignee_id, 'refund', now() - interval '20 minutes', now() + interval '1 hour', 'granted', $2, now()
		FROM handoffs h WHERE h.handoff_id = $1`, p3, sam.ID); err != nil {
		t.Fatal(err)
	}
	// The rollup as the job leaves it, over the history as changed above.
	if _, err := dashboard.Rebuild(t.Context(), app.DB); err != nil {
		t.Fatal(err)
	}
	return app, sup
}

// Every count on /dashboard (both windows, all queues and one, and the live roster) and on /evals
// links to /packages with the filters that produced it, and /packages counts exactly that many:
// packages, or for a count of replies, outcomes or decisions, the records its record filter
// selects on the packages listed.
func TestEveryFigureLinksToExactlyItsPackages(t *testing.T) {
	t.Parallel()
	app, sup := drillDesk(t)
	countRe := regexp.MustCompile(`data-testid="search-count" data-packages="(\d+)" data-records="(\d+)"`)
	followed, nonzero := 0, 0
	seen := map[string]bool{}
	for _, page := range []string{"/dashboard?window=24h", "/dashboard?window=7d&queue=d_billing", "/dashboard?window=24h&queue=d_sales",
		"/evals?window=24h", "/evals?window=7d"} {
		resp, body := get(t, sup, app.URL+page)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", page, resp.StatusCode)
		}
		ds := drills(t, body)
		if len(ds) < 10 {
			t.Fatalf("%s links %d counts, want them all linked:\n%.3000s", page, len(ds), body)
		}
		for _, d := range ds {
			if seen[d.href+d.counts] {
				continue
			}
			seen[d.href+d.counts] = true
			if !strings.HasPrefix(d.href, "/packages?") {
				t.Errorf("%s: a count links to %s", page, d.href)
				continue
			}
			for k, v := range mustQuery(t, strings.ReplaceAll(d.href, "&amp;", "&")) {
				if strings.HasSuffix(k, "since") || strings.HasSuffix(k, "until") {
					if _, err := time.Parse(time.RFC3339, v[0]); err != nil || strings.Contains(v[0], ".") {
						t.Errorf("%s: %s=%s in %s is no whole second", page, k, v[0], d.href)
					}
				}
			}
			resp, list := get(t, sup, app.URL+d.href)
			m := countRe.FindStringSubmatch(list)
			if resp.StatusCode != http.StatusOK || m == nil {
				t.Errorf("%s: %s answers %d without a count:\n%.1500s", page, d.href, resp.StatusCode, list)
				continue
			}
			got := m[1]
			if d.counts == "records" {
				got = m[2]
			}
			if got != d.n {
				t.Errorf("%s shows %s, its link %s counts %s %s", page, d.n, d.href, got, d.counts)
			}
			followed++
			if d.n != "0" {
				nonzero++
			}
		}
	}
	t.Logf("%d links followed, %d of them to counts above 0", followed, nonzero)
	if nonzero < 60 {
		t.Errorf("only %d counts above 0 were followed: the desk does not exercise the figures", nonzero)
	}
	// Each kind of figure was among them, with the counts worked out by hand for the 24 hours of
	// all queues: 8 packages in, 4 accepted (p1 to p4), 2 replied to a draft as is of 3 (p1's
	// two, p2's), 2 returned, 1 rejected, 1 repeat, 1 decision, 3 replied to; Ann handled 3 (p1, p2,
	// p4; one resolved) and sent 3 replies, to drafts all three, one as is.
	_, page := get(t, sup, app.URL+"/dashboard?window=24h")
	for id, want := range map[string]string{"in": "8", "accept": "(4)", "as-is": "(1 of 3)", "return": "(2 of 8)", "reject": "(1 of 8)",
		"repeat": "(1 of 8)", "decision": "(1)", "first-reply": "(3)", "resolution": "(1)", "expiry": "(1 of 8)", "cancel": "(1 of 8)"} {
		if got := figure(t, page, id); !strings.HasSuffix(got, want) {
			t.Errorf("figure %s reads %q, want it to end %q", id, got, want)
		}
	}
	if ann := elementText(page, `data-agent="ann@example.com"`); !strings.HasPrefix(ann, "ann ann@example.com 3 ") ||
		!strings.HasSuffix(ann, " (1) 3 33.3% (1 of 3) 15 chars (3)") {
		t.Errorf("Ann's row reads %q, want 3 handled, 1 resolved, 3 replies, 1 of 3 drafts as is", ann)
	}
}
