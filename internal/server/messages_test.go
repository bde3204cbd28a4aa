package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// conversationDesk is a desk whose billing_t2 bot key has a webhook receiver, with one agent
// signed in and a package handed over: what every conversation test starts from.
type conversationDesk struct {
	*testApp
	key   string
	hooks <-chan []byte
	id    string
	agent *http.Client
}

func newConversation(t *testing.T) conversationDesk {
	t.Helper()
	app := setupHooks(t, server.Config{}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	hookURL, hooks := receiver(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	q, err := app.Queues.ByName(t.Context(), "billing_t2")
	if err != nil {
		t.Fatal(err)
	}
	k, err := app.Auth.CreateAPIKey(t.Context(), auth.NewAPIKey{Name: "tier1", QueueIDs: []int64{q.ID}, WebhookURL: hookURL, AllowPrivateWebhook: true})
	if err != nil {
		t.Fatal(err)
	}
	pkg := harbor(t, nil)
	expect(t, "submit", app.submit(t, k.Key, pkg), http.StatusCreated)
	dana := app.client(t)
	app.login(t, dana, "dana@example.com")
	return conversationDesk{testApp: app, key: k.Key, hooks: hooks, id: pkg["handoff_id"].(string), agent: dana}
}

func (d conversationDesk) post(t *testing.T, msg map[string]any) apiAnswer {
	t.Helper()
	return d.api(t, http.MethodPost, "/api/v1/handoffs/"+d.id+"/messages", d.key, msg)
}

func (d conversationDesk) thread(t *testing.T, after int) []conversation.Message {
	t.Helper()
	ans := d.api(t, http.MethodGet, fmt.Sprintf("/api/v1/handoffs/%s/messages?after=%d", d.id, after), d.key, nil)
	expect(t, "read the thread", ans, http.StatusOK)
	var body struct{ Messages []conversation.Message }
	if err := json.Unmarshal([]byte(ans.Raw), &body); err != nil {
		t.Fatal(err)
	}
	return body.Messages
}

// act posts an agent's form on the package and insists it went through.
func (d conversationDesk) act(t *testing.T, action string, form url.Values) {
	t.Helper()
	if status, _, body := postForm(t, d.agent, d.URL+"/handoffs/"+d.id+"/"+action, form); status != http.StatusSeeOther {
		t.Fatalf("%s: %d\n%.400s", action, status, body)
	}
}

// waitForHook waits for the webhook event of the package among the deliveries and returns it.
func (d conversationDesk) waitForHook(t *testing.T, event string) map[string]any {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	var seen []string
	for {
		select {
		case body := <-d.hooks:
			var hook map[string]any
			if err := json.Unmarshal(body, &hook); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, fmt.Sprint(hook["event"]))
			if hook["event"] == event && hook["handoff_id"] == d.id {
				return hook
			}
		case <-deadline:
			t.Fatalf("no %s webhook; saw %v", event, seen)
		}
	}
}

// A customer's message joins the thread once, whatever the retries; the bot's own messages only
// while nobody holds the package; the agent's reply answers the customer's latest message, and
// the bot reads all of it back in order and hears the reply's place in it.
func TestMessagesPostReplayAndRead(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	first := map[string]any{"message_id": "msg_1", "role": "user", "text": "Thanks, which card?", "draft_reply": "The Visa ending in 4417.",
		"attachments": []map[string]any{{"url": "https://files.example.com/s.png", "name": "s.png", "content_type": "image/png", "size": 1234}}}
	ans := d.post(t, first)
	expect(t, "first message", ans, http.StatusCreated)
	if ans.Body["seq"] != 1.0 || ans.Body["message_id"] != "msg_1" || ans.Body["handoff_id"] != d.id {
		t.Fatalf("receipt %v", ans.Body)
	}
	again := d.post(t, first)
	expect(t, "the same message again", again, http.StatusOK)
	if again.Raw != ans.Raw {
		t.Errorf("replay answered %s, first %s", again.Raw, ans.Raw)
	}
	other := map[string]any{"message_id": "msg_1", "role": "user", "text": "Thanks, which card??"}
	if ans := d.post(t, other); ans.Status != http.StatusConflict || ans.Body["reason"] != "message_id_reused" {
		t.Errorf("the same id with another body: %d %s", ans.Status, ans.Raw)
	}
	expect(t, "the bot's own message while nobody holds it",
		d.post(t, map[string]any{"message_id": "bot_1", "role": "assistant", "text": "An agent will be with you shortly."}), http.StatusCreated)

	d.act(t, "accept", nil)
	if ans := d.post(t, map[string]any{"message_id": "bot_2", "role": "assistant", "text": "Still there?"}); ans.Status != http.StatusConflict ||
		ans.Body["reason"] != "agent_holds" {
		t.Errorf("the bot's message while the agent holds it: %d %s", ans.Status, ans.Raw)
	}
	expect(t, "the customer writes again", d.post(t, map[string]any{"message_id": "msg_2", "role": "user", "text": "Hello?"}), http.StatusCreated)
	d.act(t, "reply", url.Values{"text": {"It goes back to the card you paid with."}})

	all := d.thread(t, 0)
	var got []string
	for _, m := range all {
		got = append(got, fmt.Sprintf("%d %s %s", m.Seq, m.Role, m.MessageID))
	}
	want := []string{"1 user msg_1", "2 assistant bot_1", "3 user msg_2"}
	if len(all) != 4 || !slices.Equal(got[:3], want) || all[3].Role != conversation.Agent {
		t.Fatalf("thread %v, want %v then the agent's reply", got, want)
	}
	reply := all[3]
	if reply.Seq != 4 || reply.InReplyTo == nil || *reply.InReplyTo != 3 || reply.Author == "" || reply.Text != "It goes back to the card you paid with." {
		t.Errorf("the reply reads %+v", reply)
	}
	if a := all[0].Attachments; len(a) != 1 || a[0].Name != "s.png" || a[0].Size == nil || *a[0].Size != 1234 {
		t.Errorf("the attachment reads %+v", a)
	}
	if after := d.thread(t, 3); len(after) != 1 || after[0].Seq != 4 {
		t.Errorf("after=3 gives %+v", after)
	}
	hook := d.waitForHook(t, "reply")
	if hook["message_id"] != reply.MessageID || hook["seq"] != 4.0 || hook["in_reply_to"] != 3.0 {
		t.Errorf("the reply webhook names %v/%v/%v, want %s/4/3", hook["message_id"], hook["seq"], hook["in_reply_to"], reply.MessageID)
	}
}

// Every refusal names what was wrong, and refused messages leave the thread as it was.
func TestMessagesRefusals(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	otherKey := d.botKey(t, "other-bot", "sales")
	ok := map[string]any{"message_id": "m1", "role": "user", "text": "hi"}

	if ans := d.api(t, http.MethodPost, "/api/v1/handoffs/"+d.id+"/messages", otherKey, ok); ans.Status != http.StatusNotFound {
		t.Errorf("another key's package: %d", ans.Status)
	}
	if ans := d.api(t, http.MethodPost, "/api/v1/handoffs/ho_nobody/messages", d.key, ok); ans.Status != http.StatusNotFound {
		t.Errorf("an unknown package: %d", ans.Status)
	}
	if ans := d.api(t, http.MethodGet, "/api/v1/handoffs/"+d.id+"/messages", otherKey, nil); ans.Status != http.StatusNotFound {
		t.Errorf("another key reads the thread: %d", ans.Status)
	}
	if ans := d.api(t, http.MethodGet, "/api/v1/handoffs/"+d.id+"/messages?after=-1", d.key, nil); ans.Status != http.StatusBadRequest ||
		!strings.Contains(ans.Raw, "after") {
		t.Errorf("after=-1: %d %s", ans.Status, ans.Raw)
	}
	if ans := d.api(t, http.MethodPost, "/api/v1/handoffs/"+d.id+"/messages", d.key, []byte(`{"message_id":`)); ans.Status != http.StatusBadRequest {
		t.Errorf("malformed JSON: %d", ans.Status)
	}
	bad := map[string]any{"message_id": "no spaces", "role": "agent", "text": strings.Repeat("x", conversation.MaxTextChars+1),
		"attachments": []map[string]any{{"url": "http://plain.example.com/a"}}, "extra": true}
	ans := d.post(t, bad)
	if ans.Status != http.StatusUnprocessableEntity {
		t.Fatalf("an invalid message: %d %s", ans.Status, ans.Raw)
	}
	var fields []string
	for _, f := range ans.Body["fields"].([]any) {
		fields = append(fields, f.(map[string]any)["field"].(string))
	}
	for _, want := range []string{"message_id", "role", "text", "attachments[0].url", "extra"} {
		if !slices.Contains(fields, want) {
			t.Errorf("the 422 names %v, not %s", fields, want)
		}
	}
	if !strings.Contains(ans.Raw, "the message is invalid") {
		t.Errorf("the 422 says %s", ans.Raw)
	}

	// A package handed back to the bot takes no message: the answer names its status and what to do.
	d.act(t, "accept", nil)
	d.act(t, "return", url.Values{"reason": {"needs_more_info"}, "note": {"ask for the order number"}})
	ans = d.post(t, ok)
	if ans.Status != http.StatusConflict || ans.Body["reason"] != "handoff_closed" || !strings.Contains(ans.Raw, "returned to the bot") ||
		!strings.Contains(ans.Raw, "POST /api/v1/handoffs") {
		t.Errorf("a message on a returned package: %d %s", ans.Status, ans.Raw)
	}
	if n := len(d.thread(t, 0)); n != 0 {
		t.Errorf("refused messages left %d in the thread", n)
	}
}

// A package whose state takes no message refuses it with 409, naming the status (or the limit)
// and what the bot does instead, and its thread stays as it was: canceled, expired, resolved for
// the bot's own message, full at MaxMessages, and resolved while its contact has another handoff
// open, where the customer's message belongs to that one.
func TestMessagesRefusedByThePackagesState(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	submit := func(contact string) string {
		pkg := harbor(t, func(p map[string]any) { p["contact"].(map[string]any)["id"] = contact })
		expect(t, "package of "+contact, d.submit(t, d.key, pkg), http.StatusCreated)
		return pkg["handoff_id"].(string)
	}
	post := func(id string, msg map[string]any) apiAnswer {
		return d.api(t, http.MethodPost, "/api/v1/handoffs/"+id+"/messages", d.key, msg)
	}
	customer := map[string]any{"message_id": "m1", "role": "user", "text": "Hello again"}
	refused := func(what string, ans apiAnswer, reason string, says ...string) {
		t.Helper()
		if ans.Status != http.StatusConflict || ans.Body["reason"] != reason {
			t.Errorf("%s: %d %s, want 409 %s", what, ans.Status, ans.Raw, reason)
			return
		}
		for _, w := range says {
			if msg, _ := ans.Body["error"].(string); !strings.Contains(msg, w) {
				t.Errorf("%s: the answer %q does not say %q", what, ans.Body["error"], w)
			}
		}
	}
	const again = "hand off again with POST /api/v1/handoffs"

	canceled := submit("cust_canceled")
	expect(t, "the bot cancels", d.api(t, http.MethodPost, "/api/v1/handoffs/"+canceled+"/cancel", d.key, nil), http.StatusOK)
	ans := post(canceled, customer)
	refused("a message on a canceled package", ans, "handoff_closed", "was canceled", again)
	if ans.Body["status"] != "canceled" {
		t.Errorf("the refusal names status %v, want canceled", ans.Body["status"])
	}

	expired := submit("cust_expired")
	if _, err := d.DB.Exec(t.Context(), `UPDATE handoffs SET status = 'expired', closed_at = now() WHERE handoff_id = $1`, expired); err != nil {
		t.Fatal(err)
	}
	ans = post(expired, customer)
	refused("a message on an expired package", ans, "handoff_closed", "expired", "nobody taking it", again)
	if ans.Body["status"] != "expired" {
		t.Errorf("the refusal names status %v, want expired", ans.Body["status"])
	}

	// The thread holds the most messages a package takes, relayed over the last hour (not the
	// last minute, whose own limit is another refusal).
	full := submit("cust_full")
	if _, err := d.DB.Exec(t.Context(), `INSERT INTO messages (handoff_id, seq, message_id, role, text, at, received_at, body_sha256)
		SELECT h.id, g, 'bulk' || g, 'user', 'x', now() - interval '1 hour', now() - interval '1 hour', '\x00'
		FROM handoffs h, generate_series(1, $2) g WHERE h.handoff_id = $1`, full, conversation.MaxMessages); err != nil {
		t.Fatal(err)
	}
	ans = post(full, map[string]any{"message_id": "one_more", "role": "user", "text": "one more"})
	refused("a message past the thread's limit", ans, "thread_full", fmt.Sprintf("holds %d messages", conversation.MaxMessages),
		"hand off again with a new package")

	d.act(t, "accept", nil)
	d.act(t, "resolve", url.Values{"code": {"solved"}})
	refused("the bot's own message on a resolved package",
		d.post(t, map[string]any{"message_id": "bot_1", "role": "assistant", "text": "Anything else?"}), "handoff_closed",
		"was resolved", "the conversation is the bot's again", "its own messages stay with the bot")

	// The contact now has another package open: the customer's message goes there, not into a
	// reopen of this one.
	other := submit("cust_other")
	if _, err := d.DB.Exec(t.Context(), `UPDATE handoffs SET contact_id = (SELECT contact_id FROM handoffs WHERE handoff_id = $1)
		WHERE handoff_id = $2`, d.id, other); err != nil {
		t.Fatal(err)
	}
	ans = d.post(t, customer)
	refused("a reopen while the contact has another handoff open", ans, handoff.ReasonOpenHandoff,
		"has handoff "+other+" open", "POST /api/v1/handoffs/"+other+"/messages")
	if ans.Body["open_handoff_id"] != other {
		t.Errorf("the refusal names open_handoff_id %v, want %s", ans.Body["open_handoff_id"], other)
	}
	var status string
	if err := d.DB.QueryRow(t.Context(), `SELECT status FROM handoffs WHERE handoff_id = $1`, d.id).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if status != "resolved" {
		t.Errorf("the refused reopen left the package %s, want resolved", status)
	}
	for _, id := range []string{canceled, expired, d.id} {
		if th := (conversationDesk{testApp: d.testApp, key: d.key, id: id}).thread(t, 0); len(th) != 0 {
			t.Errorf("refused messages left %d in the thread of %s", len(th), id)
		}
	}
}

// A customer who writes again within the reopen window after a resolve reaches the agent who
// resolved it: the same package, queued again and held for them, the bot told, no guard refusal;
// past the window the bot is told to hand off anew.
func TestCustomerMessageReopensResolvedPackage(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	d.act(t, "accept", nil)
	d.act(t, "resolve", url.Values{"code": {"solved"}})
	d.waitForHook(t, "resolved")

	ans := d.post(t, map[string]any{"message_id": "after_1", "role": "user", "text": "Thanks, which card?"})
	expect(t, "the customer writes again a minute later", ans, http.StatusCreated)
	hook := d.waitForHook(t, "reopened")
	if hook["status"] != "queued" || hook["seq"] != 1.0 || hook["message_id"] != "after_1" {
		t.Errorf("reopened webhook %v", hook)
	}
	var status string
	var offeredTo *int64
	if err := d.DB.QueryRow(t.Context(), `SELECT h.status, h.offered_to FROM handoffs h WHERE h.handoff_id = $1`, d.id).
		Scan(&status, &offeredTo); err != nil {
		t.Fatal(err)
	}
	dana, err := d.Auth.UserByEmail(t.Context(), "dana@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if status != "queued" || offeredTo == nil || *offeredTo != dana.ID {
		t.Errorf("reopened package is %s, offered to %v; want queued for dana (%d)", status, offeredTo, dana.ID)
	}
	// The agent who resolved it takes it again and answers in the same thread.
	d.act(t, "accept", nil)
	d.act(t, "reply", url.Values{"text": {"The Visa ending in 4417."}})
	if th := d.thread(t, 0); len(th) != 2 || th[1].InReplyTo == nil || *th[1].InReplyTo != 1 {
		t.Errorf("thread after the reopen %+v", th)
	}
	d.act(t, "resolve", url.Values{"code": {"solved"}})

	// Past the window: the bot hands off again.
	if _, err := d.DB.Exec(t.Context(), `UPDATE handoffs SET closed_at = closed_at - interval '25 hours' WHERE handoff_id = $1`, d.id); err != nil {
		t.Fatal(err)
	}
	ans = d.post(t, map[string]any{"message_id": "after_2", "role": "user", "text": "One more thing"})
	if ans.Status != http.StatusConflict || !strings.Contains(ans.Raw, "reopen window") {
		t.Errorf("a message past the reopen window: %d %s", ans.Status, ans.Raw)
	}
}

// A customer who writes again while the agent who resolved the package is available rings that
// agent, not another available one: the reopen is a warm offer to them, which they accept.
func TestCustomerMessageReopensWithARingForTheResolver(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	dana, err := d.Auth.UserByEmail(t.Context(), "dana@example.com")
	if err != nil {
		t.Fatal(err)
	}
	bea := d.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	beaClient := d.client(t)
	d.login(t, beaClient, "bea@example.com")
	d.act(t, "accept", nil)
	d.act(t, "resolve", url.Values{"code": {"solved"}})
	danaConn, _ := d.dialed(t, d.agent, "")
	d.dialed(t, beaClient, "")
	d.waitOnline(t, dana, bea)

	expect(t, "the customer writes again", d.post(t, map[string]any{"message_id": "after_1", "role": "user", "text": "Thanks, which card?"}),
		http.StatusCreated)
	if html := readUntil(t, danaConn, "ring"); !strings.Contains(html, `data-handoff="`+d.id+`"`) {
		t.Fatalf("dana's ring frame %s", html)
	}
	var status string
	var warm bool
	var offeredTo *int64
	var ringing []int64
	if err := d.DB.QueryRow(t.Context(), `SELECT h.status, h.warm_until IS NOT NULL, h.offered_to,
			array(SELECT o.user_id FROM offers o WHERE o.handoff_id = h.id AND o.ended_at IS NULL)
		FROM handoffs h WHERE h.handoff_id = $1`, d.id).Scan(&status, &warm, &offeredTo, &ringing); err != nil {
		t.Fatal(err)
	}
	if status != "queued" || !warm || offeredTo == nil || *offeredTo != dana.ID || !slices.Equal(ringing, []int64{dana.ID}) {
		t.Errorf("the reopened package is %s, warm %v, offered_to %v, ringing %v; want queued, warm, ringing dana (%d) alone",
			status, warm, offeredTo, ringing, dana.ID)
	}
	d.waitForHook(t, "reopened")
	d.act(t, "accept", nil)
	var assignee *int64
	if err := d.DB.QueryRow(t.Context(), `SELECT assignee_id FROM handoffs WHERE handoff_id = $1`, d.id).Scan(&assignee); err != nil {
		t.Fatal(err)
	}
	if assignee == nil || *assignee != dana.ID {
		t.Errorf("the reopened package went to %v, want dana (%d)", assignee, dana.ID)
	}
}

// Eight relays post at once to one package: every message is in the thread once, seq has no gap,
// and each relay's messages keep the order it sent them in.
func TestConcurrentRelaysKeepEachRelaysOrder(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	const relays, each = 8, 12
	var wg sync.WaitGroup
	for r := range relays {
		wg.Go(func() {
			for i := range each {
				ans := d.post(t, map[string]any{"message_id": fmt.Sprintf("r%d_%d", r, i), "role": "user", "text": fmt.Sprintf("relay %d says %d", r, i)})
				if ans.Status != http.StatusCreated {
					t.Errorf("relay %d message %d: %d %s", r, i, ans.Status, ans.Raw)
				}
			}
		})
	}
	wg.Wait()
	th := d.thread(t, 0)
	if len(th) != relays*each {
		t.Fatalf("the thread holds %d messages, want %d", len(th), relays*each)
	}
	last := make([]int, relays)
	for i, m := range th {
		if m.Seq != i+1 {
			t.Fatalf("message %d has seq %d: a gap", i, m.Seq)
		}
		var r, n int
		if _, err := fmt.Sscanf(m.MessageID, "r%d_%d", &r, &n); err != nil {
			t.Fatal(err)
		}
		if n != last[r] {
			t.Errorf("relay %d's message %d came where %d was due", r, n, last[r])
		}
		last[r] = n + 1
	}
}

// An instance killed with kill -9 while a relay posts to it loses no message it answered: every
// message that got a 201 is in the thread afterwards, once, read through the surviving instance,
// and a relay that retries what got no answer finds each of those there exactly once too.
func TestKilledInstanceKeepsEveryAnsweredMessage(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	doomed, kill := d.killable(t)
	client := &http.Client{Timeout: 10 * time.Second}
	post := func(base string, i int) (int, error) {
		body := fmt.Sprintf(`{"message_id":"k%d","role":"user","text":"message %d"}`, i, i)
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/handoffs/"+d.id+"/messages", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+d.key)
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		return resp.StatusCode, nil
	}
	answered := map[int]bool{}
	var unanswered []int
	killed := false
	for i := 0; i < 400 && len(unanswered) == 0; i++ {
		if i == 40 {
			// The kill lands while the relay is posting: the next posts find the instance gone
			// mid-request or refused.
			go kill()
			killed = true
		}
		status, err := post(doomed.URL, i)
		switch {
		case err == nil && status == http.StatusCreated:
			answered[i] = true
		case err == nil:
			t.Fatalf("message %d: %d", i, status)
		default:
			unanswered = append(unanswered, i)
		}
	}
	if !killed || len(unanswered) == 0 {
		t.Fatalf("the instance answered every message; answered %d", len(answered))
	}
	th := d.thread(t, 0)
	have := map[string]int{}
	for _, m := range th {
		have[m.MessageID]++
	}
	for i := range answered {
		if have[fmt.Sprintf("k%d", i)] != 1 {
			t.Errorf("answered message k%d is in the thread %d times", i, have[fmt.Sprintf("k%d", i)])
		}
	}
	// The relay retries what got no answer on the surviving instance: each lands once, whether the
	// dead instance had committed it or not.
	for _, i := range unanswered {
		if status, err := post(d.URL, i); err != nil || (status != http.StatusCreated && status != http.StatusOK) {
			t.Fatalf("retry of k%d: %d %v", i, status, err)
		}
	}
	th = d.thread(t, 0)
	for i, m := range th {
		if m.Seq != i+1 {
			t.Fatalf("seq %d at %d: a gap after the kill", m.Seq, i)
		}
	}
	if len(th) != len(answered)+len(unanswered) {
		t.Errorf("the thread holds %d messages, want %d answered and %d retried", len(th), len(answered), len(unanswered))
	}
	t.Logf("%d answered before the kill, %d retried after", len(answered), len(unanswered))
}

// A package takes at least 120 messages a minute (SPEC §2a): a burst of 150 customer lines all
// land, and the refusal past the per-minute cap is a 429 that says when to send the rest.
func TestPackageTakesMessagesAtChatSpeed(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	for i := range 150 {
		expect(t, fmt.Sprintf("line %d", i), d.post(t, map[string]any{"message_id": fmt.Sprintf("l%d", i), "role": "user", "text": "a line"}),
			http.StatusCreated)
	}
	if _, err := d.DB.Exec(t.Context(), `INSERT INTO messages (handoff_id, seq, message_id, role, text, at, received_at, body_sha256)
		SELECT h.id, 150 + g, 'bulk' || g, 'user', 'x', now(), now(), '\x00' FROM handoffs h, generate_series(1, $2) g WHERE h.handoff_id = $1`,
		d.id, conversation.PerMinute-150); err != nil {
		t.Fatal(err)
	}
	ans := d.post(t, map[string]any{"message_id": "over", "role": "user", "text": "one too many"})
	if ans.Status != http.StatusTooManyRequests || ans.Header.Get("Retry-After") == "" || !strings.Contains(ans.Raw, "in a moment") {
		t.Errorf("past %d a minute: %d %s (Retry-After %q)", conversation.PerMinute, ans.Status, ans.Raw, ans.Header.Get("Retry-After"))
	}
}
