package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/dom"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/server"
)

// clickInFrame clicks the element sel finds in the document of the page's iframe #desk, as a
// person's click: the browser lets only those open a popup.
func clickInFrame(t *testing.T, ctx context.Context, sel string) {
	t.Helper()
	wait, cancel := context.WithTimeout(ctx, waitDeadline)
	defer cancel()
	var last error
	for {
		last = chromedp.Do(wait, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
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
			_, err = chromedp.CallFunctionOn[bool](`function() { this.click(); return true }`, func(p *runtime.CallFunctionOnParams) {
				p.ObjectID = obj.Object.ObjectID
				gesture := true
				p.UserGesture = &gesture
			})(ctx, tg)
			return err
		}))
		if last == nil {
			return
		}
		select {
		case <-wait.Done():
			t.Fatalf("click %s in the frame: %v", sel, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Inside a CRM's iframe, "Sign in with SSO" opens the identity provider in a popup (providers
// refuse to be framed). The popup hands its ticket back to the sidebar, on the desk's origin
// only, and closes; the sidebar trades it for a session of its own and shows the package. The
// provider is the certified one (zitadel/oidc's op), whose sign-in passes through its own login
// and callback pages inside the popup.
func TestBrowserSSOFromTheSidebarOpensAPopup(t *testing.T) {
	t.Parallel()
	idp := newCertifiedProvider(t)
	var sidebar string
	crm := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = fmt.Fprintf(w, `<!doctype html><title>CRM</title><body style="margin:0"><iframe id="desk" src="%s" width="380" height="640" style="border:0"></iframe>`, sidebar)
	}))
	app := setupWith(t, server.Config{OIDC: idp.config(), FrameAncestors: []string{"http://" + crm.Listener.Addr().String()}})
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	pkg := harbor(t, nil)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	sidebar = app.URL + "/sidebar/" + pkg["handoff_id"].(string)
	crm.Start()
	t.Cleanup(crm.Close)

	// Its popup is looked for among the browser's new targets: no other test's may be there.
	ctx := ownBrowser(t)
	if err := chromedp.Do(ctx, chromedp.Navigate(crm.URL), chromedp.WaitReady(`#desk`)); err != nil {
		t.Fatal(err)
	}
	// Not logged in, the frame shows the login page, which offers single sign-on.
	if got := inFrame[string](t, ctx, `[data-testid="sso-start"]`, `function() { return this.textContent }`); got != "Sign in with SSO" {
		t.Fatalf("the framed login page offers %q", got)
	}
	popups := chromedp.WaitNewTarget(ctx, func(info *target.Info) bool { return info.Type == "page" })
	idp.person("dana@example.com", true)
	clickInFrame(t, ctx, `[data-testid="sso-start"]`)
	select {
	case id := <-popups:
		if id == "" {
			t.Fatal("no popup")
		}
	case <-time.After(waitDeadline):
		t.Fatal("the click opened no popup")
	}

	if got := inFrame[string](t, ctx, `[data-testid="accept"]`, `function() { return this.textContent.trim() }`); got == "" {
		t.Error("the sidebar shows no Accept after signing in through the popup")
	}
	if asked := len(idp.authorizations()); asked != 1 {
		t.Errorf("the provider was asked %d times, want once, by the popup", asked)
	}
	// The popup made no session of its own: the frame's came from trading the ticket.
	var sessions int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM sessions`).Scan(&sessions); err != nil || sessions != 1 {
		t.Errorf("%d sessions (%v), want the frame's one only", sessions, err)
	}
}

// At the top level, "Sign in with SSO" is a plain link: the browser goes to the provider and
// comes back logged in, to the page it first asked for.
func TestBrowserSSOAtTheTopLevel(t *testing.T) {
	t.Parallel()
	idp := newIdentityProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config()})
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")

	ctx := browser(t)
	idp.person("dana@example.com", true)
	if err := chromedp.Do(ctx,
		chromedp.Navigate(app.URL+"/queues/billing_t2"),
		chromedp.WaitVisible(`[data-testid="sso-start"]`),
		chromedp.Click(`[data-testid="sso-start"]`),
		chromedp.WaitVisible(`[data-testid="viewer"]`),
	); err != nil {
		t.Fatal(err)
	}
	at, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[location.pathname, document.querySelector('[data-testid="viewer"]').innerText]`))
	if err != nil {
		t.Fatal(err)
	}
	path, viewer := at[0], at[1]
	if path != "/queues/billing_t2" || !strings.HasPrefix(viewer, "dana") {
		t.Errorf("after single sign-on the browser is at %s as %q, want /queues/billing_t2 as dana", path, viewer)
	}
}
