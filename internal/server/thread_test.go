package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// waitFor waits until the frames a socket received hold every one of want.
func (l *frameLog) waitFor(t *testing.T, what string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		text := l.text()
		missing := ""
		for _, w := range want {
			if !strings.Contains(text, w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return text
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no frame with %q in:\n%.3000s", what, missing, text)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The package page shows the thread like a chat: the transcript's last turns, then the customer's
// messages with their time, author and attachments, then the reply. A message posted through the
// API reaches the package's socket on the other instance as a frame of its own: the message,
// placed by its seq, and the draft offer; not the package view again.
func TestThreadOnThePageAndLiveOnTheOtherInstance(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	d.act(t, "accept", nil)
	other, _ := d.start(t) // a second instance on the same database, as behind a load balancer
	conn, _ := d.dialed(t, d.agent, "handoff="+d.id)
	frames := collectFrames(t, conn)

	expect(t, "the customer writes, through the other instance", (&testApp{URL: other}).api(t, http.MethodPost, "/api/v1/handoffs/"+d.id+"/messages", d.key, map[string]any{"message_id": "c1", "role": "user", "text": "Thanks, which card?",
		"draft_reply": "The Visa ending in 4417.",
		"attachments": []map[string]any{{"url": "https://files.example.com/receipt.pdf", "name": "receipt.pdf", "size": 2048}}}), http.StatusCreated)
	frames.waitFor(t, "the message's frame", `msg-`+d.id+`-1`, `Thanks, which card?`, `receipt.pdf`, `2.0 KB`,
		`draft-offer-`+d.id, `The Visa ending in 4417.`)
	for _, f := range frames.frames {
		if strings.Contains(f, `msg-`+d.id+`-1`) && (strings.Contains(f, `actions-`+d.id) || strings.Contains(f, `status-`+d.id)) {
			t.Errorf("a message re-rendered the package view:\n%.2000s", f)
		}
	}

	page := mustGet(t, d.agent, d.URL+"/handoffs/"+d.id)
	for _, want := range []string{`data-testid="transcript-recent"`, `data-testid="message" data-role="user"`, `data-testid="message-author">Customer`,
		`href="https://files.example.com/receipt.pdf"`, `(2.0 KB)`, `data-testid="draft-offer"`,
		"The bot drafted an answer to the customer's last message"} {
		if !strings.Contains(page, want) {
			t.Errorf("the package page lacks %q", want)
		}
	}
	if strings.Contains(page, `data-testid="replies"`) {
		t.Error("the page still lists the replies apart from the conversation")
	}

	d.act(t, "reply", url.Values{"text": {"It goes back to the card you paid with."}})
	frames.waitFor(t, "the reply's frame", `msg-`+d.id+`-2`, `It goes back to the card you paid with.`)
	// A second customer message without a draft: the first turn's draft is stale.
	expect(t, "the customer writes again", d.post(t, map[string]any{"message_id": "c2", "role": "user", "text": "ok"}), http.StatusCreated)
	frames.waitFor(t, "the second message", `msg-`+d.id+`-3`, `data-stale`)
	page = mustGet(t, d.agent, d.URL+"/handoffs/"+d.id)
	if i, j, k := strings.Index(page, "Thanks, which card?"), strings.Index(page, "It goes back"), strings.Index(page, `data-testid="message-text">ok`); i < 0 || j < i || k < j {
		t.Errorf("the thread is not in order: %d %d %d", i, j, k)
	}
	if !strings.Contains(page, "(stale)") {
		t.Error("the older turn's draft is not marked stale")
	}
}

// A reply shows where its webhook to the bot stands, live: retrying with the attempt and the error
// in words while the bot's receiver fails, then sent to the customer, with the time, once it took
// it. The notice after sending no longer says the customer has it.
func TestReplyShowsItsDeliveryLive(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			http.Error(w, "down", http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(failing.Close)
	app := setupHooks(t, server.Config{}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond, BackoffBase: time.Second})
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	q, err := app.Queues.ByName(t.Context(), "billing_t2")
	if err != nil {
		t.Fatal(err)
	}
	k, err := app.Auth.CreateAPIKey(t.Context(), auth.NewAPIKey{Name: "tier1", QueueIDs: []int64{q.ID}, WebhookURL: failing.URL, AllowPrivateWebhook: true})
	if err != nil {
		t.Fatal(err)
	}
	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, k.Key, pkg), http.StatusCreated)
	dana := app.client(t)
	app.login(t, dana, "dana@example.com")
	if status, _, body := postForm(t, dana, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d %s", status, body)
	}
	conn, _ := app.dialed(t, dana, "handoff="+id)
	frames := collectFrames(t, conn)
	// The package's earlier webhooks (queued, taken at the second try, and accepted) are delivered
	// first: one still on its way would take the bot's 503 meant for the reply.
	waitFor(t, "the package's earlier webhooks delivered", func() bool {
		var pending int
		err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM webhook_outbox WHERE handoff_id = $1 AND state <> 'delivered'`, id).Scan(&pending)
		return err == nil && pending == 0
	})
	calls.Store(0)
	if status, _, body := postForm(t, dana, app.URL+"/handoffs/"+id+"/reply", url.Values{"text": {"Refunded."}}); status != http.StatusSeeOther {
		t.Fatalf("reply: %d %s", status, body)
	}
	page := mustGet(t, dana, app.URL+"/handoffs/"+id)
	if strings.Contains(page, "sent to the customer") || !strings.Contains(page, `data-testid="delivery"`) {
		t.Errorf("before the bot took it, the page says it was sent, or shows no delivery state")
	}
	frames.waitFor(t, "retrying", `data-state=\"retrying\"`, `attempt 1 failed (the bot answered HTTP 503)`)
	frames.waitFor(t, "delivered", `data-state=\"delivered\"`, `Sent to the customer: the bot took it at`)
	page = mustGet(t, dana, app.URL+"/handoffs/"+id)
	if !strings.Contains(page, `data-state="delivered"`) {
		t.Error("the page does not show the reply delivered")
	}
	if strings.Contains(page, "reply_delivery") || strings.Contains(page, "Reply delivery") {
		t.Error("the timeline lists the deliverer's steps, which the conversation shows beside the reply")
	}
}

// My work shows whose customer waits for an answer and since when, the longest waiting on top;
// the top bar and the window's title count the unanswered messages, live; a reply ends the wait.
func TestMineShowsWhoseCustomerWaits(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	d.act(t, "accept", nil)
	second := harbor(t, func(p map[string]any) { p["contact"].(map[string]any)["id"] = "cust_second" })
	expect(t, "a second package", d.submit(t, d.key, second), http.StatusCreated)
	secondID := second["handoff_id"].(string)
	if status, _, body := postForm(t, d.agent, d.URL+"/handoffs/"+secondID+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept the second: %d %.300s", status, body)
	}
	conn, _ := d.dialed(t, d.agent, "mine=true")
	frames := collectFrames(t, conn)

	// The second package's customer writes first, twice; then the first's.
	for i, text := range []string{"Hello?", "Anyone there?"} {
		expect(t, "the second's customer", d.api(t, http.MethodPost, "/api/v1/handoffs/"+secondID+"/messages", d.key,
			map[string]any{"message_id": fmt.Sprint("s", i), "role": "user", "text": text}), http.StatusCreated)
	}
	expect(t, "the first's customer", d.post(t, map[string]any{"message_id": "f1", "role": "user", "text": "Which card?"}), http.StatusCreated)
	frames.waitFor(t, "the count", `data-unread=\"3\"`, `mine-`+secondID)

	page := mustGet(t, d.agent, d.URL+"/mine")
	first, other := strings.Index(page, `data-handoff="`+secondID+`"`), strings.Index(page, `data-handoff="`+d.id+`"`)
	if first < 0 || other < first {
		t.Errorf("the customer who waited longest is not on top (%d, %d)", first, other)
	}
	for _, want := range []string{`data-testid="customer-waiting"`, "2 unread", "1 unread", `data-testid="unread-count">3 unread`, "<title>(3) My work"} {
		if !strings.Contains(page, want) {
			t.Errorf("/mine lacks %q", want)
		}
	}
	if queue := mustGet(t, d.agent, d.URL+"/queues/billing_t2"); !strings.Contains(queue, `data-testid="customer-waiting"`) {
		t.Error("the queue page's held cards do not show the waiting customer")
	}

	if status, _, body := postForm(t, d.agent, d.URL+"/handoffs/"+secondID+"/reply", url.Values{"text": {"Here now."}}); status != http.StatusSeeOther {
		t.Fatalf("reply: %d %.300s", status, body)
	}
	frames.waitFor(t, "the count after the reply", `data-unread=\"1\"`)
	page = mustGet(t, d.agent, d.URL+"/mine")
	if !strings.Contains(page, "<title>(1) My work") || strings.Contains(page, "2 unread") {
		t.Error("after the reply, the second customer still counts as waiting")
	}
}

// My work's SLA timer agrees with search's sla_breached: a package accepted within its SLA says so
// however long it has been held since, one never accepted past its SLA is over it, and search
// lists exactly that one as breached.
func TestMineSLAAgreesWithSearch(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	d.act(t, "accept", nil)
	// Two more, accepted in time, whose customers write after the accept: one waits 20 minutes for
	// an answer (below), the other has just written. Dana holds four at once.
	if _, err := d.DB.Exec(t.Context(), `UPDATE users SET capacity = 4 WHERE email = 'dana@example.com'`); err != nil {
		t.Fatal(err)
	}
	var waitsID, freshID string
	for _, p := range []struct {
		id      *string
		contact string
	}{{&waitsID, "cust_waits"}, {&freshID, "cust_fresh"}} {
		pkg := harbor(t, func(m map[string]any) { m["contact"].(map[string]any)["id"] = p.contact })
		expect(t, "package of "+p.contact, d.submit(t, d.key, pkg), http.StatusCreated)
		*p.id = pkg["handoff_id"].(string)
		if status, _, body := postForm(t, d.agent, d.URL+"/handoffs/"+*p.id+"/accept", nil); status != http.StatusSeeOther {
			t.Fatalf("accept %s: %d %.300s", *p.id, status, body)
		}
		expect(t, "the customer writes after the accept", d.api(t, http.MethodPost, "/api/v1/handoffs/"+*p.id+"/messages", d.key,
			map[string]any{"message_id": "m1", "role": "user", "text": "Are you still there?"}), http.StatusCreated)
	}
	late := harbor(t, func(p map[string]any) { p["contact"].(map[string]any)["id"] = "cust_late" })
	expect(t, "a second package", d.submit(t, d.key, late), http.StatusCreated)
	lateID := late["handoff_id"].(string)
	if status, _, body := postForm(t, d.agent, d.URL+"/queues/billing_t2/next", nil); status != http.StatusSeeOther {
		t.Fatalf("next: %d %.300s", status, body)
	}
	// All arrived an hour ago (the queue's SLA is 15 minutes): the first and the last two were
	// accepted 10 s after arriving, the second is only reserved.
	if _, err := d.DB.Exec(t.Context(), `UPDATE handoffs SET created_at = now() - interval '1 hour',
		accepted_at = CASE WHEN accepted_at IS NOT NULL THEN now() - interval '1 hour' + interval '10 seconds' END
		WHERE handoff_id = ANY($1)`, []string{d.id, lateID, waitsID, freshID}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DB.Exec(t.Context(), `UPDATE messages SET received_at = now() - interval '20 minutes'
		WHERE handoff_id = (SELECT id FROM handoffs WHERE handoff_id = $1)`, waitsID); err != nil {
		t.Fatal(err)
	}
	page := mustGet(t, d.agent, d.URL+"/mine")
	rows := map[string]string{}
	for _, m := range regexp.MustCompile(`(?s)data-testid="mine-row" data-handoff="([^"]+)".*?</li>`).FindAllStringSubmatch(page, -1) {
		rows[m[1]] = m[0]
	}
	if !strings.Contains(rows[d.id], "accepted within SLA") {
		t.Errorf("the package accepted within its SLA does not say so:\n%s", rows[d.id])
	}
	over := regexp.MustCompile(`data-testid="sla-left">\s*[^<]* over`)
	if !over.MatchString(rows[lateID]) {
		t.Errorf("the package never accepted is not over its SLA:\n%s", rows[lateID])
	}
	if !over.MatchString(rows[waitsID]) || !strings.Contains(rows[waitsID], `data-testid="customer-waiting"`) {
		t.Errorf("the package whose customer has waited 20 minutes is not over its SLA:\n%s", rows[waitsID])
	}
	if !regexp.MustCompile(`data-testid="sla-left">\s*1[45]m left`).MatchString(rows[freshID]) {
		t.Errorf("the package whose customer just wrote does not count the SLA down from their message:\n%s", rows[freshID])
	}
	sup := d.client(t)
	d.user(t, "sam@example.com", auth.RoleSupervisor, "billing_t2")
	d.login(t, sup, "sam@example.com")
	want := []string{lateID, waitsID}
	slices.Sort(want)
	status, ids, _, body := searchIDs(t, d.testApp, sup, url.Values{"sla_breached": {"true"}})
	slices.Sort(ids)
	if status != http.StatusOK || !slices.Equal(ids, want) {
		t.Errorf("search's sla_breached lists %v, want %v\n%.400s", ids, want, body)
	}
	// And the packages within their SLA are the other two.
	if status, ids, _, body := searchIDs(t, d.testApp, sup, url.Values{"sla_breached": {"false"}}); status != http.StatusOK || len(ids) != 2 ||
		slices.Contains(ids, lateID) || slices.Contains(ids, waitsID) {
		t.Errorf("search's sla_breached=false lists %v, want %s and %s\n%.400s", ids, d.id, freshID, body)
	}
}

// An admin keeps a queue's saved replies in its console page; the agent's editor offers them with
// the co-pilot's tokens where the agent may not see the values and the values where they may; a
// reply sent from one reaches the bot filled in and records which it started from; another queue's
// is refused, and a removed one leaves the list but not the record.
func TestSavedReplies(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	d.user(t, "ada@example.com", auth.RoleAdmin)
	ada := d.client(t)
	d.login(t, ada, "ada@example.com")
	var queueID, otherID int64
	if err := d.DB.QueryRow(t.Context(), `SELECT id FROM queues WHERE name = 'billing_t2'`).Scan(&queueID); err != nil {
		t.Fatal(err)
	}
	d.botKey(t, "other_bot", "tech_t2")
	if err := d.DB.QueryRow(t.Context(), `SELECT id FROM queues WHERE name = 'tech_t2'`).Scan(&otherID); err != nil {
		t.Fatal(err)
	}
	admin := fmt.Sprintf("%s/admin/queues/%d", d.URL, queueID)
	body := "Hi ⟦first name⟧, the refund for ⟦product_sku⟧ reaches the card within 5 days; the receipt goes to ⟦email⟧."
	if status, _, page := postForm(t, ada, admin+"/saved-replies", url.Values{"title": {""}, "body": {body}}); status != http.StatusUnprocessableEntity ||
		!strings.Contains(page, `data-testid="error-title"`) || !strings.Contains(page, "the refund for") {
		t.Errorf("a saved reply without a title: %d, want 422 naming the title with the text kept", status)
	}
	if status, _, page := postForm(t, ada, admin+"/saved-replies", url.Values{"title": {"Refund timeline"}, "body": {body}}); status != http.StatusSeeOther {
		t.Fatalf("add a saved reply: %d %.300s", status, page)
	}
	if status, _, _ := postForm(t, ada, admin+"/saved-replies", url.Values{"title": {"refund TIMELINE"}, "body": {"again"}}); status != http.StatusConflict {
		t.Errorf("the same title again: %d, want 409", status)
	}
	if status, _, _ := postForm(t, ada, fmt.Sprintf("%s/admin/queues/%d/saved-replies", d.URL, otherID), url.Values{"title": {"Elsewhere"}, "body": {"Not billing's."}}); status != http.StatusSeeOther {
		t.Fatalf("add another queue's saved reply: %d", status)
	}
	if status, _, _ := postForm(t, d.agent, admin+"/saved-replies", url.Values{"title": {"Mine"}, "body": {"x"}}); status != http.StatusForbidden {
		t.Errorf("an agent adds a saved reply: %d, want 403", status)
	}
	var savedID, elsewhereID int64
	if err := d.DB.QueryRow(t.Context(), `SELECT (SELECT id FROM saved_replies WHERE title = 'Refund timeline'), (SELECT id FROM saved_replies WHERE title = 'Elsewhere')`).
		Scan(&savedID, &elsewhereID); err != nil {
		t.Fatal(err)
	}

	d.act(t, "accept", nil)
	page := mustGet(t, d.agent, d.URL+"/handoffs/"+d.id)
	shown := "Hi ⟦first name⟧, the refund for PRO-MONTHLY reaches the card within 5 days; the receipt goes to ⟦email⟧."
	if !strings.Contains(page, `data-saved-text="`+shown+`"`) || strings.Contains(page, "Elsewhere") {
		t.Errorf("the agent's editor does not offer the queue's saved reply as their role reads it:\n%s", excerpt(page, "saved-replies", "</ul>"))
	}
	if sup := mustGet(t, ada, d.URL+"/handoffs/"+d.id); strings.Contains(sup, "saved-list") {
		t.Error("an admin who does not hold the package is offered saved replies")
	}
	if status, _, _ := postForm(t, d.agent, d.URL+"/handoffs/"+d.id+"/reply", url.Values{"text": {shown}, "saved_reply": {fmt.Sprint(elsewhereID)}}); status != http.StatusUnprocessableEntity {
		t.Errorf("a reply from another queue's saved reply: %d, want 422", status)
	}
	d.act(t, "reply", url.Values{"text": {shown}, "saved_reply": {fmt.Sprint(savedID)}})
	hook := d.waitForHook(t, "reply")
	filled := "Hi Dana, the refund for PRO-MONTHLY reaches the card within 5 days; the receipt goes to dana.whitfield@example.com."
	if hook["text"] != filled {
		t.Errorf("the bot got %q, want %q", hook["text"], filled)
	}
	// The reply's eval record pairs the agent's text with the saved reply it started from, filled
	// as it was sent, and says which saved reply that was.
	var draft string
	var evalSaved *int64
	if err := d.DB.QueryRow(t.Context(), `SELECT e.draft, e.saved_reply_id FROM evals e JOIN handoffs h ON h.id = e.handoff_id
		WHERE h.handoff_id = $1 AND e.kind = 'reply'`, d.id).Scan(&draft, &evalSaved); err != nil {
		t.Fatal(err)
	}
	if draft != filled || evalSaved == nil || *evalSaved != savedID {
		t.Errorf("the eval record's draft is %q from saved reply %v, want %q from %d", draft, evalSaved, filled, savedID)
	}
	var recorded *int64
	if err := d.DB.QueryRow(t.Context(), `SELECT saved_reply_id FROM messages m JOIN handoffs h ON h.id = m.handoff_id
		WHERE h.handoff_id = $1 AND m.role = 'agent'`, d.id).Scan(&recorded); err != nil || recorded == nil || *recorded != savedID {
		t.Errorf("the reply records saved reply %v (%v), want %d", recorded, err, savedID)
	}

	if status, _, _ := postForm(t, ada, fmt.Sprintf("%s/saved-replies/%d/remove", admin, savedID), nil); status != http.StatusSeeOther {
		t.Fatalf("remove: %d", status)
	}
	if page := mustGet(t, ada, admin); strings.Contains(page, "Refund timeline") {
		t.Error("the removed saved reply is still listed")
	}
	if err := d.DB.QueryRow(t.Context(), `SELECT saved_reply_id FROM messages WHERE saved_reply_id IS NOT NULL`).Scan(&recorded); err != nil {
		t.Errorf("removing the saved reply lost the reply's record of it: %v", err)
	}
	// The export names it still, by id and title, in the desk's own records.
	var rec evals.Record
	if err := json.Unmarshal([]byte(mustGet(t, ada, d.URL+"/evals/export.jsonl?kind=reply")), &rec); err != nil {
		t.Fatal(err)
	}
	if rec.SavedReply == nil || rec.SavedReply.ID != savedID || rec.SavedReply.Title != "Refund timeline" || rec.Draft == nil || *rec.Draft != *rec.Final {
		t.Errorf("the exported record names saved reply %+v with draft %v, want %d \"Refund timeline\" and the final as the draft", rec.SavedReply, rec.Draft, savedID)
	}
}
