package timeline

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/events"
)

// Every kind a package's log holds reads as words, with what a person wrote kept apart for masking.
func TestWordsPerKind(t *testing.T) {
	t.Parallel()
	d := func(kv ...any) map[string]any {
		m := map[string]any{}
		for pair := range slices.Chunk(kv, 2) {
			m[pair[0].(string)] = pair[1]
		}
		return m
	}
	alex := func(k events.Kind, detail map[string]any) Entry { return Entry{Kind: k, Actor: "Alex", Detail: detail} }
	for _, tc := range []struct {
		e          Entry
		text, note string
	}{
		{Entry{Kind: events.Queued, Bot: "harbor_bot", Detail: d("queue", "billing_t2", "reason", "policy_boundary", "status", "queued")},
			"Handed over by the bot harbor_bot to billing_t2 (policy boundary)", ""},
		{alex(events.Reserved, d("status", "reserved")), "Reserved by Alex", ""},
		{Entry{Kind: events.Message, Bot: "harbor_bot", Detail: d("seq", 3, "role", "user")}, "The customer wrote again", ""},
		{Entry{Kind: events.Message, Bot: "harbor_bot", Detail: d("seq", 1, "role", "assistant")}, "The bot wrote to the customer", ""},
		{Entry{Kind: events.Reopened, Bot: "harbor_bot", Detail: d("seq", 4, "reason", "customer_wrote_again")},
			"Reopened: the customer wrote again after the resolve", ""},
		{Entry{Kind: events.Released, Detail: d("status", "queued")}, "Back in the queue: the reservation ran out", ""},
		{Entry{Kind: events.Released, Actor: "Ada", Detail: d("reason", "assignee_disabled")}, "Back in the queue: its holder's account was disabled", ""},
		{alex(events.Accepted, d("status", "accepted")), "Accepted by Alex", ""},
		{alex(events.Rejected, d("reason", "not my area", "from_queue", "billing_t2", "queue", "billing_t2")), "Rejected by Alex", "not my area"},
		{alex(events.Rejected, d("reason", "wrong team", "from_queue", "billing_t2", "queue", "tech_t2", "needs_supervisor", true)),
			"Rejected by Alex, sent to tech_t2; it now waits for a supervisor", "wrong team"},
		{alex(events.Transferred, d("from_queue", "billing_t2", "to_queue", "tech_t2", "note", "router fault")),
			"Transferred by Alex from billing_t2 to tech_t2", "router fault"},
		{Entry{Kind: events.Transferred, Actor: "Ada", Detail: d("from_queue", "old", "to_queue", "new", "reason", "queue_disabled")},
			"Moved from old to new: old was disabled", ""},
		{alex(events.ReturnedToBot, d("reason", "needs_more_info", "note", "ask for the invoice")),
			"Returned to the bot by Alex: needs more info", "ask for the invoice"},
		{alex(events.Resolved, d("outcome", "solved")), "Resolved by Alex: solved", ""},
		{alex(events.Resolved, d("outcome", "refunded", "amount", "240.00", "currency", "USD", "note", "paid")),
			"Resolved by Alex: refunded 240.00 USD", "paid"},
		{Entry{Kind: events.Expired, Detail: d("outcome", "expired")}, "Expired: nobody took it in time", ""},
		{Entry{Kind: events.Canceled, Bot: "harbor_bot", Detail: d("outcome", "canceled")}, "Canceled by the bot harbor_bot: the customer left", ""},
		{alex(events.Reply, d("tags", []any{"tone"})), "Reply sent by Alex", ""},
		{alex(events.Noted, d("note", "Customer prefers email")), "Note by Alex", "Customer prefers email"},
		{Entry{Kind: events.Reassigned, Actor: "Sam", Subject: "Blake", Detail: d("from", "Alex", "to", "Blake")}, "Reassigned by Sam from Alex to Blake", ""},
		{Entry{Kind: events.Reassigned, Actor: "Sam", Detail: d("from", "Alex", "to", "Blake")}, "Reassigned by Sam from Alex to Blake", ""},
		{Entry{Kind: events.Reassigned, Actor: "Sam", Subject: "Sam", Detail: d("from", "Alex", "to", "Sam")}, "Taken over by Sam from Alex", ""},
		{Entry{Kind: events.Offered, Subject: "Bea Agent", Detail: d("agent", "Bea Agent")}, "Ringing Bea Agent", ""},
		{Entry{Kind: events.OfferEnded, Subject: "Bea Agent", Rang: 20 * time.Second, Detail: d("outcome", "timed_out")},
			"Rang Bea Agent · 20s, no answer", ""},
		{Entry{Kind: events.OfferEnded, Detail: d("outcome", "declined", "agent", "Bea Agent")}, "Rang Bea Agent, declined", ""},
		{Entry{Kind: events.OfferEnded, Subject: "Bea Agent", Rang: 125 * time.Second, Detail: d("outcome", "withdrawn")},
			"Rang Bea Agent · 2m 05s, went offline", ""},
		{Entry{Kind: events.WarmTimeout, Detail: d("reason", "no_agent_online")}, "Warm transfer ended with nobody taking it: no agent was online", ""},
		{alex(events.ApprovalRequested, d("amount", "240.00", "currency", "USD", "note", "double charge")),
			"Refund of 240.00 USD requested by Alex", "double charge"},
		{Entry{Kind: events.ApprovalGranted, Actor: "Sam", Detail: d("amount", "240.00", "currency", "USD", "note", "ok per policy")},
			"Refund of 240.00 USD approved by Sam", "ok per policy"},
		{Entry{Kind: events.ApprovalDenied, Actor: "Sam", Detail: d("amount", "240.00", "currency", "USD", "note", "over the limit")},
			"Refund of 240.00 USD denied by Sam", "over the limit"},
		{Entry{Kind: events.ApprovalExpired, Detail: d("amount", "240.00", "currency", "USD")},
			"Refund of 240.00 USD: the approval expired, no supervisor decided in time", ""},
		{alex(events.ApprovalWithdrawn, d("amount", "240.00", "currency", "USD")), "Refund of 240.00 USD: approval request withdrawn by Alex", ""},
		{Entry{Kind: events.ApprovalWithdrawn, Detail: d("amount", "9.50", "currency", "EUR")}, "Refund of 9.50 EUR: approval request withdrawn", ""},
	} {
		got := Words(tc.e)
		if got.Text != tc.text || got.Note != tc.note {
			t.Errorf("%s: %q / %q, want %q / %q", tc.e.Kind, got.Text, got.Note, tc.text, tc.note)
		}
	}
}

// No kind, known or added later, reads as a code: whatever a line says is words.
func TestWordsNeverSnakeCase(t *testing.T) {
	t.Parallel()
	for _, k := range events.Kinds() {
		l := Words(Entry{Kind: k, Actor: "Alex", Detail: map[string]any{"reason": "needs_more_info", "outcome": "timed_out",
			"queue": "billing", "from_queue": "billing", "to_queue": "tech"}})
		if l.Text == "" || strings.Contains(l.Text, "_") {
			t.Errorf("%s reads %q", k, l.Text)
		}
	}
}

// A ring that ended shows once, as its end, with how long it rang; one still ringing shows as its
// start. Lines are newest first.
func TestLinesFoldRings(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	es := []Entry{
		{Seq: 1, At: t0, Kind: events.Queued, Bot: "harbor_bot", Detail: map[string]any{"queue": "billing_t2"}},
		{Seq: 2, At: t0, Kind: events.Offered, Subject: "Bea Agent"},
		{Seq: 3, At: t0.Add(20 * time.Second), Kind: events.OfferEnded, Subject: "Bea Agent", Detail: map[string]any{"outcome": "timed_out"}},
		{Seq: 4, At: t0.Add(20 * time.Second), Kind: events.Offered, Subject: "Cy Agent"},
	}
	var got []string
	for _, l := range Lines(es) {
		got = append(got, l.Text)
	}
	want := []string{"Ringing Cy Agent", "Rang Bea Agent · 20s, no answer", "Handed over by the bot harbor_bot to billing_t2"}
	if !slices.Equal(got, want) {
		t.Errorf("lines %q, want %q", got, want)
	}
}
