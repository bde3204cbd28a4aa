package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
)

// crmPage serves a CRM's page that frames src() at 380 × 640, as a CRM's sidebar slot does, on a
// loopback port of its own. Its URL names it localhost: another site than the desk's 127.0.0.1,
// so the frame is a third party's, with cookies of its own, as in a real CRM.
func crmPage(t *testing.T, src func() string) (crmURL string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	crm := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = fmt.Fprintf(w, `<!doctype html><title>CRM</title><body style="margin:0"><iframe id="desk" src="%s" width="380" height="640" style="border:0"></iframe>`, src())
	}))
	crm.Listener = ln
	crm.Start()
	t.Cleanup(crm.Close)
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	return "http://localhost:" + port
}

// frameOf attaches to the CRM's frame of the desk. A frame of another site runs in a process of
// its own (an out-of-process iframe), which the CRM page's DOM does not reach; its own target
// does, and stays the frame's while the frame goes from one desk page to the next.
func frameOf(t *testing.T, ctx context.Context, deskURL string) context.Context {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for {
		targets, err := chromedp.Targets(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, tg := range targets {
			if tg.Type == "iframe" && strings.HasPrefix(tg.URL, deskURL) {
				frame, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(tg.TargetID))
				t.Cleanup(cancel)
				return frame
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no frame of %s among %d targets", deskURL, len(targets))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// nestedScroll lists the elements of the page that scroll on their own, a box inside the page's
// one scroll.
const nestedScroll = `[...document.querySelectorAll("*")].filter(el => el !== document.scrollingElement &&
	el.scrollHeight > el.clientHeight + 1 && /auto|scroll/.test(getComputedStyle(el).overflowY))
	.map(el => el.tagName + "#" + el.id + "[" + (el.dataset.testid || "") + "] " + el.scrollHeight + ">" + el.clientHeight)`

// checkOneScroll fails the test when an element of the frame's page scrolls on its own.
func checkOneScroll(t *testing.T, frame context.Context, when string) {
	t.Helper()
	boxes, err := chromedp.Run(frame, chromedp.Evaluate[[]string](nestedScroll))
	if err != nil {
		t.Fatalf("%s: %v", when, err)
	}
	if len(boxes) > 0 {
		t.Errorf("%s: boxes that scroll inside the sidebar: %v", when, boxes)
	}
}

// inView says whether the element sel finds is wholly inside the frame's viewport.
func inView(sel string) string {
	return `(() => { const r = document.querySelector(` + jsString(sel) + `).getBoundingClientRect();
		return r.height > 0 && r.top >= 0 && r.bottom <= innerHeight && r.left >= 0 && r.right <= innerWidth })()`
}

// The sidebar in a CRM at 380 × 640, on another site than the desk's: the agent signs in through
// a popup, never a password form in the frame; each state shows one primary button and the menu,
// with no box scrolling inside the page and the actions in view; Send stays in view while the
// agent writes a long reply; after each action the frame stands at the sidebar's address and its
// live region says what happened; a 404 or a 403 stays a framed page with a way back to My work.
// axe-core finds nothing serious on any of it.
func TestBrowserSidebarInACRMFrame(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	var mu sync.Mutex
	var src string
	crmURL := crmPage(t, func() string { mu.Lock(); defer mu.Unlock(); return src })
	app := setup(t, crmURL)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	pkg := harbor(t, func(p map[string]any) { p["transfer_mode"] = "cold" })
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	sidebar := "/sidebar/" + id
	mu.Lock()
	src = app.URL + sidebar
	mu.Unlock()

	// Its popup is looked for among the browser's new targets: no other test's may be there.
	ctx := ownBrowser(t)
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 720), chromedp.Navigate(crmURL), chromedp.WaitReady(`#desk`)); err != nil {
		t.Fatal(err)
	}
	frame := frameOf(t, ctx, app.URL)

	// Not signed in: the frame offers a popup, not a password form.
	waitAcrossLoad(t, frame, "the frame's sign-in", `!!document.querySelector('[data-testid="signin-popup"]')`, `location.href`)
	if got := evalString(t, frame, `String(document.querySelectorAll('input[type=password]').length) + " " + innerWidth + "x" + innerHeight`); got != "0 380x640" {
		t.Errorf("the frame's sign-in: password fields and size %q, want none at 380x640", got)
	}
	checkA11y(t, frame, axe, "the sign-in in the CRM's frame")
	popups := chromedp.WaitNewTarget(ctx, func(info *target.Info) bool { return info.Type == "page" })
	clickAsPerson(t, frame, `[data-testid="signin-popup"]`)
	var popupID target.ID
	select {
	case popupID = <-popups:
	case <-time.After(waitDeadline):
		t.Fatal("Sign in opened no popup")
	}
	popup, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(popupID))
	defer cancel()
	if err := chromedp.Do(popup,
		chromedp.WaitVisible(`[data-testid="login-form"]`),
		chromedp.SendKeys(`input[name="email"]`, "dana@example.com"),
		chromedp.SendKeys(`input[name="password"]`, testPassword),
		chromedp.Submit(`[data-testid="login-form"]`),
	); err != nil {
		t.Fatalf("sign in in the popup: %v", err)
	}
	announced(t, frame, "You are logged in", sidebar)
	var sessions int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM sessions`).Scan(&sessions); err != nil || sessions != 1 {
		t.Errorf("%d sessions (%v), want the frame's alone: the popup hands its sign-in over", sessions, err)
	}

	// Queued: Accept, the menu below it, the action bar in view, one scroll.
	onePrimary(t, frame, "queued in the frame", "Accept")
	checkOneScroll(t, frame, "queued")
	if ok, _ := chromedp.Run(frame, chromedp.Evaluate[bool](inView(`[data-testid="action-bar"]`))); !ok {
		t.Error("queued: the action bar is not in the frame's view without scrolling")
	}
	clickAsPerson(t, frame, `[data-testid="more-actions-toggle"]`)
	clickAsPerson(t, frame, `[data-testid="menu-return"] > summary`)
	waitForJS(t, frame, "the return's form to open in the menu", `document.querySelector('[data-testid="return-form"]').checkVisibility()`,
		`document.querySelector('[data-testid="more-actions"]').outerHTML`)
	checkOneScroll(t, frame, "queued, the menu open")
	checkA11y(t, frame, axe, "the sidebar with its menu open")

	clickAsPerson(t, frame, `[data-testid="accept"]`)
	announced(t, frame, "You accepted the package", sidebar)
	onePrimary(t, frame, "accepted in the frame", "Send reply")
	checkOneScroll(t, frame, "accepted")

	// A long reply: the box grows with it, the page scrolls, and Send stays in view.
	var lines []string
	for i := 1; i <= 40; i++ {
		lines = append(lines, fmt.Sprintf("Line %d: the duplicate charge of $49.99 is reversed today.", i))
	}
	if _, err := chromedp.Run(frame, chromedp.Evaluate[bool](`(() => { const box = document.getElementById("reply-text");
		box.focus(); box.setSelectionRange(box.value.length, box.value.length); return true })()`)); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(frame, insertText("\n"+strings.Join(lines, "\n"))); err != nil {
		t.Fatalf("type the reply: %v", err)
	}
	waitForJS(t, frame, "the long reply typed, the composer focused, Send in view",
		`document.activeElement.id === "reply-text" && document.activeElement.value.includes("Line 40:") && `+inView(`[data-testid="send-reply"]`)+
			` && getComputedStyle(document.querySelector('[data-testid="action-bar"]')).position === "static"`,
		`document.activeElement.id + " " + JSON.stringify(document.querySelector('[data-testid="send-reply"]').getBoundingClientRect()) + " " + innerHeight`)
	checkOneScroll(t, frame, "a long reply typed")
	clickAsPerson(t, frame, `[data-testid="send-reply"]`)
	announced(t, frame, "Your reply is in the conversation", sidebar)
	onePrimary(t, frame, "replied in the frame", "Resolve")
	checkOneScroll(t, frame, "replied")
	checkA11y(t, frame, axe, "the sidebar after the reply")

	clickAsPerson(t, frame, `[data-testid="resolve"][data-primary]`)
	announced(t, frame, "You resolved the package", sidebar)
	if got := evalString(t, frame, `document.querySelector('[data-testid="status"]').textContent`); got != "resolved" {
		t.Errorf("after resolving in the frame the status reads %q", got)
	}

	// A package that is not there, and a page the agent may not open: framed pages with a way back.
	for _, c := range []struct{ path, title string }{{"/sidebar/ho_missing", "Not found"}, {"/approvals", "Not allowed"}} {
		if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.getElementById("desk").src = `+jsString(app.URL+c.path)+`, true`)); err != nil {
			t.Fatal(err)
		}
		waitAcrossLoad(t, frame, c.path+" as a framed page", `location.pathname === `+jsString(c.path)+
			` && document.querySelector('[data-testid="error"][data-framed]') && document.querySelector("h1").textContent === `+jsString(c.title),
			`location.pathname + " " + (document.body ? document.body.innerText : "")`)
		checkA11y(t, frame, axe, c.path+" in the frame")
	}
	clickAsPerson(t, frame, `[data-testid="error-back"]`)
	waitAcrossLoad(t, frame, "My work in the frame", `location.pathname === "/mine" && !!document.querySelector('[data-testid="mine-framed"]')`,
		`location.pathname`)
	checkA11y(t, frame, axe, "My work in the frame")
}
