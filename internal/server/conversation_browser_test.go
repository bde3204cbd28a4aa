package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/conversation"
)

// The whole loop in Chromium, in two browser contexts: the customer types in the demo chat, whose
// bot hands off on "refund"; the agent accepts in the desk and answers three times on the package
// page, then once more in the 380 px sidebar. Each of the customer's messages appears live in the
// agent's thread with the bot's draft for it offered, each reply turns delivered on the agent's
// page and appears in the customer's, and the desk's page, the sidebar and the chat page, with
// every kind of line, are clean for axe-core.
func TestBrowserConversation(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	d := newDemoLoop(t)
	agentCtx := browser(t)
	customerCtx, closeCustomer := chromedp.NewContext(agentCtx, chromedp.WithNewBrowserContext())
	defer closeCustomer()

	if err := chromedp.Do(customerCtx,
		chromedp.Navigate(d.chatURL),
		chromedp.WaitReady(`body[data-live="true"]`),
	); err != nil {
		t.Fatalf("open the demo chat: %v", err)
	}
	say := func(text string) {
		t.Helper()
		if err := chromedp.Do(customerCtx,
			chromedp.SendKeys(`#text`, text),
			chromedp.Click(`#say button[type="submit"]`),
		); err != nil {
			t.Fatalf("the customer says %q: %v", text, err)
		}
	}
	// waitForLine waits for the customer's page to show a line of who with exactly text.
	waitForLine := func(who, text string) {
		t.Helper()
		waitForJS(t, customerCtx, who+" line "+text, fmt.Sprintf(`[...document.querySelectorAll('#lines li[data-who=%q] p')].some(p => p.textContent.includes(%s))`,
			who, jsString(text)), `document.getElementById("lines").innerText`)
	}
	say("Hello")
	waitForLine("bot", "I'm the demo bot")
	say("I want a refund for my order")
	waitForLine("bot", "passing you to a person")

	var id string
	if err := d.DB.QueryRow(t.Context(), `SELECT handoff_id FROM handoffs WHERE source_agent = 'demo-bot'`).Scan(&id); err != nil {
		t.Fatalf("the bot's package is not in the desk: %v", err)
	}
	browserLogin(t, agentCtx, d.URL, "dana@example.com")
	if err := chromedp.Do(agentCtx,
		chromedp.Navigate(d.URL+"/handoffs/"+id),
		chromedp.Click(`[data-testid="accept"]`),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
		chromedp.WaitReady(`body[data-live="online"]`),
	); err != nil {
		t.Fatalf("the agent accepts: %v", err)
	}
	waitForLine("notice", "dana from the support team joined")

	// Each turn: the customer's words arrive live in the agent's thread, with the demo bot's draft
	// for them offered (internal/demochat's drafts), and the agent's reply reaches the bot, which
	// the reply's delivery line says, and the customer's page.
	turns := []struct{ says, draft, reply string }{
		{"Which card will the refund go to?", "The refund goes back to the card you paid with.", "It goes back to the Visa you paid with."},
		{"How long will it take?", "Refunds show on your statement within 3 to 5 business days.", "Three to five business days."},
		{"Great, thank you!", "You're welcome! Is there anything else I can do for you?", "You're welcome. Have a good day!"},
		// The last turn is the 380 px sidebar's.
		{"Do you need my order number?", "Thank you, I've found the order and I'm looking at it now.", "No need, I have it here."},
	}
	list := "#thread-messages-" + id
	play := func(i int) {
		t.Helper()
		turn := turns[i]
		say(turn.says)
		waitForJS(t, agentCtx, fmt.Sprintf("turn %d: the customer's words in the agent's thread", i+1),
			fmt.Sprintf(`[...document.querySelectorAll(%q)].some(e => e.textContent === %s)`, list+" [data-role=user] [data-testid=message-text]", jsString(turn.says)),
			fmt.Sprintf(`document.querySelector(%q).textContent`, list))
		waitForJS(t, agentCtx, fmt.Sprintf("turn %d: the bot's draft offered", i+1),
			fmt.Sprintf(`(() => { const o = document.querySelector("[data-testid=draft-offer]"); return o && !o.hasAttribute("data-stale") && o.dataset.draftOffer === %s })()`, jsString(turn.draft)),
			`(document.querySelector("[data-testid=draft-offer-slot]") || document.body).outerHTML.slice(0, 2000)`)
		if err := chromedp.Do(agentCtx,
			chromedp.Evaluate[chromedp.Void](`window.beforeSend = true; document.getElementById("reply-text").value = ""`),
			chromedp.SendKeys(`#reply-text`, turn.reply),
			chromedp.Click(`[data-testid="send-reply"]`),
		); err != nil {
			t.Fatalf("turn %d: the agent replies: %v", i+1, err)
		}
		// The send loads the page anew: until the new one is live, the old one, or none, is there.
		waitFor(t, fmt.Sprintf("turn %d: the page the send leads to, live", i+1), func() bool {
			ok, err := chromedp.Run(agentCtx, chromedp.Evaluate[bool](`window.beforeSend !== true && document.readyState === "complete" &&
				document.body.dataset.live === "online" && !!document.querySelector("[data-testid=reply-editor]")`))
			return err == nil && ok
		})
		waitForLine("agent", turn.reply)
		// The reply sent is the last agent message on the page the send leads to, and its line
		// turns delivered as the bot takes it.
		waitForJS(t, agentCtx, fmt.Sprintf("turn %d: the reply delivered to the bot", i+1),
			fmt.Sprintf(`(() => { const rs = document.querySelectorAll(%q); const r = rs[rs.length - 1];
				const text = r && r.querySelector("[data-testid=reply-final]"), s = r && r.querySelector("[data-testid=delivery]");
				return rs.length === %d && !!text && text.textContent === %s && !!s && s.dataset.state === "delivered" &&
					s.textContent.startsWith("Sent to the customer: the bot took it at") })()`, list+" [data-testid=message][data-role=agent]", i+1, jsString(turn.reply)),
			fmt.Sprintf(`document.querySelector(%q).outerHTML.slice(-2000)`, list))
	}
	for i := range 3 {
		play(i)
	}
	checkA11y(t, agentCtx, axe, "the desk's package with the conversation")

	// The same conversation in the 380 px sidebar: one more turn there, nothing past its edge.
	if err := chromedp.Do(agentCtx,
		chromedp.EmulateViewport(380, 700),
		chromedp.Navigate(d.URL+"/sidebar/"+id),
		chromedp.WaitVisible(`[data-testid="thread"]`),
		chromedp.WaitReady(`body[data-live="online"]`),
	); err != nil {
		t.Fatalf("open the sidebar: %v", err)
	}
	// The send leads to the package page; the sidebar shows the reply's delivery as well.
	play(3)
	if err := chromedp.Do(agentCtx,
		chromedp.Navigate(d.URL+"/sidebar/"+id),
		chromedp.WaitVisible(`[data-testid="thread"]`),
	); err != nil {
		t.Fatalf("open the sidebar again: %v", err)
	}
	if got := evalString(t, agentCtx, `[...document.querySelectorAll("`+list+` [data-testid=message][data-role=agent] [data-testid=delivery]")].map(s => s.dataset.state).join(",")`); got != "delivered,delivered,delivered,delivered" {
		t.Errorf("the sidebar shows the replies' delivery as %s", got)
	}
	if got := evalString(t, agentCtx, `String(document.documentElement.scrollWidth)`); got != "380" {
		t.Errorf("the sidebar is %s px wide at 380", got)
	}
	checkA11y(t, agentCtx, axe, "the sidebar with the conversation")

	// The thread holds the four turns in order, each reply answering the message before it.
	ans := d.api(t, http.MethodGet, "/api/v1/handoffs/"+id+"/messages", d.key, nil)
	var thread struct{ Messages []conversation.Message }
	if err := json.Unmarshal([]byte(ans.Raw), &thread); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range thread.Messages {
		got = append(got, string(m.Role)+": "+m.Text)
		if m.Role == conversation.Agent && (m.InReplyTo == nil || *m.InReplyTo != m.Seq-1) {
			t.Errorf("reply %d answers %v, want the customer's message %d", m.Seq, m.InReplyTo, m.Seq-1)
		}
	}
	var want []string
	for _, turn := range turns {
		want = append(want, "user: "+turn.says, "agent: "+turn.reply)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the desk's thread:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// The agent's replies are in the customer's page in the order they were sent.
	shown := evalString(t, customerCtx, `[...document.querySelectorAll('#lines li[data-who="agent"] p')].map(p => p.textContent).join("\n")`)
	if shown != turns[0].reply+"\n"+turns[1].reply+"\n"+turns[2].reply+"\n"+turns[3].reply {
		t.Errorf("the customer's page shows the replies:\n%s", shown)
	}
	checkA11y(t, customerCtx, axe, "the demo chat")
}
