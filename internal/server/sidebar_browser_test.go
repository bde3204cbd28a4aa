package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
)

// inFrame runs a JavaScript function in the document of the page's iframe #desk, with this bound
// to the element sel finds there, and tries again until it returns without throwing: the frame
// navigates after each action, so a node found may belong to a document still loading or already
// gone. The CRM's origin differs from the desk's, so the top page's scripts cannot reach into the
// frame, but the browser's tools can.
func inFrame[T any](t *testing.T, ctx context.Context, sel, fn string) T {
	t.Helper()
	wait, cancel := context.WithTimeout(ctx, waitDeadline)
	defer cancel()
	var out T
	var last error
	attempt := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		frames, err := chromedp.Nodes(`#desk`)(ctx, tg)
		if err != nil {
			return err
		}
		found, err := chromedp.Nodes(sel, chromedp.FromNode(frames[0]))(ctx, tg)
		if err != nil {
			return err
		}
		obj, err := cdp.Call(ctx, tg, dom.ResolveNode, dom.ResolveNodeParams{BackendNodeID: found[0].BackendNodeID})
		if err != nil {
			return err
		}
		out, err = chromedp.CallFunctionOn[T](fn, func(p *runtime.CallFunctionOnParams) { p.ObjectID = obj.Object.ObjectID })(ctx, tg)
		return err
	})
	for {
		if last = chromedp.Do(wait, attempt); last == nil {
			return out
		}
		select {
		case <-wait.Done():
			t.Fatalf("in the frame, once %s shows: %v", sel, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// layout380 is what the sidebar's layout looks like in its frame: the elements wider than their
// box, and where the action bar stands in the frame's viewport.
const layout380 = `function() {
	const doc = this.ownerDocument, win = doc.defaultView;
	if (doc.readyState !== "complete") throw new Error("still loading");
	if (win.left) throw new Error("still the page an action is leaving");
	const wide = [doc.body, ...doc.querySelectorAll("section, main, [data-testid=action-bar]")]
		.filter(el => el.scrollWidth > el.clientWidth)
		.map(el => (el.dataset.testid || el.tagName) + ":" + el.scrollWidth + ">" + el.clientWidth);
	const bar = doc.querySelector("[data-testid=action-bar]").getBoundingClientRect();
	const accept = doc.querySelector("[data-testid=accept]");
	return {width: win.innerWidth, height: win.innerHeight, wide, docWide: doc.documentElement.scrollWidth > doc.documentElement.clientWidth,
		barTop: bar.top, barBottom: bar.bottom, scrollY: win.scrollY,
		accept: accept ? accept.getBoundingClientRect().bottom : -1};
}`

type sidebarLayout struct {
	Width, Height              float64
	Wide                       []string
	DocWide                    bool
	BarTop, BarBottom, ScrollY float64
	Accept                     float64
}

// A CRM at 380 px frames the sidebar: nothing overflows sideways, the action bar shows without
// scrolling, and the agent accepts, edits the bot's draft and sends it from inside the frame.
func TestBrowserSidebarAt380InACRM(t *testing.T) {
	t.Parallel()
	var sidebar string
	crm := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = fmt.Fprintf(w, `<!doctype html><title>CRM</title><body style="margin:0"><iframe id="desk" src="%s" width="380" height="640" style="border:0"></iframe>`, sidebar)
	}))
	app := setup(t, "http://"+crm.Listener.Addr().String())
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	pkg := harbor(t, func(p map[string]any) {
		// What the bot tried, with a long result: the row that ran past the edge before.
		p["attempted_actions"] = []any{map[string]any{"tool": "billing.lookup_charges_for_customer_account", "result": "found two identical charges of $49.99 on 2026-06-01 from merchant HARBOR*SUBSCRIPTION-MONTHLY", "ok": true, "at": "2026-06-01T10:02:00Z"}}
	})
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	sidebar = app.URL + "/sidebar/" + id
	crm.Start()
	t.Cleanup(crm.Close)

	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")
	if err := chromedp.Do(ctx, chromedp.Navigate(crm.URL), chromedp.WaitReady(`#desk`)); err != nil {
		t.Fatal(err)
	}
	check := func(when, sel string) {
		t.Helper()
		l := inFrame[sidebarLayout](t, ctx, sel, layout380)
		if l.Width != 380 {
			t.Fatalf("%s: the frame is %v px wide, want 380", when, l.Width)
		}
		if len(l.Wide) > 0 || l.DocWide {
			t.Errorf("%s: wider than their box at 380 px: %v (document %v)", when, l.Wide, l.DocWide)
		}
		if l.ScrollY != 0 || l.BarTop < 0 || l.BarBottom > l.Height || l.BarTop >= l.Height {
			t.Errorf("%s: the action bar spans %v–%v of a %v px frame scrolled %v: not in view without scrolling", when, l.BarTop, l.BarBottom, l.Height, l.ScrollY)
		}
		if sel == `[data-testid="accept"]` && (l.Accept <= 0 || l.Accept > l.Height) {
			t.Errorf("%s: Accept ends at %v px, outside the %v px frame", when, l.Accept, l.Height)
		}
	}
	check("queued", `[data-testid="accept"]`)
	if got := inFrame[string](t, ctx, `[data-testid="attempted"]`, `function() { return this.innerText }`); !strings.Contains(got, "2026-06-01") {
		t.Errorf("what the bot tried reads %q, its time cut off", got)
	}

	click := func(sel string) {
		t.Helper()
		inFrame[bool](t, ctx, sel, `function() { this.ownerDocument.querySelector('`+sel+`').click(); return true }`)
	}
	// Each action's page is measured, not the one it leaves: a late navigation would otherwise
	// replace the page the test went on with, and the reply typed into it. The page is found by
	// its action bar, not its body: until Chromium knows the frame's document, a body found from
	// the frame is the CRM's.
	leave := func() {
		t.Helper()
		inFrame[bool](t, ctx, `[data-testid="action-bar"]`, `function() { this.ownerDocument.defaultView.left = true; return true }`)
	}
	leave()
	click(`[data-testid="accept"]`)
	check("accepted", `[data-testid="reply-editor"]`)

	final := "Hi Dana, the duplicate $49.99 charge is reversed today. Sorry for the trouble."
	inFrame[bool](t, ctx, `#reply-text`, `function() {
		const box = this.ownerDocument.getElementById("reply-text");
		box.focus();
		box.value = `+"`"+final+"`"+`;
		box.dispatchEvent(new Event("input", {bubbles: true}));
		this.ownerDocument.querySelector('[data-testid="tag-tone"]').click();
		return true }`)
	// The page being left still takes the reply's frame while the send is on its way.
	leave()
	click(`[data-testid="send-reply"]`)
	if got := inFrame[string](t, ctx, `[data-testid="reply-final"]`, `function() {
		if (this.ownerDocument.defaultView.left) throw new Error("still the page the send left");
		return this.textContent }`); !strings.Contains(got, "duplicate $49.99 charge is reversed today") {
		t.Errorf("the frame lists the reply %q", got)
	}
	check("replied", `[data-testid="reply-final"]`)
	var stored string
	var tags []string
	if err := app.DB.QueryRow(t.Context(), `SELECT final, tags FROM evals WHERE kind = 'reply'`).Scan(&stored, &tags); err != nil {
		t.Fatalf("no reply recorded from the frame: %v", err)
	}
	if !strings.HasSuffix(stored, "the duplicate $49.99 charge is reversed today. Sorry for the trouble.") || len(tags) != 1 || tags[0] != "tone" {
		t.Errorf("recorded %q with tags %v", stored, tags)
	}
}

// framedPost posts a form as a browser does from inside an iframe.
func framedPost(t *testing.T, c *http.Client, u string, form url.Values) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Dest", "iframe")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

// Actions taken inside the CRM's frame lead back to the sidebar, refusals included: the package
// page and the queue may not be framed, and would leave the agent an empty box.
func TestSidebarActionsStayInTheFrame(t *testing.T) {
	t.Parallel()
	app := setup(t, "http://crm.example")
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	dana := app.client(t)
	app.login(t, dana, "dana@example.com")
	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	base := app.URL + "/handoffs/" + id

	for _, step := range []struct {
		path   string
		form   url.Values
		status int
	}{
		{"/accept", nil, http.StatusSeeOther},
		{"/reply", url.Values{"text": {"Hello"}}, http.StatusSeeOther},
		{"/accept", nil, http.StatusConflict},
		{"/resolve", url.Values{"code": {"refunded"}}, http.StatusSeeOther},
	} {
		resp, body := framedPost(t, dana, base+step.path, step.form)
		if resp.StatusCode != step.status {
			t.Fatalf("%s from the frame: %d, want %d\n%.300s", step.path, resp.StatusCode, step.status, body)
		}
		if step.status == http.StatusSeeOther {
			if got := resp.Header.Get("Location"); got != "/sidebar/"+id {
				t.Errorf("%s from the frame leads to %q, want the sidebar", step.path, got)
			}
			continue
		}
		if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "frame-ancestors http://crm.example") ||
			!strings.Contains(body, `data-testid="action-bar"`) || !strings.Contains(body, `data-testid="flash"`) {
			t.Errorf("%s refused in the frame: want the sidebar with the refusal, framable by the CRM\n%.300s", step.path, body)
		}
	}
	// Outside a frame the same actions lead where they always did.
	if status, location, _ := postForm(t, dana, app.URL+"/handoffs/"+id+"/reply", url.Values{"text": {"x"}}); status != http.StatusConflict || location != "" {
		t.Errorf("a reply on a resolved package outside a frame: %d to %q, want 409 on the package page", status, location)
	}
}
