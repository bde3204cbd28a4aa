package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
)

// holdAndType has the browser's agent accept package id on its page and type text into the
// composer, with the socket live.
func holdAndType(t *testing.T, ctx context.Context, base, id, typed string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/handoffs/"+id),
		chromedp.Click(`[data-testid="accept"]`),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
		chromedp.WaitVisible(`[data-testid="notice"]`),
		chromedp.WaitReady(`body[data-live="online"]`),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#reply-text").value = ""`),
		chromedp.SendKeys(`#reply-text`, typed),
	); err != nil {
		t.Fatalf("accept %s and type: %v", id, err)
	}
}

// keptText waits for the page to say it lost the package, and returns what it says and the text
// it kept.
func keptText(t *testing.T, ctx context.Context) (why, kept string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`[data-testid="kept-text"]`)); err != nil {
		t.Fatalf("the page never said it lost the package: %v", err)
	}
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector('[data-testid="kept-text"]').value`))
	if err != nil {
		t.Fatal(err)
	}
	return text(t, ctx, `[data-testid="kept-why"]`), kept
}

// TestBrowserLostPackageKeepsTypedText: the agent is writing the reply when a supervisor reassigns
// the package, or the bot cancels it. The open page says so at once, without a reload: the
// composer and the "it is yours now" notice go, and what they typed stays, to copy. A send the
// desk refuses keeps the text too. The sidebar a CRM frames does the same.
func TestBrowserLostPackageKeepsTypedText(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "alex@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	sam := app.client(t)
	app.login(t, sam, "sam@example.com")
	submit := func() string {
		p := harbor(t, func(p map[string]any) {
			p["transfer_mode"] = "cold"
			p["contact"].(map[string]any)["id"] = "cust_" + p["handoff_id"].(string)
		})
		expect(t, "submit", app.submit(t, key, p), http.StatusCreated)
		return p["handoff_id"].(string)
	}
	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")

	reassigned := submit()
	const typed = "Hello, I have refunded the duplicate charge of 49.99."
	holdAndType(t, ctx, app.URL, reassigned, typed)
	if status, _, body := postForm(t, sam, app.URL+"/handoffs/"+reassigned+"/reassign", url.Values{"to": {"alex@example.com"}}); status != http.StatusSeeOther {
		t.Fatalf("reassign: %d\n%.500s", status, body)
	}
	why, kept := keptText(t, ctx)
	if kept != typed || !strings.Contains(why, "alex holds it now") {
		t.Errorf("after the reassign the page says %q and keeps %q, want alex named and %q", why, kept, typed)
	}
	gone, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.querySelector("[data-reply-form]") && !document.querySelector("[data-testid=notice]") && window.sameDocument === true`))
	if err != nil || !gone {
		t.Errorf("the composer or the notice that the package is theirs is still on the page, or it reloaded (%v)", err)
	}
	if got := text(t, ctx, `#announcer`); got != why {
		t.Errorf("the announcer says %q, want %q", got, why)
	}

	canceled := submit()
	holdAndType(t, ctx, app.URL, canceled, typed)
	expect(t, "cancel", app.api(t, http.MethodPost, "/api/v1/handoffs/"+canceled+"/cancel", key, nil), http.StatusOK)
	if why, kept := keptText(t, ctx); kept != typed || !strings.Contains(why, "canceled") {
		t.Errorf("after the bot's cancel the page says %q and keeps %q", why, kept)
	}

	// The sidebar a CRM frames holds the same reply slot, and says so at once too.
	dana := app.client(t)
	app.login(t, dana, "dana@example.com")
	framed := submit()
	if status, _, body := postForm(t, dana, app.URL+"/handoffs/"+framed+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d %.300s", status, body)
	}
	if err := chromedp.Do(ctx,
		chromedp.Navigate(app.URL+"/sidebar/"+framed),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
		chromedp.WaitReady(`body[data-live="online"]`),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`),
		chromedp.Evaluate[chromedp.Void](`document.querySelector("#reply-text").value = ""`),
		chromedp.SendKeys(`#reply-text`, typed),
	); err != nil {
		t.Fatalf("the sidebar of %s: %v", framed, err)
	}
	if status, _, body := postForm(t, sam, app.URL+"/handoffs/"+framed+"/reassign", url.Values{"to": {"alex@example.com"}}); status != http.StatusSeeOther {
		t.Fatalf("reassign: %d\n%.500s", status, body)
	}
	if why, kept := keptText(t, ctx); kept != typed || !strings.Contains(why, "alex holds it now") {
		t.Errorf("after the reassign the sidebar says %q and keeps %q, want alex named and %q", why, kept, typed)
	}
	if same, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`!document.querySelector("[data-reply-form]") && window.sameDocument === true`)); err != nil || !same {
		t.Errorf("the sidebar's composer is still there, or the sidebar reloaded (%v)", err)
	}

	// The send itself, refused: the answer keeps the text beside why.
	refused := submit()
	if status, _, body := postForm(t, dana, app.URL+"/handoffs/"+refused+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d %.300s", status, body)
	}
	if status, _, body := postForm(t, sam, app.URL+"/handoffs/"+refused+"/reassign", url.Values{"to": {"alex@example.com"}}); status != http.StatusSeeOther {
		t.Fatalf("reassign: %d %.300s", status, body)
	}
	status, _, body := postForm(t, dana, app.URL+"/handoffs/"+refused+"/reply", url.Values{"text": {typed}})
	if status < 400 || !strings.Contains(body, `data-testid="kept-text">`+typed+`</textarea>`) || !strings.Contains(body, "alex holds it now") {
		t.Errorf("a refused send answers %d without the text kept:\n%.3000s", status, body)
	}
}

// TestBrowserFailedSendKeepsTypedText: a send that fails before the desk answers with the
// package's page (an error page: a server error, a refused request, a session that ran out) loses
// nothing: the package's next page puts what the agent typed back in the composer and says so.
// Once the reply is in the thread, it is not put back.
func TestBrowserFailedSendKeepsTypedText(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	p := harbor(t, func(p map[string]any) { p["transfer_mode"] = "cold" })
	expect(t, "submit", app.submit(t, key, p), http.StatusCreated)
	id := p["handoff_id"].(string)
	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")
	const typed = "Hello, I have refunded the duplicate charge of 49.99."
	holdAndType(t, ctx, app.URL, id, typed)
	// The send reaches a page that is not the desk's answer to it: an error page, text gone.
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.querySelector("[data-reply-form]").action = "/handoffs/`+id+`/nowhere"`),
		chromedp.Click(`[data-testid="send-reply"]`),
		chromedp.WaitNotPresent(`[data-reply-form]`),
		chromedp.Navigate(app.URL+"/handoffs/"+id),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
	); err != nil {
		t.Fatalf("a failed send, then the package's page: %v", err)
	}
	waitForJS(t, ctx, "the typed text back in the composer", `document.getElementById("reply-text").value === `+jsString(typed)+
		` && document.getElementById("reply-status").textContent.startsWith("Your last reply was not sent")`,
		`document.getElementById("reply-text").value + "|" + document.getElementById("reply-status").textContent`)

	if err := chromedp.Do(ctx,
		chromedp.Click(`[data-testid="send-reply"]`),
		chromedp.WaitVisible(`[data-testid="reply-final"]`),
		chromedp.Navigate(app.URL+"/handoffs/"+id),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
	); err != nil {
		t.Fatalf("send, then the package's page again: %v", err)
	}
	if got := evalString(t, ctx, `document.getElementById("reply-text").value + "|" + document.getElementById("reply-status").textContent`); got != "|" {
		t.Errorf("after the reply is in the thread the composer|status read %q, want both empty", got)
	}
}
