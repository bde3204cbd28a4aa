package server_test

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/chromedp/chromedp"
)

// In Chromium, with no reload: the idle badge My work renders hidden for a quiet customer shows
// itself once they are idle; the customer's message drops it from the row; the agent's next reply
// brings it back in the package's status bar, which shows it in turn once due. axe-core finds
// nothing serious with the badge shown.
func TestBrowserCustomerIdleLive(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	d := newConversation(t)
	// The badge must be shown by the page's script, not by the server's render: the page is
	// loaded while the customer is not idle yet. On a machine too busy to load it within the
	// window after a reply, the agent replies again, which starts the window again.
	if _, err := d.DB.Exec(t.Context(), `UPDATE queues SET customer_idle = '8 seconds' WHERE name = 'billing_t2'`); err != nil {
		t.Fatal(err)
	}
	d.act(t, "accept", nil)
	badge := `document.querySelector('#mine-` + d.id + ` [data-testid="customer-idle"]')`
	ctx := browser(t)
	browserLogin(t, ctx, d.URL, "dana@example.com")
	for attempt := 1; ; attempt++ {
		d.act(t, "reply", url.Values{"text": {"It goes back to the card you paid with."}})
		if err := chromedp.Do(ctx,
			chromedp.Navigate(d.URL+"/mine"),
			chromedp.WaitReady(`body[data-live="online"]`),
			chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`),
		); err != nil {
			t.Fatalf("open /mine: %v", err)
		}
		hidden := evalString(t, ctx, `String(`+badge+`?.hidden)`)
		if hidden == "true" {
			break
		}
		if hidden != "false" || attempt == 5 {
			t.Fatalf("the quiet customer's badge at load (attempt %d): hidden %s, want rendered and hidden until due", attempt, hidden)
		}
	}
	waitForJS(t, ctx, "the badge shown once the customer is idle", `window.sameDocument && `+badge+`?.hidden === false`,
		`document.getElementById("cards").innerText`)
	checkA11y(t, ctx, axe, "My work with an idle customer")

	expect(t, "the customer answers", d.post(t, map[string]any{"message_id": "m1", "role": "user", "text": "Thanks, and when?"}),
		http.StatusCreated)
	waitForJS(t, ctx, "the badge gone with the customer's message", `window.sameDocument && !`+badge,
		`document.getElementById("cards").innerText`)

	header := `document.querySelector('#status-` + d.id + ` [data-testid="customer-idle"]')`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(d.URL+"/handoffs/"+d.id),
		chromedp.WaitReady(`body[data-live="online"]`),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`),
	); err != nil {
		t.Fatalf("open the package: %v", err)
	}
	if there := evalString(t, ctx, `String(!!`+header+`)`); there != "false" {
		t.Fatal("the package's status bar shows a customer who waits for the desk as quiet")
	}
	d.act(t, "reply", url.Values{"text": {"Within five days."}})
	waitForJS(t, ctx, "the status bar's badge, shown once the customer is idle after the reply", `window.sameDocument && `+header+`?.hidden === false`,
		`document.getElementById("status-`+d.id+`").innerText`)
}
