package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// pressEnter presses Enter as a keyboard does: one keydown carrying the text it would type, which
// a handler that prevents it keeps out of the field.
func pressEnter() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, p := range []input.DispatchKeyEventParams{
			{Type: input.DispatchKeyEventTypeKeyDown, Key: "Enter", Code: "Enter", Text: "\r", WindowsVirtualKeyCode: 13},
			{Type: input.DispatchKeyEventTypeKeyUp, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13},
		} {
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, p); err != nil {
				return err
			}
		}
		return nil
	})
}

// The agent works a conversation in Chromium, the package open while the bot relays the
// customer's messages through the API: they appear live, in order, said in the thread's polite
// live region, while the composer keeps its place, its focus and what the agent typed; the
// turn's draft is offered and used only when the agent chooses; the reply shows its delivery to
// the bot; a draft answered since is marked stale. axe-core finds nothing serious on the page.
func TestBrowserConversationLive(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	axe := axeSource(t)
	var savedID string
	if err := d.DB.QueryRow(t.Context(), `INSERT INTO saved_replies (queue_id, title, body)
		SELECT id, 'Refund timeline', 'Hi ⟦first name⟧, the refund reaches your card within 5 days.' FROM queues WHERE name = 'billing_t2'
		RETURNING id::text`).Scan(&savedID); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	browserLogin(t, ctx, d.URL, "dana@example.com")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(d.URL+"/handoffs/"+d.id),
		chromedp.Click(`[data-testid="accept"]`),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
		chromedp.WaitReady(`body[data-live="online"]`),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true; document.getElementById("reply-text").value = ""`),
		chromedp.Focus(`#reply-text`),
		insertText("Typed by me, not sent yet"),
	); err != nil {
		t.Fatalf("accept and type: %v", err)
	}
	top := evalString(t, ctx, `String(Math.round(document.querySelector("[data-reply-form]").getBoundingClientRect().top))`)

	for _, m := range []map[string]any{
		{"message_id": "c1", "role": "user", "text": "First: which card?", "draft_reply": "The Visa ending in 4417."},
		{"message_id": "c2", "role": "user", "text": "Second: and when?", "draft_reply": "It is back within 5 days, on the Visa ending in 4417.",
			"attachments": []map[string]any{{"url": "https://files.example.com/statement.pdf", "name": "statement.pdf", "size": 5000}}},
	} {
		expect(t, "the bot relays "+m["message_id"].(string), d.post(t, m), http.StatusCreated)
	}
	waitForJS(t, ctx, "both messages, in order", `[...document.querySelectorAll("#thread-messages-`+d.id+` [data-testid=message-text]")].map(e => e.textContent).join("|") === "First: which card?|Second: and when?"`,
		`document.getElementById("thread-messages-`+d.id+`").textContent`)
	if got := evalString(t, ctx, `[window.sameDocument, document.activeElement.id, document.getElementById("reply-text").value].join("|")`); got != "true|reply-text|Typed by me, not sent yet" {
		t.Errorf("the messages moved the agent's typing: %q", got)
	}
	if got := evalString(t, ctx, `String(Math.round(document.querySelector("[data-reply-form]").getBoundingClientRect().top))`); got != top {
		t.Errorf("the composer moved on the screen from %s to %s", top, got)
	}
	waitForJS(t, ctx, "the live region saying the last message", `document.getElementById("thread-announce-`+d.id+`").textContent === "Customer wrote: Second: and when?"`,
		`document.getElementById("thread-announce-`+d.id+`").textContent`)
	if got := evalString(t, ctx, `document.querySelector("[data-testid=attachment]").getAttribute("href") + " " + document.querySelector("[data-testid=attachments]").textContent.replace(/\s+/g, " ").trim()`); got != "https://files.example.com/statement.pdf statement.pdf (4.9 KB)" {
		t.Errorf("the attachment shows as %q", got)
	}
	waitForJS(t, ctx, "the second turn's draft offered", `(() => { const o = document.querySelector("[data-testid=draft-offer]");
		return o && !o.hasAttribute("data-stale") && o.dataset.draftOffer === "It is back within 5 days, on the Visa ending in 4417." })()`,
		`document.getElementById("draft-offer-`+d.id+`").outerHTML`)
	checkA11y(t, ctx, axe, "the package with the conversation")

	if err := chromedp.Do(ctx, chromedp.Click(`[data-testid="use-draft"]`)); err != nil {
		t.Fatal(err)
	}
	if got := evalString(t, ctx, `document.getElementById("reply-text").value`); got != "It is back within 5 days, on the Visa ending in 4417." {
		t.Fatalf("use it put %q in the composer", got)
	}
	if err := chromedp.Do(ctx,
		chromedp.Click(`[data-testid="send-reply"]`),
		chromedp.WaitVisible(`[data-testid="reply-final"]`),
		chromedp.WaitReady(`body[data-live="online"]`),
	); err != nil {
		t.Fatalf("send: %v", err)
	}
	waitForJS(t, ctx, "the reply delivered to the bot", `(() => { const s = document.querySelector("[data-role=agent] [data-testid=delivery]");
		return s && s.dataset.state === "delivered" && s.textContent.startsWith("Sent to the customer: the bot took it at") })()`,
		`document.querySelector("[data-role=agent]").outerHTML`)
	// The page's announcer says what the send did once the page loads, not the thread it shows.
	waitForJS(t, ctx, "the notice of the send", `document.getElementById("announcer").textContent.startsWith("Your reply is in the conversation")`,
		`document.getElementById("announcer").textContent`)
	if got := evalString(t, ctx, `document.getElementById("announcer").textContent`); strings.Contains(got, "wrote:") {
		t.Errorf("the page announces the thread as it loads: %q", got)
	}
	if got := evalString(t, ctx, `document.querySelector("[data-testid=draft-offer]").hasAttribute("data-stale") + " " + document.querySelector("[data-testid=draft-offer]").textContent.includes("stale")`); got != "true true" {
		t.Errorf("the answered turn's draft is not marked stale: %q", got)
	}

	// A saved reply, by keyboard: / opens the queue's list, typing narrows it, Enter inserts it.
	if err := chromedp.Do(ctx, chromedp.Focus(`#reply-text`), insertText("/"), insertText("ref")); err != nil {
		t.Fatal(err)
	}
	if got := evalString(t, ctx, `document.getElementById("reply-text").getAttribute("aria-activedescendant") + " " + document.getElementById("saved-replies").checkVisibility()`); got != "saved-"+savedID+" true" {
		t.Errorf("after / the composer's list shows %q", got)
	}
	if err := chromedp.Do(ctx, pressEnter()); err != nil {
		t.Fatal(err)
	}
	if got := evalString(t, ctx, `document.getElementById("reply-text").value + "|" + document.querySelector("[data-saved-reply]").value + "|" + document.getElementById("saved-replies").checkVisibility()`); got != "Hi ⟦first name⟧, the refund reaches your card within 5 days.|"+savedID+"|false" {
		t.Errorf("Enter left the composer as %q", got)
	}

	expect(t, "the customer's third message", d.post(t, map[string]any{"message_id": "c3", "role": "user", "text": "Third: thanks!"}), http.StatusCreated)
	waitForJS(t, ctx, "the third message after the reply", `[...document.querySelectorAll("#thread-messages-`+d.id+` [data-testid=message]")].map(e => e.dataset.role).join(",") === "user,user,agent,user"`,
		`document.getElementById("thread-messages-`+d.id+`").textContent`)
	checkA11y(t, ctx, axe, "the package after the reply")

	// The 380 px sidebar shows the same conversation, and the next message arrives there live.
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(380, 700),
		chromedp.Navigate(d.URL+"/sidebar/"+d.id),
		chromedp.WaitVisible(`[data-testid="thread"]`),
		chromedp.WaitReady(`body[data-live="online"]`),
	); err != nil {
		t.Fatalf("open the sidebar: %v", err)
	}
	expect(t, "the customer's fourth message", d.post(t, map[string]any{"message_id": "c4", "role": "user",
		"text": "Fourth: one more thing, a long line to see that nothing runs past the sidebar's edge at all"}), http.StatusCreated)
	waitForJS(t, ctx, "the fourth message in the sidebar", `document.querySelectorAll("#thread-messages-`+d.id+` [data-testid=message]").length === 5`,
		`document.getElementById("thread-messages-`+d.id+`").textContent`)
	if got := evalString(t, ctx, `String(document.documentElement.scrollWidth)`); got != "380" {
		t.Errorf("the sidebar is %s px wide at 380", got)
	}
	checkA11y(t, ctx, axe, "the sidebar with the conversation")
}
