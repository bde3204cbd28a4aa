package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// POST /me/status: a value that is not a choice is a 422 naming it, another site's form is
// refused, a visitor who is not logged in is sent to log in; a break takes the agent's ring to the
// next agent at once, and no ring comes to them until they are available again.
func TestAvailabilityDecidesWhoIsRung(t *testing.T) {
	t.Parallel()
	app := setupHooks(t, server.Config{}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	alex := app.user(t, "alex@example.com", auth.RoleAgent, "billing_t2")
	bea := app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	app.setWarm(t, "billing_t2", time.Minute, 2*time.Minute)
	key, ear := app.warmBot(t, "billing_t2")
	ac, bc := app.client(t), app.client(t)
	app.login(t, ac, "alex@example.com")
	app.login(t, bc, "bea@example.com")
	app.dialed(t, ac, "")
	app.dialed(t, bc, "")
	app.waitOnline(t, alex, bea)

	if status, _, body := postForm(t, ac, app.URL+"/me/status", url.Values{"status": {"lunch"}}); status != http.StatusUnprocessableEntity || !strings.Contains(body, `lunch`) {
		t.Errorf("status lunch: %d %s, want 422 naming it", status, body)
	}
	req, err := http.NewRequest(http.MethodPost, app.URL+"/me/status", strings.NewReader("status=away"))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, err := ac.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("another site's form: %v %v, want 403", resp, err)
	} else {
		resp.Body.Close()
	}
	if status, _, _ := postForm(t, app.client(t), app.URL+"/me/status", url.Values{"status": {"away"}}); status != http.StatusUnauthorized {
		t.Errorf("not logged in: %d, want 401", status)
	}

	first, p := warmPackageFor(t, "billing_t2")
	if ans := app.submit(t, key, p); ans.Body["offered_to"] != "alex" {
		t.Fatalf("first package: %s, want it to ring alex", ans.Raw)
	}
	// alex takes a break: his ring goes to bea now, not in a minute, and back on his page he sees
	// his choice.
	if status, where, body := postForm(t, ac, app.URL+"/me/status", url.Values{"status": {"break"}, "next": {"/queues/billing_t2"}}); status != http.StatusSeeOther || where != "/queues/billing_t2" {
		t.Fatalf("alex's break: %d to %q %s", status, where, body)
	}
	waitFor(t, "the ring to move to bea", func() bool { return app.rings(t, first, bea) })
	formOK(t, bc, app.URL+"/handoffs/"+first+"/accept", nil)
	ear.warmEnd(t, app, first, "accepted")

	// bea is away too: nobody may be rung, though both have the desk open.
	formOK(t, bc, app.URL+"/me/status", url.Values{"status": {"away"}})
	second, p := warmPackageFor(t, "billing_t2")
	if ans := app.submit(t, key, p); ans.Body["offered_to"] != nil {
		t.Fatalf("second package: %s, want it to ring nobody while both are on a break or away", ans.Raw)
	}
	ear.warmEnd(t, app, second, "warm_timeout:no_agent_online")
	formOK(t, ac, app.URL+"/me/status", url.Values{"status": {"available"}})
	_, p = warmPackageFor(t, "billing_t2")
	if ans := app.submit(t, key, p); ans.Body["offered_to"] != "alex" {
		t.Fatalf("third package: %s, want it to ring alex, available again", ans.Raw)
	}
}

// The availability switch in Chromium, by keyboard: V focuses it, a letter or an arrow chooses, the page
// comes back showing the choice; the supervisor's live roster shows it with how long; a warm
// package does not ring the agent on a break, and rings her once she is available again.
func TestBrowserAvailabilitySwitch(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	agent, sup := browser(t), browser(t)
	browserLogin(t, agent, app.URL, "dana@example.com")
	browserLogin(t, sup, app.URL, "sam@example.com")
	openQueue(t, agent, app.URL, "billing_t2")
	app.waitOnline(t, dana)
	if got := evalString(t, agent, `document.querySelector("[data-testid=availability-status]").value`); got != "available" {
		t.Fatalf("the switch reads %q on opening the desk, want available", got)
	}
	if err := chromedp.Do(sup, chromedp.Navigate(app.URL+"/dashboard"),
		chromedp.WaitVisible(`[data-testid="roster-agent"][data-agent="dana"][data-status="available"]`)); err != nil {
		t.Fatalf("the roster before the break: %v", err)
	}

	choose := func(key, want string) {
		t.Helper()
		if err := chromedp.Do(agent, chromedp.KeyEvent("v"), chromedp.WaitReady(`#availability:focus`), chromedp.KeyEvent(key)); err != nil {
			t.Fatalf("choosing %s by keyboard: %v", want, err)
		}
		// The choice posts the form and the page comes back: asked while it loads, the old page
		// may be gone under the question.
		deadline := time.Now().Add(15 * time.Second)
		for {
			shown, err := chromedp.Run(agent, chromedp.Evaluate[bool](`window.sameDocument === undefined && document.body.dataset.live === "online" &&
				document.querySelector("#availability").value === "`+want+`"`))
			if err == nil && shown {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the page never came back showing %s: %v", want, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if got := evalString(t, agent, `location.pathname`); got != "/queues/billing_t2" {
			t.Errorf("after choosing %s the page is %s, want the queue it was on", want, got)
		}
		if err := chromedp.Do(agent, chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`)); err != nil {
			t.Fatal(err)
		}
	}
	choose(kb.ArrowDown, "break")
	wait, cancel := context.WithTimeout(sup, 15*time.Second)
	defer cancel()
	if err := chromedp.Do(wait, chromedp.WaitVisible(`[data-testid="roster-agent"][data-agent="dana"][data-status="break"] [data-testid="agent-status-for"]`)); err != nil {
		t.Fatalf("the live roster after the break: %v\n%s", err, evalString(t, sup, `document.querySelector('[data-agent="dana"]').outerHTML + document.body.dataset.live`))
	}
	if got := evalString(t, sup, `document.querySelector('[data-agent="dana"] [data-testid="agent-status-for"]').textContent`); !strings.HasPrefix(got, "for ") {
		t.Errorf("the roster says %q of how long dana is on a break", got)
	}
	onBreak := warmPackage(t)
	if ans := app.submit(t, key, onBreak); ans.Body["offered_to"] != nil {
		t.Fatalf("a warm package while dana is on a break: %s, want it to ring nobody", ans.Raw)
	}

	choose(kb.ArrowUp, "available")
	// The choice reloaded the page: its new socket's presence is written a moment after it opens
	// (live.Presence coalesces writes), and a page that took longer to load than that moment
	// left the agent offline in between.
	app.waitOnline(t, dana)
	back := warmPackage(t)
	back["contact"].(map[string]any)["id"] = "cust_back"
	if ans := app.submit(t, key, back); ans.Body["offered_to"] != "dana" {
		t.Fatalf("a warm package once dana is available: %s, want it to ring her", ans.Raw)
	}
	if err := chromedp.Do(agent, chromedp.WaitVisible(`#ring [data-handoff="`+back["handoff_id"].(string)+`"]`)); err != nil {
		t.Fatalf("dana's ring: %v", err)
	}
}
