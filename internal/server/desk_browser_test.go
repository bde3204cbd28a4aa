package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
)

// browserLogin logs a browser in at base (any instance) and waits for "my queues".
func browserLogin(t *testing.T, ctx context.Context, base, email string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(`[data-testid="login-form"]`),
		chromedp.SendKeys(`input[name="email"]`, email),
		chromedp.SendKeys(`input[name="password"]`, testPassword),
		chromedp.Submit(`[data-testid="login-form"]`),
		chromedp.WaitVisible(`[data-testid="my-queues"]`),
	); err != nil {
		t.Fatalf("login %s: %v", email, err)
	}
}

// openQueue opens a queue page and waits until its socket is live.
func openQueue(t *testing.T, ctx context.Context, base, queue string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/queues/"+queue),
		chromedp.WaitVisible(`[data-testid="cards"]`),
		chromedp.WaitReady(`body[data-live="online"]`),
		// Marks the document: a reload would lose it.
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`),
	); err != nil {
		t.Fatalf("open queue %s: %v", queue, err)
	}
}

// inMenu opens the package's menu of actions and the action name in it, as a person clicks them,
// on a page freshly loaded (the menu starts closed).
func inMenu(name string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Click(`[data-testid="more-actions-toggle"]`),
		chromedp.Click(`[data-testid="menu-`+name+`"] > summary`),
		chromedp.WaitVisible(`[data-testid="menu-`+name+`"] form`),
	)
}

// text reads an element's text in one step in the page: live fragments replace elements at any
// moment, so a node looked up first and read afterwards may already be gone.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	quoted, _ := json.Marshal(sel)
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(document.querySelector(`+string(quoted)+`) || {innerText: ""}).innerText.trim()`))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return got
}

func TestBrowserSeesPackageArriveAndWorksIt(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2", "billing_t2-refunds")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2", "billing_t2-refunds")
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET parent_id = (SELECT id FROM queues WHERE name = 'billing_t2') WHERE name = 'billing_t2-refunds'`); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")
	openQueue(t, ctx, app.URL, "billing_t2")

	resolved := harbor(t, nil)
	id := resolved["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, resolved), http.StatusCreated)
	card := `#card-` + id
	if err := chromedp.Do(ctx, chromedp.WaitVisible(card)); err != nil {
		t.Fatalf("the package never appeared: %v", err)
	}
	if same, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.sameDocument === true`)); err != nil || !same {
		t.Fatal("the page reloaded; the card must arrive over the socket")
	}
	if got := text(t, ctx, card+` [data-testid="problem"]`); !strings.Contains(got, "Duplicate charge $49.99") {
		t.Errorf("card problem statement %q", got)
	}
	if got := text(t, ctx, card+` [data-testid="contact"]`); got != "D. W." {
		t.Errorf("an agent below the queue's PII role sees contact %q, want initials", got)
	}

	// Accept from the card, then resolve from the package view: with no reply sent, the reply is
	// the next step and resolving waits in the menu.
	if err := chromedp.Do(ctx,
		chromedp.Click(card+` [data-testid="accept"]`),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
	); err != nil {
		t.Fatal(err)
	}
	if got := text(t, ctx, `[data-testid="actions"] [data-primary], [data-testid="send-reply"][data-primary]`); !strings.HasPrefix(got, "Send reply") {
		t.Errorf("after accept the next step reads %q, want Send reply", got)
	}
	if got := text(t, ctx, `[data-testid="status"]`); got != "accepted" {
		t.Fatalf("after accept the status reads %q", got)
	}
	for _, want := range []string{"✓ ok", "✗ failed", "policy://billing-refunds#4.2", "verified by the bot"} {
		if !strings.Contains(text(t, ctx, `[data-testid="handoff"]`), want) {
			t.Errorf("package view lacks %q", want)
		}
	}
	if err := chromedp.Do(ctx,
		inMenu("resolve"),
		chromedp.SetValue(`[data-testid="resolve-form"] select`, "refunded"),
		chromedp.Click(`[data-testid="resolve"]`),
		chromedp.WaitVisible(`[data-testid="cards"]`),
	); err != nil {
		t.Fatal(err)
	}
	if rec := app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, key, nil); rec.Body["status"] != "resolved" || rec.Body["outcome"] != "refunded" {
		t.Fatalf("after resolving in the browser the bot reads %s", rec.Raw)
	}

	// Reject, return to bot and transfer, each through its form.
	actions := []struct {
		form, fill, value, wantStatus string
	}{
		{"reject-form", `[data-testid="reject-form"] input[name="reason"]`, "not a billing issue", "queued"},
		{"return-form", `[data-testid="return-form"] input[name="note"]`, "policy covers this", "returned_to_bot"},
		{"transfer-form", `[data-testid="transfer-form"] input[name="note"]`, "refund specialist please", "queued"},
	}
	for i, a := range actions {
		// Cold: dana is online, and a warm package would ring her (warm_test.go tests the ring).
		pkg := harbor(t, func(p map[string]any) {
			p["contact"].(map[string]any)["id"] = "cust_ui_" + a.form
			p["transfer_mode"] = "cold"
		})
		pid := pkg["handoff_id"].(string)
		expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
		if err := chromedp.Do(ctx, chromedp.WaitVisible(`#card-`+pid), chromedp.Click(`#card-`+pid+` [data-open]`),
			chromedp.WaitVisible(`[data-testid="actions"]`)); err != nil {
			t.Fatalf("%s: open package: %v", a.form, err)
		}
		if a.form == "reject-form" {
			if err := chromedp.Do(ctx, chromedp.Click(`[data-testid="accept"]`), chromedp.WaitVisible(`[data-testid="reply-editor"]`)); err != nil {
				t.Fatal(err)
			}
		}
		if err := chromedp.Do(ctx,
			inMenu(strings.TrimSuffix(a.form, "-form")),
			chromedp.SendKeys(a.fill, a.value),
			chromedp.Submit(`[data-testid="`+a.form+`"]`),
			chromedp.WaitVisible(`[data-testid="cards"]`),
		); err != nil {
			t.Fatalf("%s: %v", a.form, err)
		}
		rec := app.api(t, http.MethodGet, "/api/v1/handoffs/"+pid, key, nil)
		if rec.Body["status"] != a.wantStatus {
			t.Errorf("action %d (%s): status %v, want %s", i, a.form, rec.Body["status"], a.wantStatus)
		}
		if a.form == "transfer-form" && rec.Body["queue"] != "billing_t2-refunds" {
			t.Errorf("transfer landed in %v", rec.Body["queue"])
		}
	}
}

func TestBrowserTwoInstancesShareEveryChange(t *testing.T) {
	t.Parallel()
	app := setup(t)
	other, _ := app.start(t) // a second instance on the same database, as behind a load balancer
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")
	openQueue(t, ctx, app.URL, "billing_t2")

	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	got := (&testApp{URL: other}).api(t, http.MethodPost, "/api/v1/handoffs", key, pkg)
	expect(t, "submit on the other instance", got, http.StatusCreated)
	waitCtx, cancel := context.WithTimeout(ctx, waitDeadline)
	defer cancel()
	if err := chromedp.Do(waitCtx, chromedp.WaitVisible(`#card-`+id)); err != nil {
		t.Fatalf("a package sent to instance B never reached the browser on instance A: %v", err)
	}
	cancelled := (&testApp{URL: other}).api(t, http.MethodPost, "/api/v1/handoffs/"+id+"/cancel", key, nil)
	expect(t, "cancel on the other instance", cancelled, http.StatusOK)
	if err := chromedp.Do(waitCtx, chromedp.WaitNotPresent(`#card-`+id)); err != nil {
		t.Fatalf("the cancel on instance B never removed the card on instance A: %v", err)
	}
}

func TestBrowserKeyboardAndOfflineBanner(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	base, stop := app.start(t)
	ctx := browser(t)
	browserLogin(t, ctx, base, "dana@example.com")
	openQueue(t, ctx, base, "billing_t2")
	pkg := harbor(t, func(p map[string]any) { p["priority"] = "urgent" })
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)

	// N takes the next package (a reservation), A accepts it: no mouse.
	if err := chromedp.Do(ctx,
		chromedp.WaitVisible(`#card-`+id),
		chromedp.KeyEvent("n"),
		chromedp.WaitVisible(`[data-testid="handoff"][data-handoff="`+id+`"]`),
	); err != nil {
		t.Fatalf("N: %v", err)
	}
	if got := text(t, ctx, `[data-testid="status"]`); got != "reserved" {
		t.Fatalf("after N the package is %q, want reserved", got)
	}
	if err := chromedp.Do(ctx, chromedp.WaitReady(`body[data-live="online"]`), chromedp.KeyEvent("a"),
		chromedp.WaitVisible(`[data-testid="resolve-form"]`)); err != nil {
		t.Fatalf("A: %v", err)
	}
	if got := text(t, ctx, `[data-testid="status"]`); got != "accepted" {
		t.Fatalf("after A the package is %q, want accepted", got)
	}

	// The instance goes away: the page says it is offline instead of showing stale data silently.
	stop()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`[data-testid="offline"]`)); err != nil {
		t.Fatalf("no offline banner after the server stopped: %v", err)
	}
}
