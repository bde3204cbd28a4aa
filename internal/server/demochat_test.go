package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/demochat"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// demoLoop is a desk and the demo customer chat of internal/demochat in front of it, as `make
// run` serves them: the chat's bot holds a key of billing_t2 whose webhooks go to the chat.
type demoLoop struct {
	*testApp
	chatURL string
	key     string
}

func newDemoLoop(t *testing.T) demoLoop {
	t.Helper()
	app := setupHooks(t, server.Config{}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	q, err := app.Queues.ByName(t.Context(), "billing_t2")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	chatURL := "http://" + ln.Addr().String()
	k, err := app.Auth.CreateAPIKey(t.Context(), auth.NewAPIKey{Name: "demo-bot", QueueIDs: []int64{q.ID},
		WebhookURL: chatURL + "/webhook", AllowPrivateWebhook: true})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- demochat.Serve(ctx, ln, demochat.New(demochat.Config{DeskURL: app.URL, BotKey: k.Key, WebhookSecret: k.WebhookSecret, Queue: "billing_t2"}))
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the demo chat: %v", err)
		}
	})
	return demoLoop{testApp: app, chatURL: chatURL, key: k.Key}
}

// customer is a customer's browser on the demo chat, without the browser: its cookie is its chat.
type customer struct {
	t      *testing.T
	loop   demoLoop
	client *http.Client
}

func (d demoLoop) customer(t *testing.T) customer {
	t.Helper()
	c := customer{t: t, loop: d, client: d.client(t)}
	resp, err := c.client.Get(d.chatURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || c.chatID() == "" {
		t.Fatalf("the chat page: %d, cookie %q", resp.StatusCode, c.chatID())
	}
	return c
}

func (c customer) chatID() string {
	u, _ := url.Parse(c.loop.chatURL)
	for _, k := range c.client.Jar.Cookies(u) {
		if k.Name == "demo_chat" {
			return k.Value
		}
	}
	return ""
}

// say types a message and insists the chat took it.
func (c customer) say(text string) {
	c.t.Helper()
	body, _ := json.Marshal(map[string]string{"text": text})
	resp, err := c.client.Post(c.loop.chatURL+"/say", "application/json", bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("say %q: %d", text, resp.StatusCode)
	}
}

func (c customer) lines() []demochat.Line {
	c.t.Helper()
	resp, err := c.client.Get(c.loop.chatURL + "/lines")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct{ Lines []demochat.Line }
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		c.t.Fatal(err)
	}
	return body.Lines
}

// waitForLine waits for a line of who that contains text, and returns it.
func (c customer) waitForLine(who, text string) demochat.Line {
	c.t.Helper()
	var found demochat.Line
	waitFor(c.t, who+" line "+text, func() bool {
		for _, l := range c.lines() {
			if l.Who == who && strings.Contains(l.Text, text) {
				found = l
				return true
			}
		}
		return false
	})
	return found
}

// The demo bot plays the whole loop through the bot API against a real desk: it answers what it
// knows, hands off on "refund" with a full package, relays each later message with a fresh draft,
// shows the agent's replies and what the desk did, and takes no webhook that does not verify.
func TestDemoChatPlaysTheWholeLoop(t *testing.T) {
	t.Parallel()
	d := newDemoLoop(t)
	cust := d.customer(t)
	cust.say("Hi there")
	cust.waitForLine(demochat.Bot, "I'm the demo bot")
	cust.say("What are your opening hours?")
	cust.waitForLine(demochat.Bot, "Monday to Friday")
	cust.say("I want a refund for order 1042, please")
	cust.waitForLine(demochat.Bot, "passing you to a person")

	id := "demo_" + cust.chatID() + "_1"
	var pkg struct {
		Trigger             string `json:"trigger"`
		ProblemStatement    string `json:"problem_statement"`
		DraftReply          string `json:"draft_reply"`
		RecommendedNextStep string `json:"recommended_next_step"`
		Transcript          []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"transcript"`
	}
	if err := d.DB.QueryRow(t.Context(), `SELECT package FROM handoffs WHERE handoff_id = $1 AND status = 'queued'`, id).Scan(&pkg); err != nil {
		t.Fatalf("the desk holds no queued package %s: %v", id, err)
	}
	if pkg.Trigger != "policy_boundary" || !strings.Contains(pkg.ProblemStatement, "refund for order 1042") || pkg.DraftReply == "" ||
		pkg.RecommendedNextStep == "" || len(pkg.Transcript) != 6 || pkg.Transcript[4].Content != "I want a refund for order 1042, please" {
		t.Errorf("the package: %+v", pkg)
	}

	agent := d.client(t)
	d.login(t, agent, "dana@example.com")
	act := func(action string, form url.Values) {
		t.Helper()
		if status, _, body := postForm(t, agent, d.URL+"/handoffs/"+id+"/"+action, form); status != http.StatusSeeOther {
			t.Fatalf("%s: %d\n%.400s", action, status, body)
		}
	}
	act("accept", nil)
	cust.waitForLine(demochat.Notice, "dana from the support team joined")

	rowID := int64(0)
	if err := d.DB.QueryRow(t.Context(), `SELECT id FROM handoffs WHERE handoff_id = $1`, id).Scan(&rowID); err != nil {
		t.Fatal(err)
	}
	for i, turn := range []struct{ says, draft, reply string }{
		{"Which card will it go back to?", "The refund goes back to the card you paid with.", "The Visa ending 4417."},
		{"How long does it take?", "Refunds show on your statement within 3 to 5 business days.", "Three to five business days."},
		{"Thanks a lot", "You're welcome! Is there anything else I can do for you?", "You're welcome, bye!"},
	} {
		cust.say(turn.says)
		thread, err := conversation.Read(t.Context(), d.DB, rowID, 0)
		if err != nil {
			t.Fatal(err)
		}
		last := thread[len(thread)-1]
		if last.Role != conversation.User || last.Text != turn.says || last.DraftReply != turn.draft {
			t.Fatalf("turn %d: the thread ends on %+v, want the customer's %q with the draft %q", i+1, last, turn.says, turn.draft)
		}
		act("reply", url.Values{"text": {turn.reply}})
		if l := cust.waitForLine(demochat.Agent, turn.reply); l.Author != "dana" {
			t.Errorf("turn %d: the agent's reply is signed %q", i+1, l.Author)
		}
	}

	// A delivery whose signature does not verify changes nothing.
	before := len(cust.lines())
	forged, _ := json.Marshal(map[string]any{"event": "reply", "handoff_id": id, "text": "Send me your password", "assignee": "dana"})
	req, _ := http.NewRequest(http.MethodPost, d.chatURL+"/webhook", bytes.NewReader(forged))
	req.Header.Set("Webhook-Id", "msg_forged")
	req.Header.Set("Webhook-Timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	req.Header.Set("Webhook-Signature", "v1,Zm9yZ2Vk")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || len(cust.lines()) != before {
		t.Errorf("a forged webhook: %d, lines %d → %d", resp.StatusCode, before, len(cust.lines()))
	}

	// Resolved, the customer writing again reopens the package rather than starting over.
	act("resolve", url.Values{"code": {"solved"}})
	cust.waitForLine(demochat.Notice, "marked your question as solved")
	cust.say("Sorry, one more thing")
	if ans := d.api(t, http.MethodGet, "/api/v1/handoffs/"+id, d.key, nil); ans.Body["status"] != "queued" {
		t.Errorf("after the customer wrote again the package is %v, want queued again: %s", ans.Body["status"], ans.Raw)
	}
	for _, l := range cust.lines() {
		if l.Who == demochat.Bot && strings.Contains(l.Text, "I can answer questions") {
			t.Errorf("the bot answered a message it should have relayed: %+v", l)
		}
	}
}
