package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
)

// primaries lists the text of the primary buttons a person sees on the page: the package's one
// next step.
const primaries = `[...document.querySelectorAll("[data-primary]")].filter(el => el.checkVisibility()).map(el => el.textContent.trim())`

// clickAsPerson clicks the element sel finds, as a person's click (which may open a popup).
func clickAsPerson(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	quoted := jsString(sel)
	waitAcrossLoad(t, ctx, "something to click at "+sel, `!!document.querySelector(`+quoted+`)`, `document.body ? document.body.innerHTML.slice(0, 2000) : ""`)
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.querySelector(`+quoted+`).click(), true`,
		func(p *runtime.EvaluateParams) { gesture := true; p.UserGesture = &gesture })); err != nil {
		t.Fatalf("click %s: %v", sel, err)
	}
}

// announced waits until the page's announcer, its polite live region, says want, and the page
// stands at path: a page address, not a form's.
func announced(t *testing.T, ctx context.Context, want, path string) {
	t.Helper()
	waitAcrossLoad(t, ctx, "the announcer to say "+want+" at "+path,
		`location.pathname === `+jsString(path)+` && document.getElementById("announcer").getAttribute("role") === "status" && document.getElementById("announcer").textContent.includes(`+jsString(want)+`)`,
		`location.pathname + ": " + (document.getElementById("announcer") || {}).textContent`)
}

// onePrimary checks that the page shows exactly one primary button, reading want.
func onePrimary(t *testing.T, ctx context.Context, when, want string) {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](primaries))
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], want) {
		t.Errorf("%s: the primary buttons read %q, want one, %s", when, got, want)
	}
}

// The agent's working day on the 1440 px package page: one next step at a time (Accept, the
// reply, Resolve), the other actions in the menu, which their keys open; after each action the
// page it led to stands at a page's address and its live region says what happened. A refused
// form stands at the page too, and a reload sends nothing again.
func TestBrowserEveryActionSaysWhatItDid(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2", "billing_t2-refunds")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2", "billing_t2-refunds")
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET parent_id = (SELECT id FROM queues WHERE name = 'billing_t2') WHERE name = 'billing_t2-refunds'`); err != nil {
		t.Fatal(err)
	}
	pkg := harbor(t, func(p map[string]any) { p["transfer_mode"] = "cold" })
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	page := "/handoffs/" + id

	ctx := browser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1440, 900)); err != nil {
		t.Fatal(err)
	}
	browserLogin(t, ctx, app.URL, "dana@example.com")
	announced(t, ctx, "You are logged in", "/")
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+page), chromedp.WaitVisible(`[data-testid="accept"]`),
		chromedp.WaitReady(`body[data-live="online"]`)); err != nil {
		t.Fatal(err)
	}
	onePrimary(t, ctx, "queued", "Accept")
	// T, the transfer's key, opens the menu and the transfer in it, its queue's choice focused.
	if err := chromedp.Do(ctx, chromedp.KeyEvent("t")); err != nil {
		t.Fatal(err)
	}
	waitForJS(t, ctx, "T to open the transfer in the menu", `document.activeElement.matches('[data-testid="transfer-form"] select') && document.getElementById("more-`+id+`").open`,
		`document.activeElement.outerHTML`)
	checkA11y(t, ctx, axe, "the package page with its menu open")
	if err := chromedp.Do(ctx, chromedp.KeyEvent("\x1b")); err != nil { // Escape leaves the field
		t.Fatal(err)
	}

	clickAsPerson(t, ctx, `[data-testid="accept"]`)
	announced(t, ctx, "You accepted the package", page)
	onePrimary(t, ctx, "accepted", "Send reply")
	// Resolving waits in the menu, folded, with no code chosen: nothing closes the package in one
	// click before the customer heard from the desk.
	if got := evalString(t, ctx, `(() => { const f = document.querySelector('[data-testid="resolve-form"]');
		return f.closest("details").open + "|" + f.querySelector("select").value + "|" + f.querySelector("button").textContent.trim() })()`); got != "false||Resolve without a reply" {
		t.Errorf("before a reply the resolve form is (open|code|button) %q, want folded in the menu with no code", got)
	}

	if err := chromedp.Do(ctx, chromedp.SendKeys(`#reply-text`, " Anything else I can do?")); err != nil {
		t.Fatal(err)
	}
	clickAsPerson(t, ctx, `[data-testid="send-reply"]`)
	announced(t, ctx, "Your reply is in the conversation", page)
	onePrimary(t, ctx, "replied", "Resolve")
	if got := evalString(t, ctx, `document.querySelector('[data-testid="resolve-form"] select').value`); got != "solved" {
		t.Errorf("after a reply Resolve offers %q, want solved", got)
	}
	checkA11y(t, ctx, axe, "the package page after the reply")

	clickAsPerson(t, ctx, `[data-testid="resolve"][data-primary]`)
	announced(t, ctx, "You resolved the package", "/queues/billing_t2")
	if rec := app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, key, nil); rec.Body["status"] != "resolved" || rec.Body["outcome"] != "solved" {
		t.Fatalf("after resolving the bot reads %s", rec.Raw)
	}

	// A note of spaces is refused: the page comes back with why, at the package's address, and a
	// reload loads the page instead of sending the note again.
	other := harbor(t, func(p map[string]any) {
		p["transfer_mode"] = "cold"
		p["contact"].(map[string]any)["id"] = "cust_other"
	})
	expect(t, "submit", app.submit(t, key, other), http.StatusCreated)
	otherPage := "/handoffs/" + other["handoff_id"].(string)
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+otherPage), chromedp.SendKeys(`[data-testid="note-text"]`, "   ")); err != nil {
		t.Fatal(err)
	}
	clickAsPerson(t, ctx, `[data-testid="add-note"]`)
	waitAcrossLoad(t, ctx, "the refused note at the package's address",
		`location.pathname === `+jsString(otherPage)+` && document.querySelector('[data-testid="note-error"]').textContent.includes("empty") && document.getElementById("announcer").textContent.includes("empty")`,
		`location.pathname + " " + document.body.innerText.slice(0, 500)`)
	if err := chromedp.Do(ctx, chromedp.Reload()); err != nil {
		t.Fatalf("reload after a refused note: %v", err)
	}
	waitAcrossLoad(t, ctx, "the package page loaded again, without the refusal",
		`location.pathname === `+jsString(otherPage)+` && document.readyState === "complete" && !document.querySelector('[data-testid="note-error"]').textContent`,
		`location.pathname + " " + document.querySelector('[data-testid="note-error"]').textContent`)
	var notes int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM handoff_notes`).Scan(&notes); err != nil || notes != 0 {
		t.Errorf("%d notes (%v), want none", notes, err)
	}
}
