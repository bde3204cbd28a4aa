package server_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// ringOut submits a warm package that rings the agent and waits until its ring ran out.
func (a *testApp) ringOut(t *testing.T, key string, u auth.User) string {
	t.Helper()
	id, p := warmPackageFor(t, "billing_t2")
	if ans := a.submit(t, key, p); ans.Body["offered_to"] != u.DisplayName {
		t.Fatalf("%s: %s, want it to ring %s", id, ans.Raw, u.DisplayName)
	}
	waitFor(t, id+"'s ring to run out", func() bool { return !a.rings(t, id, u) })
	return id
}

// waitAcrossLoad waits until js is true on the page, which a form's post is replacing: asked while
// the next page loads, the question may be lost with the old one, and is asked again.
func waitAcrossLoad(t *testing.T, ctx context.Context, what, js, show string) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			last, _ := chromedp.Run(ctx, chromedp.Evaluate[string](show))
			t.Fatalf("waiting for %s: %v; last seen: %q", what, err, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Over HTTP: a ring that ran out is listed as missed on the agent's pages, read from the offers
// (a declined one is not); a decline answers with the page it was sent from, not the package's
// queue, and breaks the row of missed rings; the queue's second missed ring in a row sets the
// agent away, which every page of theirs says, with why, until they choose again.
func TestMissedRingsShowAndDeclineComesBack(t *testing.T) {
	t.Parallel()
	app := setupHooks(t, server.Config{}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.setWarm(t, "billing_t2", time.Second, time.Minute)
	key, _ := app.warmBot(t, "billing_t2")
	c := app.client(t)
	app.login(t, c, "dana@example.com")
	app.dialed(t, c, "")
	app.waitOnline(t, dana)
	page := func() string {
		t.Helper()
		resp, body := get(t, c, app.URL+"/")
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /: %d", resp.StatusCode)
		}
		return body
	}

	missed := app.ringOut(t, key, dana)
	if body := page(); !strings.Contains(body, `data-missed="`+missed+`"`) || strings.Contains(body, `data-testid="set-away"`) {
		t.Fatalf("after one ring ran out, the page should list it as missed and not say dana was set away:\n%s", body)
	}

	declined, p := warmPackageFor(t, "billing_t2")
	if ans := app.submit(t, key, p); ans.Body["offered_to"] != "dana" {
		t.Fatalf("%s: %s, want it to ring dana", declined, ans.Raw)
	}
	here := "/handoffs/" + missed + "?from=ring"
	if status, where, body := postForm(t, c, app.URL+"/handoffs/"+declined+"/decline", url.Values{"next": {here}}); status != http.StatusSeeOther || where != here {
		t.Fatalf("decline: %d to %q, want 303 back to %s: %s", status, where, here, body)
	}

	// The decline broke the row: one more ring run out is not two in a row.
	again := app.ringOut(t, key, dana)
	if body := page(); strings.Contains(body, `data-testid="set-away"`) || strings.Contains(body, `data-missed="`+declined+`"`) {
		t.Fatalf("after a decline and a ring run out, dana should be available and the decline not missed:\n%s", body)
	}
	last := app.ringOut(t, key, dana)
	body := page()
	for _, want := range []string{`data-testid="set-away"`, `<option value="away" selected>`,
		`data-missed="` + missed + `"`, `data-missed="` + again + `"`, `data-missed="` + last + `"`} {
		if !strings.Contains(body, want) {
			t.Errorf("after two rings in a row ran out, the page lacks %s", want)
		}
	}
	if t.Failed() {
		t.Fatalf("the page:\n%s", body)
	}
	_, p = warmPackageFor(t, "billing_t2")
	if ans := app.submit(t, key, p); ans.Body["offered_to"] != nil {
		t.Fatalf("a warm package while dana was set away: %s, want it to ring nobody", ans.Raw)
	}
	formOK(t, c, app.URL+"/me/status", url.Values{"status": {"available"}})
	if body := page(); strings.Contains(body, `data-testid="set-away"`) {
		t.Errorf("dana chose available, and the page still says she was set away")
	}
}

// In Chromium, live: a ring that runs out leaves a missed entry without a reload, and a reload
// keeps it; the second in a row sets the agent away, which the page says at once, the header's
// switch too, and axe-core finds nothing serious on it; "I am back" brings them back to the page they were on; a decline by keyboard leaves
// the page as it was, not reloaded, with what the agent typed in it.
func TestBrowserMissedRingThenAwayThenDeclineInPlace(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.setWarm(t, "billing_t2", time.Second, time.Minute)
	held := harborFor(t, "billing_t2")
	expect(t, "submit a cold package", app.submit(t, key, held), http.StatusCreated)
	heldID := held.(map[string]any)["handoff_id"].(string)

	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")
	here := "/handoffs/" + heldID
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+here), chromedp.WaitVisible(`body[data-live="online"]`)); err != nil {
		t.Fatalf("the package page: %v", err)
	}
	app.waitOnline(t, dana)
	stay := func(what string) {
		t.Helper()
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.samePage = true`)); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	stayed := func(what string) {
		t.Helper()
		if got := evalString(t, ctx, `(window.samePage === true) + " " + location.pathname + location.search`); got != "true "+here {
			t.Errorf("%s: the page is %q, want the same page, %s, not reloaded", what, got, here)
		}
	}
	// Each reload opens a new socket, whose presence is written a moment later (live.Presence
	// coalesces writes): a ring is sent only once the agent is online again.
	ringDana := func() string {
		t.Helper()
		app.waitOnline(t, dana)
		id, p := warmPackageFor(t, "billing_t2")
		if ans := app.submit(t, key, p); ans.Body["offered_to"] != "dana" {
			t.Fatalf("%s: %s, want it to ring dana", id, ans.Raw)
		}
		return id
	}
	missed := func(id string) string { return `#ring [data-testid="missed-ring"][data-missed="` + id + `"]` }
	show := `document.querySelector("#ring").outerHTML + " switch=" + document.querySelector("#availability").value`

	stay("before the first ring")
	first := ringDana()
	waitForJS(t, ctx, "the first missed ring, live", `!!document.querySelector(`+jsString(missed(first))+`)`, show)
	stayed("the first ring ran out")
	if got := evalString(t, ctx, `document.querySelector(`+jsString(missed(first)+" time")+`).textContent`); strings.HasSuffix(got, "UTC") {
		t.Errorf("the missed ring's time reads %q, want the browser's time of day", got)
	}
	if got := evalString(t, ctx, show); strings.Contains(got, `data-testid="set-away"`) || !strings.HasSuffix(got, "switch=available") {
		t.Fatalf("one ring ran out: %s; want dana still available", got)
	}
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(`body[data-live="online"]`), chromedp.WaitVisible(missed(first))); err != nil {
		t.Fatalf("the missed ring after a reload: %v", err)
	}

	stay("before the second ring")
	second := ringDana()
	waitForJS(t, ctx, "dana set away, live", `!!document.querySelector('#ring [data-testid="set-away"]') && document.querySelector("#availability").value === "away" && !!document.querySelector(`+jsString(missed(second))+`)`, show)
	stayed("the second ring ran out")
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(`body[data-live="online"]`), chromedp.WaitVisible(`#ring [data-testid="set-away"]`), chromedp.WaitVisible(missed(first)), chromedp.WaitVisible(missed(second))); err != nil {
		t.Fatalf("set away and the missed rings after a reload: %v", err)
	}
	axe, err := os.ReadFile(axePath)
	if err != nil {
		t.Fatalf("axe-core is missing: run `npm install`: %v", err)
	}
	checkA11y(t, ctx, string(axe), "a page saying the agent was set away, with missed rings")
	if err := chromedp.Do(ctx, chromedp.Click(`[data-testid="set-away-back"]`)); err != nil {
		t.Fatal(err)
	}
	waitAcrossLoad(t, ctx, "back, available, on the same page", `location.pathname === `+jsString(here)+` && document.body.dataset.live === "online" &&
		document.querySelector("#availability").value === "available" && !document.querySelector('#ring [data-testid="set-away"]')`, show)

	// A decline by keyboard while the agent has typed a note into the page: the page stays.
	stay("before the third ring")
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`(() => {
		const f = document.createElement("textarea"); f.id = "typed"; document.querySelector("main").append(f); f.value = "half a thought";
	})()`)); err != nil {
		t.Fatal(err)
	}
	// What the announcer says is recorded as it changes: the decline's words are a moment in the
	// live region, not a state the test can count on finding it in later.
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`(() => {
		const a = document.getElementById("announcer"); window.announced = [];
		new MutationObserver(() => window.announced.push(a.textContent)).observe(a, { childList: true, characterData: true, subtree: true });
	})()`)); err != nil {
		t.Fatal(err)
	}
	third := ringDana()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#ring [data-testid="ring"][data-handoff="`+third+`"]`), chromedp.KeyEvent("x")); err != nil {
		t.Fatalf("declining the third ring with X: %v", err)
	}
	waitFor(t, "the third ring to be declined", func() bool {
		var outcome string
		_ = app.DB.QueryRow(context.Background(), `SELECT coalesce(o.outcome, '') FROM offers o JOIN handoffs h ON h.id = o.handoff_id
			WHERE h.handoff_id = $1 AND o.user_id = $2`, third, dana.ID).Scan(&outcome)
		return outcome == "declined"
	})
	waitForJS(t, ctx, "the declined ring gone, and the page saying so", `!document.querySelector('#ring [data-testid="ring"]') &&
		window.announced.some((s) => s.startsWith("You declined the ring"))`, show+` + " announced=" + JSON.stringify(window.announced) + " same page=" + window.samePage`)
	stayed("after the decline")
	if got := evalString(t, ctx, `document.querySelector("#typed") ? document.querySelector("#typed").value : "gone"`); got != "half a thought" {
		t.Errorf("after the decline the typed text is %q", got)
	}
	if got := evalString(t, ctx, show); strings.Contains(got, `data-missed="`+third+`"`) {
		t.Errorf("a declined ring is listed as missed: %s", got)
	}
}
