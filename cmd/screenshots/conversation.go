package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// The customer's side of the conversation, as typed in the demo chat: the first hands off (it
// asks for a refund), the others reach the agent's page with the bot's draft of the answer.
var (
	customerBefore = []string{
		"Hi, I was charged twice this month. I'd like a refund for the second charge.",
		"The order number is 4411, on the Pro plan.",
		"Both charges are on the card ending 4242.",
	}
	agentReply    = "Hi, I'm sorry about the double charge. I can see both payments for order 4411, and I've refunded the second one."
	customerAfter = "Thank you! How long until it shows on my statement?"
)

// photographConversation plays a conversation after the handoff through the demo chat at chat
// and the desk at base, as `make run`'s newcomer does: the customer writes in the chat and its bot
// hands off and relays (the public bot API), Alex accepts and replies on the package page, the
// customer writes again. It photographs the package page's conversation and the customer's chat.
func photographConversation(ctx context.Context, base, chat, out string) ([]string, error) {
	customer, closeCustomer := newBrowser(ctx)
	defer closeCustomer()
	agent, closeAgent := newBrowser(ctx)
	defer closeAgent()

	if err := chromedp.Do(customer, chromedp.EmulateViewport(760, 880), chromedp.Navigate(chat+"/")); err != nil {
		return nil, err
	}
	if err := until(customer, "the chat, live", `document.body.dataset.live === "true"`); err != nil {
		return nil, err
	}
	if err := say(customer, customerBefore[0], `bot`, "passing you to a person"); err != nil {
		return nil, err
	}
	cookies, err := chromedp.Call(customer, network.GetCookies, network.GetCookiesParams{URLs: []string{chat}})
	if err != nil {
		return nil, err
	}
	var chatID string
	for _, c := range cookies.Cookies {
		if c.Name == "demo_chat" {
			chatID = c.Value
		}
	}
	if chatID == "" {
		return nil, fmt.Errorf("the chat at %s set no demo_chat cookie", chat)
	}
	handoffID := "demo_" + chatID + "_1" // the chat's first package (demochat.packageFor)
	for _, text := range customerBefore[1:] {
		if err := say(customer, text, "customer", text); err != nil {
			return nil, err
		}
	}

	// Alex accepts the package once the bot has relayed the customer's messages, and replies.
	page := base + "/handoffs/" + handoffID
	if err := chromedp.Do(agent, chromedp.EmulateViewport(1440, 900),
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(`[data-testid="login-form"]`),
		chromedp.SendKeys(`input[name="email"]`, "agent@example.com"),
		chromedp.SendKeys(`input[name="password"]`, demoPassword),
		chromedp.Submit(`[data-testid="login-form"]`),
		chromedp.WaitVisible(`[data-testid="my-queues"]`),
		chromedp.Navigate(page)); err != nil {
		return nil, err
	}
	if err := until(agent, "the customer's messages in the thread", fmt.Sprintf(
		`document.querySelectorAll('[data-testid="message"][data-role="user"]').length === %d`, len(customerBefore)-1)); err != nil {
		return nil, err
	}
	if err := chromedp.Do(agent, chromedp.Click(`[data-testid="accept"]`)); err != nil {
		return nil, err
	}
	if err := until(agent, "the package accepted, its reply editor live", `location.pathname === `+quote("/handoffs/"+handoffID)+
		` && !!document.querySelector('[data-testid="send-reply"]') && document.body.dataset.live === "online"`); err != nil {
		return nil, err
	}
	if err := until(customer, "the agent joined, in the chat", lineSays("notice", "joined")); err != nil {
		return nil, err
	}
	// The agent writes their own reply over the package's draft, as a person types it.
	if err := until(agent, "the reply written", `(() => { const f = document.querySelector("#reply-text"); f.focus(); f.select();
		return document.execCommand("insertText", false, `+quote(agentReply)+`) })()`); err != nil {
		return nil, err
	}
	if err := chromedp.Do(agent, chromedp.Click(`[data-testid="send-reply"]`)); err != nil {
		return nil, err
	}
	if err := until(customer, "the agent's reply, in the chat", lineSays("agent", "refunded the second one")); err != nil {
		return nil, err
	}
	if err := say(customer, customerAfter, "customer", customerAfter); err != nil {
		return nil, err
	}
	if err := until(agent, "the reply delivered, the customer's question and its draft, live", `
		!!document.querySelector('[data-testid="delivery"][data-state="delivered"]') &&
		document.querySelectorAll('[data-testid="message"][data-role="user"]').length === `+fmt.Sprint(len(customerBefore))+` &&
		(document.querySelector('[data-testid="draft-offer"]:not([data-stale])') || {}).textContent.includes("statement")`); err != nil {
		return nil, err
	}

	var taken []string
	// The conversation panel, from the package's top: the thread and, beside it, the draft offered.
	pkg, err := shoot(agent, `[data-testid="thread"]`)
	if err != nil {
		return nil, err
	}
	chatPNG, err := shoot(customer, "")
	if err != nil {
		return nil, err
	}
	for _, p := range []struct {
		file, what string
		png        []byte
	}{{"conversation.png", "the package page's conversation, as agent@example.com", pkg}, {"conversation-chat.png", "the demo chat, as the customer", chatPNG}} {
		if err := os.WriteFile(filepath.Join(out, p.file), p.png, 0o644); err != nil { //nolint:gosec // G306: a picture for the docs, readable by all.
			return nil, err
		}
		taken = append(taken, fmt.Sprintf("%s: %s, %d bytes", filepath.Join(out, p.file), p.what, len(p.png)))
	}
	return taken, nil
}

// shoot photographs the tab: scrolled so that sel shows ("": its top), the whole page's height.
func shoot(tab context.Context, sel string) ([]byte, error) {
	scroll := `window.scrollTo(0, 0), true`
	if sel != "" {
		scroll = `document.querySelector(` + quote(sel) + `).scrollIntoView({block: "start"}), window.scrollBy(0, -16), true`
	}
	if _, err := chromedp.Run(tab, chromedp.Evaluate[bool](scroll)); err != nil {
		return nil, err
	}
	if err := chromedp.Do(tab, chromedp.Sleep(500*time.Millisecond)); err != nil {
		return nil, err
	}
	return chromedp.Run(tab, chromedp.CaptureScreenshot())
}

// say types text in the chat as the customer and sends it, then waits for a line of who that
// says want.
func say(customer context.Context, text, who, want string) error {
	if err := chromedp.Do(customer, chromedp.SendKeys(`#text`, text), chromedp.Click(`#say button[type="submit"]`)); err != nil {
		return err
	}
	return until(customer, fmt.Sprintf("a %s line saying %q", who, want), lineSays(who, want))
}

// lineSays is true when the chat shows a line of who whose text has want.
func lineSays(who, want string) string {
	return `[...document.querySelectorAll('[data-who=` + quote(who) + `]')].some(l => l.textContent.includes(` + quote(want) + `))`
}

// until waits up to a minute and a half until js is true in the tab, asking again across page
// loads.
func until(tab context.Context, what, js string) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		ok, err := chromedp.Run(tab, chromedp.Evaluate[bool](`(() => { try { return !!(`+js+`) } catch (e) { return false } })()`))
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			seen, _ := chromedp.Run(tab, chromedp.Evaluate[string](`location.pathname + ": " + (document.body ? document.body.innerText.slice(0, 600) : "")`))
			return fmt.Errorf("waiting for %s (%v); the page showed %q", what, err, seen)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
