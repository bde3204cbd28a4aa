package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/getkin/kin-openapi/openapi3"

	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/server"
)

// webhookConforms checks a webhook's body against the OpenAPI document's WebhookEvent.
func webhookConforms(t *testing.T, hook map[string]any) map[string]any {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(server.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Components.Schemas["WebhookEvent"].Value.VisitJSON(hook); err != nil {
		t.Errorf("the %v webhook is not a WebhookEvent of the OpenAPI document: %v\n%v", hook["event"], err, hook)
	}
	return hook
}

// handBackOf decodes the hand_back of a webhook or a record.
func handBackOf(t *testing.T, body map[string]any) handoff.HandBack {
	t.Helper()
	raw, err := json.Marshal(body["hand_back"])
	if err != nil {
		t.Fatal(err)
	}
	var back handoff.HandBack
	if err := json.Unmarshal(raw, &back); err != nil || body["hand_back"] == nil {
		t.Fatalf("no hand_back in %v (%v)", body, err)
	}
	return back
}

// An agent returns the package with a hand-back: what they did, the entities they confirmed and
// corrected, an instruction. The bot reads it in the returned_to_bot webhook with where the
// thread stood, and in the package's record; a hand-back naming what the package does not have,
// or a masked value's stand-in, is refused naming each field.
func TestReturnHandsBackWhatTheBotNeeds(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	expect(t, "the customer writes", d.post(t, map[string]any{"message_id": "m1", "role": "user", "text": "Which charge?"}), http.StatusCreated)
	d.act(t, "accept", nil)
	d.act(t, "reply", url.Values{"text": {"The second one, ch_44c, is refunded."}})

	status, _, body := postForm(t, d.agent, d.URL+"/handoffs/"+d.id+"/return", url.Values{"reason": {"resolved_by_policy"},
		"confirm": {"no_such_entity"}, "correct.charge_ids": {"ch_" + handoff.Masked}, "done": {"two\nlines"}})
	for _, want := range []string{"no_such_entity", "stands for a value you may not see", "one line"} {
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, want) {
			t.Errorf("a bad hand-back: %d, want 422 naming %q\n%.600s", status, want, body)
		}
	}

	d.act(t, "return", url.Values{"reason": {"resolved_by_policy"}, "note": {"refund issued"},
		"done": {"Refunded the duplicate charge ch_44c"}, "confirm": {"account_id"}, "correct.product_sku": {"PRO-ANNUAL"},
		"correct.charge_ids": {""}, "instruction": {"Do not escalate again for this charge; the refund is done."}})
	hook := webhookConforms(t, d.waitForHook(t, "returned_to_bot"))
	back := handBackOf(t, hook)
	if back.Done != "Refunded the duplicate charge ch_44c" || len(back.Confirmed) != 1 || back.Confirmed[0] != "account_id" ||
		len(back.Corrected) != 1 || back.Corrected["product_sku"] != "PRO-ANNUAL" ||
		back.Instruction != "Do not escalate again for this charge; the refund is done." {
		t.Errorf("the agent's part reads %+v", back)
	}
	if back.LastSeq != 2 || back.Thread != d.URL+"/api/v1/handoffs/"+d.id+"/messages" || back.LastReply == nil ||
		back.LastReply.Seq != 2 || back.LastReply.Text != "The second one, ch_44c, is refunded." {
		t.Errorf("where the thread stood reads %+v (last reply %+v)", back, back.LastReply)
	}
	// The thread is a link the bot follows as it is, from the desk's BASE_URL.
	if path, ok := strings.CutPrefix(back.Thread, d.URL); !ok {
		t.Errorf("the thread %q is not a link from the desk's address %s", back.Thread, d.URL)
	} else if msgs := d.api(t, http.MethodGet, path, d.key, nil); msgs.Status != http.StatusOK || !strings.Contains(msgs.Raw, back.LastReply.Text) {
		t.Errorf("following the thread link: %d\n%.400s", msgs.Status, msgs.Raw)
	}
	record := d.api(t, http.MethodGet, "/api/v1/handoffs/"+d.id, d.key, nil)
	if got := handBackOf(t, record.Body); got.Instruction != back.Instruction || got.LastSeq != 2 || got.Thread != back.Thread {
		t.Errorf("the record's hand_back reads %+v", got)
	}
	var kept string
	if err := d.DB.QueryRow(t.Context(), `SELECT e.hand_back->>'instruction' FROM evals e JOIN handoffs h ON h.id = e.handoff_id
		WHERE h.handoff_id = $1 AND e.kind = 'return_to_bot'`, d.id).Scan(&kept); err != nil || kept != back.Instruction {
		t.Errorf("the eval record keeps %q (%v)", kept, err)
	}
}

// A resolve hands back in the same shape; the customer's message within the reopen window
// reopens the package, which forgets that hand-back, and the next resolve hands back anew.
func TestResolveAndReopenHandBack(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	d.act(t, "accept", nil)
	d.act(t, "reply", url.Values{"text": {"Done: the duplicate is refunded."}})
	d.act(t, "resolve", url.Values{"code": {"solved"}, "done": {"Refunded the duplicate"}})
	back := handBackOf(t, webhookConforms(t, d.waitForHook(t, "resolved")))
	if back.Done != "Refunded the duplicate" || back.LastSeq != 1 || back.Thread != d.URL+"/api/v1/handoffs/"+d.id+"/messages" ||
		back.LastReply == nil || back.LastReply.Text != "Done: the duplicate is refunded." {
		t.Errorf("the resolve hands back %+v", back)
	}

	expect(t, "the customer writes again", d.post(t, map[string]any{"message_id": "again", "role": "user", "text": "It is not on my statement."}), http.StatusCreated)
	if hook := d.waitForHook(t, "reopened"); hook["hand_back"] != nil {
		t.Errorf("the reopen carries %v", hook["hand_back"])
	}
	if record := d.api(t, http.MethodGet, "/api/v1/handoffs/"+d.id, d.key, nil); record.Body["hand_back"] != nil {
		t.Errorf("the reopened package still hands back %v", record.Body["hand_back"])
	}
	d.act(t, "accept", nil)
	d.act(t, "resolve", url.Values{"code": {"solved"}, "instruction": {"Tell them it shows in 3-5 business days."}})
	again := handBackOf(t, d.waitForHook(t, "resolved"))
	if again.Done != "" || again.Instruction != "Tell them it shows in 3-5 business days." || again.LastSeq != 2 || again.LastReply.Seq != 1 {
		t.Errorf("the second resolve hands back %+v", again)
	}
}

// The agent fills the return form's hand-back in Chromium: the form offers the package's
// entities to confirm or correct, and the bot's webhook carries what was filled in. The open
// form passes axe-core. The resolve form, folded in the same menu, holds the same fields, so the
// selectors name the return form's.
func TestBrowserReturnFormHandsBack(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	d.act(t, "accept", nil)
	ctx := browser(t)
	browserLogin(t, ctx, d.URL, "dana@example.com")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(d.URL+"/handoffs/"+d.id),
		chromedp.WaitVisible(`[data-testid="actions"]`),
		inMenu("return"),
		chromedp.WaitVisible(`[data-testid="return-form"] [data-testid="hand-back-entities"]`),
	); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"account_id", "charge_ids", "product_sku"} {
		if !strings.Contains(text(t, ctx, `[data-testid="return-form"] [data-testid="hand-back-entities"]`), key) {
			t.Errorf("the form does not offer %s to confirm", key)
		}
	}
	checkA11y(t, ctx, axeSource(t), "the return form with its hand-back")
	if err := chromedp.Do(ctx,
		chromedp.SetValue(`[data-testid="return-form"] select`, "resolved_by_policy"),
		chromedp.SendKeys(`[data-testid="return-form"] [data-testid="hand-back-done"]`, "Refunded the duplicate charge"),
		chromedp.Click(`[data-testid="return-form"] [data-testid="confirm-account_id"]`),
		chromedp.SendKeys(`[data-testid="return-form"] [data-testid="correct-product_sku"]`, "PRO-ANNUAL"),
		chromedp.SendKeys(`[data-testid="return-form"] [data-testid="hand-back-instruction"]`, "Do not escalate again for this charge."),
		chromedp.Submit(`[data-testid="return-form"]`),
		chromedp.WaitVisible(`[data-testid="my-queues"], [data-testid="cards"]`),
	); err != nil {
		t.Fatal(err)
	}
	back := handBackOf(t, webhookConforms(t, d.waitForHook(t, "returned_to_bot")))
	if back.Done != "Refunded the duplicate charge" || len(back.Confirmed) != 1 || back.Confirmed[0] != "account_id" ||
		back.Corrected["product_sku"] != "PRO-ANNUAL" || len(back.Corrected) != 1 || back.Instruction != "Do not escalate again for this charge." {
		t.Errorf("the form handed back %+v", back)
	}
}

// The agent resolves through the page's next step in Chromium and hands back on the way: the
// resolve form's folded hand-back offers the package's entities, and the resolved webhook
// carries what was filled in beside where the thread stood. The open form passes axe-core.
func TestBrowserResolveFormHandsBack(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	d.act(t, "accept", nil)
	d.act(t, "reply", url.Values{"text": {"The duplicate charge is refunded."}})
	ctx := browser(t)
	browserLogin(t, ctx, d.URL, "dana@example.com")
	form := `[data-testid="actions"] > [data-testid="resolve-form"]`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(d.URL+"/handoffs/"+d.id),
		chromedp.WaitVisible(form),
		chromedp.Click(form+` [data-testid="resolve-hand-back"] > summary`),
		chromedp.WaitVisible(form+` [data-testid="hand-back-entities"]`),
	); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"account_id", "charge_ids", "product_sku"} {
		if !strings.Contains(text(t, ctx, form+` [data-testid="hand-back-entities"]`), key) {
			t.Errorf("the resolve form does not offer %s to confirm", key)
		}
	}
	checkA11y(t, ctx, axeSource(t), "the resolve form with its hand-back")
	if err := chromedp.Do(ctx,
		chromedp.SendKeys(form+` [data-testid="hand-back-done"]`, "Refunded the duplicate charge"),
		chromedp.Click(form+` [data-testid="confirm-account_id"]`),
		chromedp.SendKeys(form+` [data-testid="hand-back-instruction"]`, "Tell them it shows in 3-5 business days."),
		chromedp.Submit(form),
		chromedp.WaitVisible(`[data-testid="my-queues"], [data-testid="cards"]`),
	); err != nil {
		t.Fatal(err)
	}
	hook := webhookConforms(t, d.waitForHook(t, "resolved"))
	back := handBackOf(t, hook)
	if back.Done != "Refunded the duplicate charge" || len(back.Confirmed) != 1 || back.Confirmed[0] != "account_id" ||
		len(back.Corrected) != 0 || back.Instruction != "Tell them it shows in 3-5 business days." {
		t.Errorf("the resolve form handed back %+v", back)
	}
	if hook["outcome"] != "solved" || back.LastSeq != 1 || back.LastReply == nil || back.LastReply.Text != "The duplicate charge is refunded." {
		t.Errorf("the resolved webhook reads outcome %v, last seq %d, last reply %+v", hook["outcome"], back.LastSeq, back.LastReply)
	}
}
