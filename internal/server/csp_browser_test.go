package server_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
)

// cspWatch gathers what Chromium logs about the Content-Security-Policy of the pages a browser
// visits: a refused inline style or script is silent on the page (the queue tree sat flat) and
// shows only in the console.
type cspWatch struct {
	mu         sync.Mutex
	page       string
	violations []string
}

// watchCSP starts gathering ctx's CSP complaints. Listen's callback runs before the command that
// follows the event returns, so after a page's wait every complaint it caused is gathered.
func watchCSP(t *testing.T, ctx context.Context) *cspWatch {
	t.Helper()
	w := &cspWatch{}
	err := chromedp.Listen(ctx, func(ev any) {
		// Chromium logs a violation as an entry of its log (source "security"), not through the
		// page's console API.
		entry, ok := ev.(*log.EventEntryAdded)
		if !ok || !strings.Contains(entry.Entry.Text, "Content Security Policy") {
			return
		}
		w.mu.Lock()
		w.violations = append(w.violations, w.page+": "+entry.Entry.Text)
		w.mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// visit opens path and waits for ready, noting the page for the complaints it causes.
func (w *cspWatch) visit(t *testing.T, ctx context.Context, base, path, ready string) {
	t.Helper()
	w.mu.Lock()
	w.page = path
	w.mu.Unlock()
	if err := chromedp.Do(ctx, chromedp.Navigate(base+path), chromedp.WaitVisible(ready)); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func (w *cspWatch) check(t *testing.T, who string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.violations {
		t.Errorf("as %s, Chromium logged a CSP violation on %s", who, v)
	}
}

// TestBrowserNoCSPViolations walks the desk's pages as an agent, a supervisor and an admin, and
// fails on any Content-Security-Policy violation Chromium logs on any of them.
func TestBrowserNoCSPViolations(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor, "billing_t2")
	app.user(t, "ada@example.com", auth.RoleAdmin)
	// A child queue, for the admin's tree to indent.
	if _, err := app.DB.Exec(t.Context(), `INSERT INTO queues (name, parent_id) SELECT 'billing_t2-refunds', id FROM queues WHERE name = 'billing_t2'`); err != nil {
		t.Fatal(err)
	}
	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	var queueID, userID, keyID int64
	if err := app.DB.QueryRow(t.Context(), `SELECT (SELECT id FROM queues WHERE name = 'billing_t2'),
		(SELECT id FROM users WHERE email = 'dana@example.com'), (SELECT id FROM api_keys WHERE name = 'tier1')`).
		Scan(&queueID, &userID, &keyID); err != nil {
		t.Fatal(err)
	}

	agent := browser(t)
	w := watchCSP(t, agent)
	browserLogin(t, agent, app.URL, "dana@example.com")
	w.visit(t, agent, app.URL, "/", `[data-testid="my-queues"]`)
	w.visit(t, agent, app.URL, "/queues/billing_t2", `[data-testid="cards"]`)
	w.visit(t, agent, app.URL, "/handoffs/"+id, `[data-testid="problem"]`)
	w.visit(t, agent, app.URL, "/sidebar/"+id, `[data-testid="problem"]`)
	w.check(t, "an agent")

	sup := browser(t)
	w = watchCSP(t, sup)
	browserLogin(t, sup, app.URL, "sam@example.com")
	for _, p := range []struct{ path, ready string }{
		{"/", `[data-testid="my-queues"]`},
		{"/queues/billing_t2", `[data-testid="cards"]`},
		{"/handoffs/" + id, `[data-testid="problem"]`},
		{"/approvals", "main"},
		{"/dashboard", "main"},
		{"/evals", "main"},
		{"/audit", `[data-testid="audit"]`},
		{"/audit?since=yesterday", `[data-testid="filter-error-since"]`},
	} {
		w.visit(t, sup, app.URL, p.path, p.ready)
	}
	w.check(t, "a supervisor")

	admin := browser(t)
	w = watchCSP(t, admin)
	adminLogin(t, admin, app.URL, "ada@example.com")
	for _, p := range []struct{ path, ready string }{
		{"/admin/queues", `[data-testid="queue-tree"]`},
		{"/admin/queues/" + strconv.FormatInt(queueID, 10), `[data-testid="queue-form"]`},
		{"/admin/users", `[data-testid="user-list"]`},
		{"/admin/users/" + strconv.FormatInt(userID, 10), `[data-testid="disable-user"]`},
		{"/admin/keys", `[data-testid="key-list"]`},
		{"/admin/keys/" + strconv.FormatInt(keyID, 10), `[data-testid="revoke-key"]`},
		{"/admin/settings", `[data-testid="sso-settings"]`},
		{"/audit", `[data-testid="audit"]`},
	} {
		w.visit(t, admin, app.URL, p.path, p.ready)
	}
	// The confirmation of disabling a user, which the admin leaves without confirming.
	if err := chromedp.Do(admin, chromedp.Navigate(app.URL+"/admin/users/"+strconv.FormatInt(userID, 10)),
		chromedp.Click(`[data-testid="disable-user"]`), chromedp.WaitVisible(`[data-testid="confirm-disable"]`)); err != nil {
		t.Fatal(err)
	}
	w.check(t, "an admin")

	// The tree indents the child under its parent.
	if err := chromedp.Do(admin, chromedp.Navigate(app.URL+"/admin/queues"), chromedp.WaitVisible(`[data-testid="queue-tree"]`)); err != nil {
		t.Fatal(err)
	}
	indents, err := chromedp.Run(admin, chromedp.Evaluate[[]float64](`["billing_t2", "billing_t2-refunds"].map(q =>
		parseFloat(getComputedStyle(document.querySelector('[data-testid="queue-row"][data-queue="' + q + '"]')).paddingLeft))`))
	if err != nil {
		t.Fatal(err)
	}
	if len(indents) != 2 || indents[1] <= indents[0] {
		t.Errorf("the child queue is indented %v px, its parent %v: want it further in", indents[1:], indents[:1])
	}
}
