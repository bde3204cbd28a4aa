package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
)

// Alex's package page in Chromium says, live, that Bea is viewing when her page opens, passes
// axe-core so, and drops her name when she leaves; Bea's sidebar names Alex.
func TestBrowserShowsWhoElseIsViewing(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "alex@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	p := harborFor(t, "billing_t2").(map[string]any)
	expect(t, "submit", app.submit(t, key, p), http.StatusCreated)
	id := p["handoff_id"].(string)
	slot := `document.getElementById("viewing-` + id + `").textContent.trim()`

	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "alex@example.com")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(app.URL+"/handoffs/"+id),
		chromedp.WaitReady(`body[data-live="online"]`),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`),
	); err != nil {
		t.Fatalf("open the package: %v", err)
	}
	bc := app.client(t)
	app.login(t, bc, "bea@example.com")
	bea, _ := app.dialed(t, bc, "handoff="+id)
	waitForJS(t, ctx, "Alex's page to say Bea is viewing", slot+` === "bea is viewing"`, slot)
	if same, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`window.sameDocument === true`)); err != nil || !same {
		t.Fatal("the page reloaded; who is viewing must arrive over the socket")
	}
	checkA11y(t, ctx, axeSource(t), "package page with another viewer")
	if _, sidebar := get(t, bc, app.URL+"/sidebar/"+id); !strings.Contains(sidebar, "alex is viewing") {
		t.Fatalf("Bea's sidebar does not say Alex is viewing:\n%.3000s", sidebar)
	}

	_ = bea.Close()
	waitForJS(t, ctx, "Bea to leave Alex's page", slot+` === ""`, slot)
}
