package server_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// approvalsDesk is a queue whose refunds above 50 USD need approval, an agent and a supervisor.
func approvalsDesk(t *testing.T) (app *testApp, key string, dana, sam *http.Client) {
	t.Helper()
	app = setup(t)
	key = app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	dana, sam = app.client(t), app.client(t)
	app.login(t, dana, "dana@example.com")
	app.login(t, sam, "sam@example.com")
	return app, key, dana, sam
}

// request has dana take a refund package of a contact of its own and ask for approval.
func request(t *testing.T, app *testApp, key string, dana *http.Client) string {
	t.Helper()
	pkg, id := refundPackage(t, "120.00")
	pkg["contact"].(map[string]any)["id"] = "cust_" + id
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	if status, _, body := postForm(t, dana, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d %.300s", status, body)
	}
	if status, _, body := postForm(t, dana, app.URL+"/handoffs/"+id+"/approval", url.Values{"note": {"double charge"}}); status != http.StatusSeeOther {
		t.Fatalf("request: %d %.300s", status, body)
	}
	return id
}

// TestApprovalsNearestExpiryFirst: /approvals lists the request a supervisor must decide soonest
// first, whenever it was asked.
func TestApprovalsNearestExpiryFirst(t *testing.T) {
	t.Parallel()
	app, key, dana, sam := approvalsDesk(t)
	first, second := request(t, app, key, dana), request(t, app, key, dana)
	// The later request expires sooner, as one in a queue with a shorter approval timeout would.
	if _, err := app.DB.Exec(t.Context(), `UPDATE approvals SET expires_at = now() + interval '5 minutes'
		WHERE handoff_id = (SELECT id FROM handoffs WHERE handoff_id = $1)`, second); err != nil {
		t.Fatal(err)
	}
	_, page := fetchPage(t, sam, app.URL+"/approvals")
	var order []string
	for _, m := range approvalIDRE.FindAllStringSubmatch(page, -1) {
		order = append(order, m[2])
	}
	if !slices.Equal(order, []string{second, first}) {
		t.Errorf("/approvals lists %v, want %v: the one expiring first, first", order, []string{second, first})
	}
}

var approvalsCountRE = regexp.MustCompile(`data-testid="approvals-count" data-count="(\d+)"`)

// TestApprovalsWaitingCountIsLive: every supervisor page counts the approvals that wait beside
// "Approvals" and leads its title with them; a supervisor's live page gets the new count when a
// request arrives or is decided. Agents see neither.
func TestApprovalsWaitingCountIsLive(t *testing.T) {
	t.Parallel()
	app, key, dana, sam := approvalsDesk(t)
	count := func(page string) string {
		m := approvalsCountRE.FindStringSubmatch(page)
		if m == nil {
			return ""
		}
		return m[1]
	}
	_, home := fetchPage(t, sam, app.URL+"/")
	if count(home) != "0" || !strings.Contains(home, "<title>My queues · Handoff Desk</title>") {
		t.Fatalf("with none waiting the count reads %q and the title is plain:\n%.600s", count(home), home)
	}
	live, _ := app.dialed(t, sam, "summaries=true")
	id := request(t, app, key, dana)
	if html := readUntil(t, live, "approvals-count"); count(html) != "1" {
		t.Errorf("the live count after a request: %s", html)
	}
	for _, path := range []string{"/", "/dashboard", "/handoffs/" + id, "/packages"} {
		_, page := fetchPage(t, sam, app.URL+path)
		if count(page) != "1" || !strings.Contains(page, "<title>(1) ") {
			t.Errorf("%s: count %q, title not led by (1):\n%.400s", path, count(page), page)
		}
	}
	if _, page := fetchPage(t, dana, app.URL+"/"); strings.Contains(page, "approvals-count") || strings.Contains(page, "<title>(") {
		t.Error("an agent's page counts approvals")
	}
	approval := approvalIDOf(t, sam, app.URL, id)
	if status, _, body := postForm(t, sam, app.URL+"/approvals/"+approval+"/approve", url.Values{"note": {"fine"}}); status != http.StatusSeeOther {
		t.Fatalf("approve: %d %.300s", status, body)
	}
	if html := readUntil(t, live, "approvals-count"); count(html) != "0" {
		t.Errorf("the live count after the decision: %s", html)
	}
}

// TestApprovalFirstThenTheReply: for a refund above the threshold, asking for approval is the
// next step and the composer holds no promise of money, saying why; while the request waits it
// says so; once a supervisor decides, the reply is next, the composer holding one that tells the
// customer the decision.
func TestApprovalFirstThenTheReply(t *testing.T) {
	t.Parallel()
	app, key, dana, sam := approvalsDesk(t)
	composer := func(page string) string {
		m := regexp.MustCompile(`(?s)data-testid="reply-text"[^>]*>([^<]*)</textarea>`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no composer:\n%.2000s", page)
		}
		return html.UnescapeString(m[1])
	}
	primary := func(page string) string {
		m := regexp.MustCompile(`data-testid="actions" data-primary-action="([a-z]*)"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no action panel")
		}
		return m[1]
	}
	for _, decision := range []struct{ path, says, reply string }{
		{"approve", "is approved", "your refund of 120.00 USD is approved"},
		{"deny", "was denied", "we are not able to refund 120.00 USD"},
	} {
		pkg, id := refundPackage(t, "120.00")
		pkg["contact"].(map[string]any)["id"] = "cust_" + id
		expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
		base := app.URL + "/handoffs/" + id
		if status, _, body := postForm(t, dana, base+"/accept", nil); status != http.StatusSeeOther {
			t.Fatalf("accept: %d %.300s", status, body)
		}
		_, page := fetchPage(t, dana, base)
		if primary(page) != "approval" || composer(page) != "" || !strings.Contains(page, "needs a supervisor&#39;s approval: ask for it first") {
			t.Errorf("before the request: next %q, composer %q; want the request first and no draft", primary(page), composer(page))
		}
		if status, _, body := postForm(t, dana, base+"/approval", url.Values{"note": {"double charge"}}); status != http.StatusSeeOther {
			t.Fatalf("request: %d %.300s", status, body)
		}
		_, page = fetchPage(t, dana, base)
		if primary(page) != "" || composer(page) != "" || !strings.Contains(page, "awaits a supervisor&#39;s approval") {
			t.Errorf("while it waits: next %q, composer %q; want nothing next but the decision", primary(page), composer(page))
		}
		approval := approvalIDOf(t, sam, app.URL, id)
		if status, _, body := postForm(t, sam, app.URL+"/approvals/"+approval+"/"+decision.path, url.Values{"note": {"checked"}}); status != http.StatusSeeOther {
			t.Fatalf("%s: %d %.300s", decision.path, status, body)
		}
		_, page = fetchPage(t, dana, base)
		if primary(page) != "reply" || !strings.Contains(composer(page), decision.reply) || !strings.Contains(page, decision.says) {
			t.Errorf("after %s: next %q, composer %q; want the reply next, telling the customer", decision.path, primary(page), composer(page))
		}
	}
}
