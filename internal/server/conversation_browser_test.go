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
// bot hands off on "refund"; the agent accepts in the desk and answers three times; each of the
// customer's three messages reaches the package's thread, each reply appears in the customer's
// page as it is sent, and the chat page, with every kind of line, is clean for axe-core.
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
	); err != nil {
		t.Fatalf("the agent accepts: %v", err)
	}
	waitForLine("notice", "dana from the support team joined")

	turns := []struct{ says, reply string }{
		{"Which card will the refund go to?", "It goes back to the Visa you paid with."},
		{"How long will it take?", "Three to five business days."},
		{"Great, thank you!", "You're welcome. Have a good day!"},
	}
	for i, turn := range turns {
		say(turn.says)
		waitFor(t, fmt.Sprintf("turn %d: the customer's words in the desk's thread", i+1), func() bool {
			ans := d.api(t, http.MethodGet, "/api/v1/handoffs/"+id+"/messages", d.key, nil)
			return ans.Status == http.StatusOK && strings.Contains(ans.Raw, jsString(turn.says))
		})
		if err := chromedp.Do(agentCtx,
			chromedp.Evaluate[chromedp.Void](`document.getElementById("reply-text").value = ""`),
			chromedp.SendKeys(`#reply-text`, turn.reply),
			chromedp.Click(`[data-testid="send-reply"]`),
			chromedp.WaitVisible(`[data-testid="reply-editor"]`),
		); err != nil {
			t.Fatalf("turn %d: the agent replies: %v", i+1, err)
		}
		waitForLine("agent", turn.reply)
	}

	// The thread holds the three turns in order, each reply answering the message before it.
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
	if shown != turns[0].reply+"\n"+turns[1].reply+"\n"+turns[2].reply {
		t.Errorf("the customer's page shows the replies:\n%s", shown)
	}
	checkA11y(t, customerCtx, axe, "the demo chat")
}
