package demochat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The bot's rules: a few questions it answers itself, and two words that hand the customer to a
// person. They are words, not a model, so that a newcomer can predict every answer.

// handoffWords hand the conversation to a person, each with the package's trigger.
var handoffWords = []struct{ word, trigger string }{
	{"refund", "policy_boundary"},
	{"human", "user_request"},
}

// answers are what the bot says to a message that has one of the words (a word starting so; a
// trailing space asks for the whole word).
var answers = []struct {
	words  []string
	answer string
}{
	{[]string{"hour", "open"}, "We're open Monday to Friday, 9:00 to 17:00 CET."},
	{[]string{"price", "plan", "cost"}, "Basic is $9 a month and Pro is $29 a month; you can cancel either at any time."},
	{[]string{"deliver", "shipping", "ship "}, "Orders ship within 2 business days and arrive 3 to 5 days later."},
	{[]string{"hello", "hi ", "hey "}, "Hi! I'm the demo bot. Ask me about opening hours, plans or delivery, ask for a refund, or type \"human\" to talk to a person."},
}

const fallback = "I can answer questions about opening hours, plans and delivery. For anything else, type \"human\" and I'll pass you to a person."

// drafts are the bot's drafts of the agent's answer to a customer message after the handoff: the
// co-pilot offers each as the draft of its turn.
var drafts = []struct {
	words []string
	draft string
}{
	{[]string{"card", "account"}, "The refund goes back to the card you paid with."},
	{[]string{"how long", "when", "days"}, "Refunds show on your statement within 3 to 5 business days."},
	{[]string{"thank"}, "You're welcome! Is there anything else I can do for you?"},
	{[]string{"order", "number"}, "Thank you, I've found the order and I'm looking at it now."},
}

const fallbackDraft = "Thanks for the details, I'm looking into this for you now."

// words is text in lower case with its punctuation as spaces, to find whole words in.
func words(text string) string {
	return " " + strings.Join(strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9')
	}), " ") + " "
}

// has reports whether a word of text starts with w.
func has(text string, w string) bool { return strings.Contains(text, " "+w) }

// handoffTrigger is the trigger of a customer message that asks for a person, "" for none.
func handoffTrigger(text string) string {
	t := words(text)
	for _, h := range handoffWords {
		if has(t, h.word) {
			return h.trigger
		}
	}
	return ""
}

// answer is the bot's own answer to a customer message it keeps.
func answer(text string) string {
	t := words(text)
	for _, a := range answers {
		for _, w := range a.words {
			if has(t, w) {
				return a.answer
			}
		}
	}
	return fallback
}

// draftFor is the bot's draft of the agent's answer to a customer message.
func draftFor(text string) string {
	t := words(text)
	for _, d := range drafts {
		for _, w := range d.words {
			if has(t, w) {
				return d.draft
			}
		}
	}
	return fallbackDraft
}

// turn is a turn of the conversation as the package's transcript carries it.
type turn struct {
	Role    string    `json:"role"`
	Content string    `json:"content"`
	At      time.Time `json:"at"`
}

// packageFor is the handoff package of a chat whose customer asked for a person: every field a
// support bot knows at that point, so that the desk shows a newcomer what a full package is.
func packageFor(c *chat, queue, trigger, asked string, transcript []turn, now time.Time) map[string]any {
	refund := trigger == "policy_boundary"
	problem := "The customer asks to talk to a person: \"" + asked + "\""
	next := "Ask the customer what they need and answer them here."
	draft := "Hi, I'm a person from the support team. How can I help you today?"
	reason := "The customer asked for a person."
	questions := []string{"What does the customer need help with?"}
	if refund {
		problem = "The customer asks for a refund, which the bot may not grant: \"" + asked + "\""
		next = "Confirm the order and refund it if it is within the 30 days of the refund policy."
		draft = "Hi, I'm sorry about the trouble. Which order would you like refunded? I'll take care of it."
		reason = "Refunds need a person (policy boundary)."
		questions = []string{"Which order is the refund for?", "Is the order within the 30 days of the refund policy?"}
	}
	return map[string]any{
		"schema_version": "1.0",
		"handoff_id":     fmt.Sprintf("demo_%s_%d", c.id, c.handoffs),
		"source_run_id":  "demo-run-" + c.id,
		"source_agent":   "demo-bot",
		"target_profile": queue,
		"transfer_mode":  "cold",
		"trigger":        trigger,
		"priority":       "normal",
		"reason":         reason,
		"contact": map[string]any{
			"id": "demo-customer-" + c.id, "display_name": "Demo Customer", "email": "customer-" + c.id + "@example.com",
		},
		"user_verified":         false,
		"problem_statement":     problem,
		"structured_entities":   map[string]any{"chat_id": c.id, "channel": "demo chat"},
		"attempted_actions":     []map[string]any{{"tool": "faq_lookup", "result": "no answer the bot may give on its own", "ok": false, "at": now}},
		"open_questions":        questions,
		"recommended_next_step": next,
		"draft_reply":           draft,
		"citations":             []string{"policy://refunds#30-days"},
		"sentiment":             "neutral",
		"locale":                "en",
		"channel_origin":        "web",
		"channel_target":        "web",
		"transcript":            transcript,
	}
}

// desk is the desk's public bot API, over HTTP with the bot's key: all the demo bot uses.
type desk struct {
	base, key string
	client    *http.Client
}

// deskError is a refusal of the desk: its status and what it said was wrong.
type deskError struct {
	Status  int
	Message string
}

func (e *deskError) Error() string {
	return fmt.Sprintf("the desk answered %d: %s", e.Status, e.Message)
}

// call sends body to the bot API and decodes a 2xx answer into out.
func (d desk) call(ctx context.Context, method, path string, body, out any) error {
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, method, d.base+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+d.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		var refusal struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(answer, &refusal) != nil || refusal.Error == "" {
			refusal.Error = strings.TrimSpace(string(answer))
		}
		return &deskError{Status: resp.StatusCode, Message: refusal.Error}
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(answer, out)
}

// handoff is the desk's answer to a package: where the customer waits.
type handoff struct {
	HandoffID string `json:"handoff_id"`
	Status    string `json:"status"`
	Queue     string `json:"queue"`
	Position  int    `json:"position"`
}

func (d desk) handOff(ctx context.Context, pkg map[string]any) (handoff, error) {
	var h handoff
	return h, d.call(ctx, http.MethodPost, "/api/v1/handoffs", pkg, &h)
}

// relay posts the customer's message to the package's thread, with the bot's fresh draft.
func (d desk) relay(ctx context.Context, handoffID, messageID, text, draft string, at time.Time) error {
	return d.call(ctx, http.MethodPost, "/api/v1/handoffs/"+url.PathEscape(handoffID)+"/messages", map[string]any{
		"message_id": messageID, "role": "user", "text": text, "at": at, "draft_reply": draft,
	}, nil)
}
