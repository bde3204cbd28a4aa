package server_test

import (
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
)

// refundPackage is the Harbor package asking for a refund of amount USD.
func refundPackage(t *testing.T, amount string) (map[string]any, string) {
	t.Helper()
	p := harbor(t, func(p map[string]any) { p["refund"] = map[string]any{"amount": amount, "currency": "USD"} })
	return p, p["handoff_id"].(string)
}

var approvalIDRE = regexp.MustCompile(`data-approval="(\d+)" data-handoff="([^"]+)"`)

// approvalIDOf finds the pending request of package id on a supervisor's /approvals page.
func approvalIDOf(t *testing.T, c *http.Client, base, id string) string {
	t.Helper()
	status, page := fetchPage(t, c, base+"/approvals")
	if status != http.StatusOK {
		t.Fatalf("/approvals: %d", status)
	}
	for _, m := range approvalIDRE.FindAllStringSubmatch(page, -1) {
		if m[2] == id {
			return m[1]
		}
	}
	t.Fatalf("/approvals lists no request for %s", id)
	return ""
}

// The approval flow over HTTP, as a bot and each role see it: refused resolve, request, the
// supervisors' page, four eyes, the API's status and approval object, and the bound amount.
func TestApprovalsOverHTTP(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "lead@example.com", auth.RoleSupervisor, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	app.user(t, "sue@example.com", auth.RoleSupervisor)
	dana, lead, sam, sue := app.client(t), app.client(t), app.client(t), app.client(t)
	for c, email := range map[*http.Client]string{dana: "dana@example.com", lead: "lead@example.com", sam: "sam@example.com", sue: "sue@example.com"} {
		app.login(t, c, email)
	}
	pkg, id := refundPackage(t, "120.00")
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	base := app.URL + "/handoffs/" + id
	if status, _, body := postForm(t, dana, base+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d\n%s", status, body)
	}
	if _, page := fetchPage(t, dana, base); !strings.Contains(page, `data-testid="request-approval-form"`) || !strings.Contains(page, "120.00 USD") {
		t.Error("the package view offers the holder no approval request for 120.00 USD")
	}
	status, _, body := postForm(t, dana, base+"/resolve", url.Values{"code": {"refunded"}})
	if status != http.StatusConflict || !strings.Contains(body, "approval") {
		t.Fatalf("resolve as refunded without approval: %d, want 409 naming the approval\n%s", status, body)
	}
	if status, _, _ := postForm(t, dana, base+"/approval", url.Values{"note": {" "}}); status != http.StatusUnprocessableEntity {
		t.Errorf("request without a note: %d, want 422", status)
	}
	if status, _, body := postForm(t, dana, base+"/approval", url.Values{"note": {"loyal customer, double charge"}}); status != http.StatusSeeOther {
		t.Fatalf("request: %d\n%s", status, body)
	}
	if status, _, _ := postForm(t, dana, base+"/approval", url.Values{"note": {"again"}}); status != http.StatusConflict {
		t.Errorf("a second request while one is pending: %d, want 409", status)
	}
	rec := app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, key, nil)
	approval, _ := rec.Body["approval"].(map[string]any)
	if rec.Body["status"] != "awaiting_approval" || approval["state"] != "pending" || approval["amount"] != "120.00" || approval["currency"] != "USD" {
		t.Fatalf("the bot reads %s, want awaiting_approval with a pending approval of 120.00 USD", rec.Raw)
	}

	if status, _ := fetchPage(t, dana, app.URL+"/approvals"); status != http.StatusForbidden {
		t.Errorf("an agent opens /approvals: %d, want 403", status)
	}
	approvalID := approvalIDOf(t, sam, app.URL, id)
	if _, page := fetchPage(t, sam, base); !strings.Contains(page, `href="/approvals#approval-`+approvalID+`"`) {
		t.Error("the package view does not lead a supervisor who may decide to the request")
	}
	if _, page := fetchPage(t, dana, base); strings.Contains(page, `data-testid="decide-approval"`) || !strings.Contains(page, `data-testid="withdraw-approval"`) {
		t.Error("the requester's package view offers to decide, or not to withdraw")
	}
	_, page := fetchPage(t, sam, app.URL+"/approvals")
	for _, want := range []string{"Duplicate charge $49.99", "120.00 USD", "loyal customer, double charge", "dana", `action="/approvals/` + approvalID + `/approve"`, `action="/approvals/` + approvalID + `/deny"`} {
		if !strings.Contains(page, want) {
			t.Errorf("/approvals lacks %q", want)
		}
	}
	decide := func(c *http.Client, verb, note string) (int, string) {
		status, _, body := postForm(t, c, app.URL+"/approvals/"+approvalID+"/"+verb, url.Values{"note": {note}})
		return status, body
	}
	if status, _ := decide(dana, "approve", "me"); status != http.StatusForbidden {
		t.Errorf("the requesting agent approves: %d, want 403", status)
	}
	if status, _ := decide(sam, "approve", ""); status != http.StatusUnprocessableEntity {
		t.Errorf("approve without a note: %d, want 422", status)
	}
	if status, _, _ := postForm(t, sam, app.URL+"/approvals/abc/approve", url.Values{"note": {"x"}}); status != http.StatusNotFound {
		t.Errorf("approve approval abc: %d, want 404", status)
	}

	// Two supervisors at once: one decision counts, the other is a clear 409.
	statuses, bodies := make([]int, 2), make([]string, 2)
	var wg sync.WaitGroup
	for i, c := range []*http.Client{sam, sue} {
		wg.Go(func() { statuses[i], bodies[i] = decide(c, []string{"approve", "deny"}[i], "decided") })
	}
	wg.Wait()
	won := 0
	for i, s := range statuses {
		switch s {
		case http.StatusSeeOther:
			won++
		case http.StatusConflict:
			if !strings.Contains(bodies[i], "already") && !strings.Contains(bodies[i], "someone else") {
				t.Errorf("the losing supervisor reads no clear reason:\n%s", bodies[i])
			}
		default:
			t.Errorf("racing decision %d: %d", i, s)
		}
	}
	if won != 1 {
		t.Fatalf("racing decisions: %v, want one 303 and one 409", statuses)
	}
	rec = app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, key, nil)
	approval, _ = rec.Body["approval"].(map[string]any)
	if rec.Body["status"] != "accepted" || approval["decided_at"] == nil || (approval["state"] != "granted" && approval["state"] != "denied") {
		t.Fatalf("after the decision the bot reads %s", rec.Raw)
	}
	if approval["state"] == "denied" {
		return // the race went to the denial; the bound amount is tested with a grant below
	}
	status, _, body = postForm(t, dana, base+"/resolve", url.Values{"code": {"refunded"}, "amount": {"130.00"}})
	if status != http.StatusConflict || !strings.Contains(body, "130.00 USD") {
		t.Errorf("resolve for 130.00 after a grant of 120.00: %d, want 409 naming the amounts\n%s", status, body)
	}
	if status, _, body := postForm(t, dana, base+"/resolve", url.Values{"code": {"refunded"}, "amount": {"120.00"}}); status != http.StatusSeeOther {
		t.Fatalf("resolve for the granted amount: %d\n%s", status, body)
	}
}

// Self-approval by any path: a supervisor who holds the package and asked cannot approve it, and
// the page does not offer them the forms.
func TestSupervisorCannotApproveOwnRequest(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "lead@example.com", auth.RoleSupervisor, "billing_t2")
	lead := app.client(t)
	app.login(t, lead, "lead@example.com")
	pkg, id := refundPackage(t, "75.00")
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	base := app.URL + "/handoffs/" + id
	if status, _, _ := postForm(t, lead, base+"/accept", nil); status != http.StatusSeeOther {
		t.Fatal("accept")
	}
	if status, _, body := postForm(t, lead, base+"/approval", url.Values{"note": {"my own"}}); status != http.StatusSeeOther {
		t.Fatalf("request: %d\n%s", status, body)
	}
	approvalID := approvalIDOf(t, lead, app.URL, id)
	_, page := fetchPage(t, lead, app.URL+"/approvals")
	if strings.Contains(page, `action="/approvals/`+approvalID+`/approve"`) || !strings.Contains(page, `data-testid="approval-why-not"`) {
		t.Error("/approvals offers the requester the forms to decide their own request")
	}
	for _, verb := range []string{"approve", "deny"} {
		if status, _, _ := postForm(t, lead, app.URL+"/approvals/"+approvalID+"/"+verb, url.Values{"note": {"mine"}}); status != http.StatusForbidden {
			t.Errorf("the requesting supervisor %ss: %d, want 403", verb, status)
		}
	}
	if status, _, _ := postForm(t, lead, base+"/approval/withdraw", nil); status != http.StatusSeeOther {
		t.Errorf("the requester withdraws: %d, want 303", status)
	}
}

// The end to end flow in two browsers: the agent's request appears on the supervisor's page
// without a reload, the supervisor approves, the agent's page shows it without a reload, and the
// resolve as refunded succeeds.
func TestBrowserApprovalTwoSessions(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	pkg, id := refundPackage(t, "150.00")
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)

	source, err := os.ReadFile(axePath)
	if err != nil {
		t.Fatalf("axe-core is missing: run `npm install` (make generate does): %v", err)
	}
	axe := string(source)
	agent, supervisor := browser(t), browser(t)
	browserLogin(t, supervisor, app.URL, "sam@example.com")
	if err := chromedp.Do(supervisor,
		chromedp.Navigate(app.URL+"/approvals"),
		chromedp.WaitVisible(`[data-testid="no-approvals"]`),
		chromedp.WaitReady(`body[data-live="online"]`),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`),
	); err != nil {
		t.Fatalf("supervisor opens /approvals: %v", err)
	}

	browserLogin(t, agent, app.URL, "dana@example.com")
	if err := chromedp.Do(agent,
		chromedp.Navigate(app.URL+"/handoffs/"+id),
		chromedp.Click(`[data-testid="accept"]`),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
		// Asking is the next step, before any reply: the form is the action panel's first.
		chromedp.WaitVisible(`[data-testid="actions"][data-primary-action="approval"] [data-testid="request-approval-form"]`),
		chromedp.SendKeys(`[data-testid="request-approval-form"] input[name="note"]`, "double charge, long-time customer"),
		chromedp.Click(`[data-testid="request-approval"]`),
		chromedp.WaitVisible(`[data-testid="approval-pending"]`),
		chromedp.WaitReady(`body[data-live="online"]`),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`),
	); err != nil {
		t.Fatalf("agent requests approval: %v", err)
	}
	if got := text(t, agent, `[data-testid="status"]`); got != "awaiting approval" {
		t.Errorf("after the request the status reads %q", got)
	}
	checkA11y(t, agent, axe, "the package view awaiting approval")

	row := `[data-testid="approval"][data-handoff="` + id + `"]`
	if err := chromedp.Do(supervisor, chromedp.WaitVisible(row)); err != nil {
		t.Fatalf("the request never appeared on /approvals: %v", err)
	}
	if same, err := chromedp.Run(supervisor, chromedp.Evaluate[bool](`window.sameDocument === true`)); err != nil || !same {
		t.Fatal("the supervisor's page reloaded; the request must arrive over the socket")
	}
	// The count of requests that wait leads the title, live, for a tab in the background.
	if _, err := chromedp.Run(supervisor, chromedp.Poll[bool](`document.title.startsWith("(1) ")`, pollEvery)); err != nil {
		t.Errorf("the supervisor's title never counted the request: %q (%v)", evalString(t, supervisor, `document.title`), err)
	}
	for sel, want := range map[string]string{
		row + ` [data-testid="approval-amount"]`:  "150.00 USD",
		row + ` [data-testid="approval-problem"]`: "Duplicate charge $49.99",
		row + ` [data-testid="approval-note"]`:    "double charge, long-time customer",
		row + ` [data-testid="approval-agent"]`:   "dana",
	} {
		if got := text(t, supervisor, sel); !strings.Contains(got, want) {
			t.Errorf("%s reads %q, want %q", sel, got, want)
		}
	}
	checkA11y(t, supervisor, axe, "/approvals with a request")
	if err := chromedp.Do(supervisor,
		chromedp.SendKeys(row+` [data-testid="approve-form"] input[name="note"]`, "within goodwill policy"),
		chromedp.Click(row+` [data-testid="approve"]`),
		chromedp.WaitVisible(`[data-testid="no-approvals"]`),
	); err != nil {
		t.Fatalf("supervisor approves: %v", err)
	}
	if got := evalString(t, supervisor, `document.title`); strings.HasPrefix(got, "(") {
		t.Errorf("with none waiting the title reads %q", got)
	}

	if err := chromedp.Do(agent, chromedp.WaitVisible(`[data-testid="approval-line"][data-state="granted"]`)); err != nil {
		t.Fatalf("the agent never saw the grant: %v", err)
	}
	if same, err := chromedp.Run(agent, chromedp.Evaluate[bool](`window.sameDocument === true`)); err != nil || !same {
		t.Fatal("the agent's page reloaded; the decision must arrive over the socket")
	}
	if got := evalString(t, agent, `document.querySelector('[data-testid="approval-history"]').textContent`); !strings.Contains(got, "within goodwill policy") || !strings.Contains(got, "sam") {
		t.Errorf("the agent's approval history reads %q", got)
	}
	// The composer, untouched, now holds the reply that tells the customer.
	if err := chromedp.Do(agent, chromedp.WaitVisible(`[data-testid="reply-suggested"]`)); err != nil {
		t.Fatalf("the agent's composer never offered the reply after the grant: %v", err)
	}
	if got := evalString(t, agent, `document.querySelector('#reply-text').value`); !strings.Contains(got, "150.00 USD is approved") {
		t.Errorf("after the grant the composer holds %q", got)
	}
	if err := chromedp.Do(agent,
		inMenu("resolve"),
		chromedp.SetValue(`[data-testid="resolve-form"] select`, "refunded"),
		chromedp.Click(`[data-testid="resolve"]`),
		chromedp.WaitVisible(`[data-testid="cards"]`),
	); err != nil {
		t.Fatalf("agent resolves: %v", err)
	}
	rec := app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, key, nil)
	if rec.Body["status"] != "resolved" || rec.Body["outcome"] != "refunded" {
		t.Fatalf("after the approved refund the bot reads %s", rec.Raw)
	}
}

// /approvals and its frames mask through the one PII policy for the viewer: in a queue whose PII
// is for admins, a supervisor reads the contact masked, an admin reads it. The agent's note reads
// as written to both: its writer could not see the contact, so a name in it is their guess, which
// reads alike right or wrong (handoff.WrittenMaskFor). An agent may not watch approvals at all.
func TestApprovalsMaskPerViewer(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET pii_min_role = 'admin' WHERE name = 'billing_t2'`); err != nil {
		t.Fatal(err)
	}
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	dana, sam, ada := app.client(t), app.client(t), app.client(t)
	app.login(t, dana, "dana@example.com")
	app.login(t, sam, "sam@example.com")
	app.login(t, ada, "ada@example.com")
	if _, resp, err := app.dial(t, dana, "approvals=true", ""); err == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an agent watching approvals: %v, want 403", err)
	}
	live, _ := app.dialed(t, sam, "approvals=true")

	pkg, id := refundPackage(t, "120.00")
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	base := app.URL + "/handoffs/" + id
	if status, _, _ := postForm(t, dana, base+"/accept", nil); status != http.StatusSeeOther {
		t.Fatal("accept")
	}
	if status, _, body := postForm(t, dana, base+"/approval", url.Values{"note": {"Dana Whitfield was charged twice"}}); status != http.StatusSeeOther {
		t.Fatalf("request: %d\n%s", status, body)
	}
	frame := readUntil(t, live, "approvals")
	_, supervisorPage := fetchPage(t, sam, app.URL+"/approvals")
	for what, html := range map[string]string{"the supervisor's page": supervisorPage, "the supervisor's frame": frame} {
		if !strings.Contains(html, `data-testid="approval-contact">D. W.<`) || !strings.Contains(html, "120.00 USD") || !strings.Contains(html, id) ||
			!strings.Contains(html, `data-testid="approval-note">Dana Whitfield was charged twice<`) {
			t.Errorf("%s shows the contact's name unmasked, the blind agent's note changed, or lacks the request:\n%s", what, html)
		}
	}
	if _, adminPage := fetchPage(t, ada, app.URL+"/approvals"); !strings.Contains(adminPage, `data-testid="approval-contact">Dana Whitfield<`) ||
		!strings.Contains(adminPage, "Dana Whitfield was charged twice") {
		t.Error("the admin, of the queue's PII role, reads the contact or the note masked")
	}
}

// Who may call the approval routes besides the cases above: anonymous callers are sent to log in
// (GET) or refused (POST); an agent of another queue finds no such package, as for every action.
func TestApprovalRoutesRefuseStrangers(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "tom@example.com", auth.RoleAgent, "tech_t2")
	dana, tom, anon := app.client(t), app.client(t), app.client(t)
	app.login(t, dana, "dana@example.com")
	app.login(t, tom, "tom@example.com")
	pkg, id := refundPackage(t, "120.00")
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	base := app.URL + "/handoffs/" + id
	if status, _, _ := postForm(t, dana, base+"/accept", nil); status != http.StatusSeeOther {
		t.Fatal("accept")
	}
	for _, path := range []string{"/approval", "/approval/withdraw"} {
		if status, _, _ := postForm(t, tom, base+path, url.Values{"note": {"x"}}); status != http.StatusNotFound {
			t.Errorf("an agent of another queue posts %s: %d, want 404", path, status)
		}
		if status, _, _ := postForm(t, anon, base+path, url.Values{"note": {"x"}}); status != http.StatusUnauthorized {
			t.Errorf("anonymous posts %s: %d, want 401", path, status)
		}
	}
	if status, _, _ := postForm(t, dana, base+"/approval/withdraw", nil); status != http.StatusConflict {
		t.Errorf("withdraw with nothing pending: %d, want 409", status)
	}
	if status, _, body := postForm(t, dana, base+"/approval", url.Values{"note": {"please"}}); status != http.StatusSeeOther {
		t.Fatalf("request: %d\n%s", status, body)
	}
	if resp, _ := get(t, anon, app.URL+"/approvals"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("anonymous GET /approvals: %d, want 303 to the login", resp.StatusCode)
	}
	for _, verb := range []string{"approve", "deny"} {
		if status, _, _ := postForm(t, anon, app.URL+"/approvals/1/"+verb, url.Values{"note": {"x"}}); status != http.StatusUnauthorized {
			t.Errorf("anonymous %s: %d, want 401", verb, status)
		}
		if status, _, _ := postForm(t, tom, app.URL+"/approvals/1/"+verb, url.Values{"note": {"x"}}); status != http.StatusForbidden {
			t.Errorf("an agent %ss: %d, want 403", verb, status)
		}
	}
}

// A request nobody decides in time expires in the sweeper of a running desk: the agent's open
// package view is told over its socket, and the bot gets approval_expired.
func TestApprovalExpiryTellsTheAgentLive(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	dana := app.client(t)
	app.login(t, dana, "dana@example.com")
	pkg, id := refundPackage(t, "120.00")
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	base := app.URL + "/handoffs/" + id
	if status, _, _ := postForm(t, dana, base+"/accept", nil); status != http.StatusSeeOther {
		t.Fatal("accept")
	}
	if status, _, body := postForm(t, dana, base+"/approval", url.Values{"note": {"please"}}); status != http.StatusSeeOther {
		t.Fatalf("request: %d\n%s", status, body)
	}
	live, _ := app.dialed(t, dana, "handoff="+id)
	// The queue's timeout is 4 hours: the request is made due rather than waited for.
	if _, err := app.DB.Exec(t.Context(), `UPDATE approvals SET expires_at = now() - interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	// The request's own frame may still be on its way to the socket: read until the expiry's.
	panel := readUntil(t, live, "actions-"+id)
	for range 5 {
		if strings.Contains(panel, `data-state="expired"`) {
			break
		}
		panel = readUntil(t, live, "actions-"+id)
	}
	if !strings.Contains(panel, `data-state="expired"`) || !strings.Contains(panel, `data-testid="request-approval-form"`) {
		t.Errorf("the agent's action panel after expiry shows no expired request or no new request form:\n%s", panel)
	}
	rec := app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, key, nil)
	if approval, _ := rec.Body["approval"].(map[string]any); rec.Body["status"] != "accepted" || approval["state"] != "expired" {
		t.Errorf("after expiry the bot reads %s", rec.Raw)
	}
	var hooks int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM webhook_outbox WHERE handoff_id = $1 AND event = 'approval_expired'`, id).Scan(&hooks); err != nil || hooks != 1 {
		t.Errorf("approval_expired webhooks: %d, %v; want 1", hooks, err)
	}
}

// The agent's side of an approval: while the refund waits the agent still replies to the
// customer; a grant arrives as a banner that says what to resolve with, the form set to it and
// no second request offered; a denial shows its reason; another currency is refused as such.
func TestApprovalFromTheAgentsSide(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	dana, sam := app.client(t), app.client(t)
	app.login(t, dana, "dana@example.com")
	app.login(t, sam, "sam@example.com")
	// Each package its own contact: one contact has one open package at a time.
	contact := func(pkg map[string]any, id string) { pkg["contact"].(map[string]any)["id"] = "cust_" + id }
	ask := func(amount string) (string, string) {
		t.Helper()
		pkg, id := refundPackage(t, amount)
		contact(pkg, id)
		expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
		base := app.URL + "/handoffs/" + id
		if status, _, body := postForm(t, dana, base+"/accept", nil); status != http.StatusSeeOther {
			t.Fatalf("accept: %d\n%s", status, body)
		}
		if status, _, body := postForm(t, dana, base+"/approval", url.Values{"note": {"double charge"}}); status != http.StatusSeeOther {
			t.Fatalf("request: %d\n%s", status, body)
		}
		return id, base
	}

	id, base := ask("240.00")
	if _, page := fetchPage(t, dana, base); !strings.Contains(page, `data-testid="reply-editor"`) {
		t.Error("while the refund waits for approval the agent has no editor to tell the customer")
	}
	if status, _, body := postForm(t, dana, base+"/reply", url.Values{"text": {"Still working on your refund."}}); status != http.StatusSeeOther {
		t.Fatalf("a reply while waiting: %d\n%s", status, body)
	}
	if status, _, body := postForm(t, sam, app.URL+"/approvals/"+approvalIDOf(t, sam, app.URL, id)+"/approve", url.Values{"note": {"ok per policy"}}); status != http.StatusSeeOther {
		t.Fatalf("approve: %d\n%s", status, body)
	}
	_, page := fetchPage(t, dana, base)
	for _, want := range []string{`data-testid="approval-decision" data-state="granted"`, "Approved by sam", "ok per policy", "Resolve as refunded for 240.00 USD",
		`<option value="refunded" selected>`, `value="240.00"`} {
		if !strings.Contains(page, want) {
			t.Errorf("after the grant the page lacks %q", want)
		}
	}
	if strings.Contains(page, `data-testid="request-approval-form"`) {
		t.Error("after the grant the page still offers to request approval")
	}

	id, base = ask("300.00")
	if status, _, body := postForm(t, sam, app.URL+"/approvals/"+approvalIDOf(t, sam, app.URL, id)+"/deny", url.Values{"note": {"outside the refund window"}}); status != http.StatusSeeOther {
		t.Fatalf("deny: %d\n%s", status, body)
	}
	if _, page := fetchPage(t, dana, base); !strings.Contains(page, `data-state="denied"`) || !strings.Contains(page, "outside the refund window") {
		t.Error("after the denial the page does not say so with the reason")
	}

	pkg, id := refundPackage(t, "12.00")
	contact(pkg, id)
	pkg["refund"].(map[string]any)["currency"] = "EUR"
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	if status, _, body := postForm(t, dana, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d\n%s", status, body)
	}
	status, _, body := postForm(t, dana, app.URL+"/handoffs/"+id+"/resolve", url.Values{"code": {"refunded"}})
	if status != http.StatusConflict || !strings.Contains(body, "12.00 EUR is in another currency than billing_t2&#39;s USD threshold") {
		t.Errorf("a refund in another currency: %d, want 409 saying so\n%s", status, excerpt(body, "currency", "threshold"))
	}
}

// The resolve form asks for a refunded amount only when the code is refunded.
func TestBrowserRefundedAmountOnlyForRefunded(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	pkg, id := refundPackage(t, "20.00")
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(app.URL+"/handoffs/"+id),
		chromedp.Click(`[data-testid="accept"]`),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
		inMenu("resolve"),
	); err != nil {
		t.Fatalf("accept: %v", err)
	}
	visible := `getComputedStyle(document.querySelector('[data-testid="resolve-amount"]').closest("label")).display !== "none"`
	if evalString(t, ctx, `String(`+visible+`)`) != "false" {
		t.Error("the refunded amount shows before a code is chosen")
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(`[data-testid="resolve-form"] select`, "solved")); err != nil {
		t.Fatal(err)
	}
	if evalString(t, ctx, `String(`+visible+`)`) != "false" {
		t.Error("the refunded amount shows while the code is solved")
	}
	if err := chromedp.Do(ctx, chromedp.SetValue(`[data-testid="resolve-form"] select`, "refunded")); err != nil {
		t.Fatal(err)
	}
	waitForJS(t, ctx, "the refunded amount to show for refunded", visible, `document.querySelector('[data-testid="resolve-form"]').outerHTML`)
}

// A supervisor decides from the card: it shows what the agent already told the customer, the
// contact's earlier handoffs and the package's timeline, live on /approvals, masked per viewer.
func TestApprovalCardShowsItsContext(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	dana, sam := app.client(t), app.client(t)
	app.login(t, dana, "dana@example.com")
	app.login(t, sam, "sam@example.com")

	earlier, earlierID := refundPackage(t, "10.00")
	expect(t, "submit", app.submit(t, key, earlier), http.StatusCreated)
	for _, step := range []struct {
		path string
		form url.Values
	}{{"/accept", nil}, {"/resolve", url.Values{"code": {"solved"}}}} {
		if status, _, body := postForm(t, dana, app.URL+"/handoffs/"+earlierID+step.path, step.form); status != http.StatusSeeOther {
			t.Fatalf("%s: %d\n%s", step.path, status, body)
		}
	}
	pkg, id := refundPackage(t, "240.00")
	pkg["source_agent"] = "billing-bot" // the same bot may not hand the contact over again so soon
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	base := app.URL + "/handoffs/" + id
	for _, step := range []struct {
		path string
		form url.Values
	}{
		{"/accept", nil},
		{"/reply", url.Values{"text": {"Hi Dana, I have asked for your refund to be approved."}}},
		{"/approval", url.Values{"note": {"double charge"}}},
	} {
		if status, _, body := postForm(t, dana, base+step.path, step.form); status != http.StatusSeeOther {
			t.Fatalf("%s: %d\n%s", step.path, status, body)
		}
	}
	_, page := fetchPage(t, sam, app.URL+"/approvals")
	card := page[strings.Index(page, `data-handoff="`+id+`"`):]
	for _, want := range []string{`data-testid="approval-reply"`, "Hi Dana, I have asked for your refund to be approved.",
		`href="/handoffs/` + earlierID + `"`, "Refund of 240.00 USD requested"} {
		if !strings.Contains(card, want) {
			t.Errorf("the approval card lacks %q:\n%s", want, excerpt(card, "approval-context"))
		}
	}
}
