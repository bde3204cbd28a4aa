package server

import (
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/webhook"
	"github.com/handoffdesk/desk/views"
)

// Each state of a reply's webhook reads as the agent sees it under the reply, word for word:
// "Sent to the customer" only once the bot took it, the attempt and the error while it retries,
// how many attempts a failure took, and why nothing was sent without a webhook URL.
func TestDeliveryStatesInWords(t *testing.T) {
	t.Parallel()
	took := time.Date(2026, 12, 7, 14, 3, 9, 0, time.FixedZone("CET", 3600))
	next := time.Date(2026, 12, 7, 13, 4, 15, 0, time.UTC)
	for _, c := range []struct {
		name string
		d    webhook.Delivery
		want views.Delivery
	}{
		{"no outbox row", webhook.Delivery{},
			views.Delivery{State: "queued", Words: "Queued for the bot."}},
		{"pending, not tried yet", webhook.Delivery{ID: 1, State: webhook.StatePending},
			views.Delivery{State: "queued", Words: "Queued for the bot."}},
		{"claimed, first attempt under way", webhook.Delivery{ID: 1, State: webhook.StatePending, Attempts: 1},
			views.Delivery{State: "sending", Words: "Sending to the bot…"}},
		{"delivered", webhook.Delivery{ID: 1, State: webhook.StateDelivered, Attempts: 2, DeliveredAt: &took},
			views.Delivery{State: "delivered", Words: "Sent to the customer: the bot took it at 13:03:09 UTC."}},
		{"retrying after an HTTP error", webhook.Delivery{ID: 1, State: webhook.StatePending, Attempts: 1, LastStatus: 503, NextAttemptAt: next},
			views.Delivery{State: "retrying", Words: "Retrying: attempt 1 failed (the bot answered HTTP 503); next try at 13:04:15 UTC."}},
		{"retrying after no answer", webhook.Delivery{ID: 1, State: webhook.StatePending, Attempts: 3, LastError: "connection refused", NextAttemptAt: next},
			views.Delivery{State: "retrying", Words: "Retrying: attempt 3 failed (no answer: connection refused); next try at 13:04:15 UTC."}},
		{"failed", webhook.Delivery{ID: 1, State: webhook.StateDead, Attempts: 8, LastStatus: 500},
			views.Delivery{State: "failed", Words: "Failed: the bot did not take it after 8 attempts (the bot answered HTTP 500). An admin can send it again from the bot's deliveries."}},
		{"failed with no answer", webhook.Delivery{ID: 1, State: webhook.StateDead, Attempts: 8, LastError: "timeout"},
			views.Delivery{State: "failed", Words: "Failed: the bot did not take it after 8 attempts (no answer: timeout). An admin can send it again from the bot's deliveries."}},
		{"no webhook URL", webhook.Delivery{ID: 1, State: webhook.StateNoEndpoint},
			views.Delivery{State: "not_sent", Words: "Not sent: the bot's key has no webhook URL, so the bot reads replies with GET …/messages."}},
	} {
		if got := deliveryOf(c.d); got != c.want {
			t.Errorf("%s: %+v\nwant %+v", c.name, got, c.want)
		}
	}
}
