package audit

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/events"
)

// detail is a detail as the trail reads it back from the log: JSON numbers are float64.
func detail(t *testing.T, d map[string]any) map[string]any {
	t.Helper()
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Each kind reads as a sentence naming who did what, with each change before → after; the
// log's keys and JSON never show.
func TestSummaryPerKind(t *testing.T) {
	t.Parallel()
	queues := map[int64]string{3: "billing", 4: "billing_t2"}
	const dana, ada = "dana@example.com", "ada@example.com"
	cases := []struct {
		kind                  events.Kind
		actor, queue, subject string
		detail                map[string]any
		want                  string
	}{
		{events.Queued, "bot:tier1", "billing_t2", "", map[string]any{"status": "queued", "reason": "policy_boundary", "queue": "billing_t2"},
			"Bot tier1 sent the package to billing_t2 (trigger policy boundary)"},
		{events.Reserved, dana, "billing_t2", "", map[string]any{"status": "reserved", "queue": "billing_t2", "reserved_until": "2026-06-01T10:02:03.123456+00:00"},
			"dana@example.com reserved the package in billing_t2 until 2026-06-01 10:02:03 UTC"},
		{events.Released, "", "billing_t2", "", map[string]any{"status": "queued", "queue": "billing_t2"},
			"The reservation ran out: the package went back to billing_t2"},
		{events.Released, ada, "billing_t2", "", map[string]any{"status": "queued", "queue": "billing_t2", "reason": "assignee_disabled", "from_assignee": 7},
			"The package went back to billing_t2: its holder was disabled"},
		{events.Accepted, dana, "billing_t2", "", map[string]any{"status": "accepted", "queue": "billing_t2"},
			"dana@example.com accepted the package in billing_t2"},
		{events.Rejected, dana, "billing", "", map[string]any{"status": "queued", "reason": "wrong_queue", "rejections": 2, "needs_supervisor": true, "from_queue": "billing_t2", "queue": "billing"},
			"dana@example.com rejected the package: wrong_queue; queue billing_t2 → billing; rejection 2; it needs a supervisor"},
		{events.Transferred, dana, "billing", "", map[string]any{"status": "queued", "from_queue": "billing_t2", "to_queue": "billing", "note": "VIP"},
			"dana@example.com transferred the package: queue billing_t2 → billing. Note: “VIP”"},
		{events.ReturnedToBot, dana, "billing_t2", "", map[string]any{"status": "returned_to_bot", "reason": "needs_more_info", "outcome": "needs_more_info", "note": "ask for the invoice"},
			"dana@example.com returned the package to the bot: needs more info. Note: “ask for the invoice”"},
		{events.Resolved, dana, "billing_t2", "", map[string]any{"status": "resolved", "outcome": "refunded", "reason": "refunded", "amount": "40.00", "currency": "EUR", "requested_amount": "50.00", "requested_currency": "EUR"},
			"dana@example.com resolved the package as refunded, paying back 40.00 EUR of 50.00 EUR asked"},
		{events.Expired, "", "billing_t2", "", map[string]any{"status": "expired", "outcome": "expired", "queue": "billing_t2"},
			"The package expired unclaimed in billing_t2"},
		{events.Canceled, "bot:tier1", "billing_t2", "", map[string]any{"status": "canceled", "outcome": "canceled"},
			"Bot tier1 canceled the package: the customer left"},
		{events.Presence, "", "", "", map[string]any{},
			"Someone's presence changed (available, break, away or offline)"},
		{events.Reply, dana, "billing_t2", "", map[string]any{"status": "accepted", "tags": []string{"tone", "facts"}},
			"dana@example.com sent a reply to the customer (tags tone, facts)"},
		{events.Offered, "", "billing_t2", dana, map[string]any{"status": "queued", "agent": "Dana", "until": "2026-06-01T10:00:30Z"},
			"The desk rang Dana until 2026-06-01 10:00:30 UTC"},
		{events.OfferEnded, "", "billing_t2", dana, map[string]any{"status": "queued", "agent": "Dana", "outcome": "timed_out"},
			"The ring of Dana ended: timed out"},
		{events.WarmTimeout, "", "billing_t2", "", map[string]any{"status": "queued", "reason": "no_agent_online"},
			"Nobody took the warm transfer (no agent online): it waits as a cold one"},
		{events.ApprovalRequested, dana, "billing_t2", "", map[string]any{"status": "awaiting_approval", "approval_id": 9, "amount": "120.00", "currency": "EUR"},
			"dana@example.com asked a supervisor to approve a refund of 120.00 EUR"},
		{events.ApprovalGranted, "sam@example.com", "billing_t2", "", map[string]any{"status": "accepted", "approval_id": 9, "amount": "120.00", "currency": "EUR", "note": "ok once"},
			"sam@example.com approved the refund of 120.00 EUR. Note: “ok once”"},
		{events.ApprovalDenied, "sam@example.com", "billing_t2", "", map[string]any{"status": "accepted", "approval_id": 9, "amount": "120.00", "currency": "EUR", "note": "policy 4.2"},
			"sam@example.com denied the refund of 120.00 EUR. Note: “policy 4.2”"},
		{events.ApprovalExpired, "", "billing_t2", "", map[string]any{"status": "accepted", "approval_id": 9, "amount": "120.00", "currency": "EUR"},
			"The request to approve a refund of 120.00 EUR expired"},
		{events.ApprovalWithdrawn, ada, "billing_t2", "", map[string]any{"status": "queued", "approval_id": 9, "amount": "120.00", "currency": "EUR", "reason": "assignee_disabled"},
			"The request to approve a refund of 120.00 EUR was withdrawn: assignee disabled"},
		{events.SignedOut, dana, "", dana, map[string]any{}, "dana@example.com signed out"},
		{events.UserDisabled, ada, "", dana, map[string]any{"returned_packages": 3},
			"ada@example.com disabled dana@example.com: their sessions ended and 3 held packages went back to their queues"},
		{events.RoleChanged, ada, "", dana, map[string]any{"role": "supervisor", "from_role": "agent"},
			"ada@example.com changed the role of dana@example.com: agent → supervisor"},
		{events.MemberRemoved, ada, "billing", dana, map[string]any{"queue": "billing"},
			"ada@example.com took dana@example.com off billing"},
		{events.UserCreated, ada, "", dana, map[string]any{"email": dana, "name": "Dana", "role": "agent", "capacity": 3, "queues": []int64{3, 4}},
			"ada@example.com created dana@example.com (Dana, agent, capacity 3, queues billing, billing_t2)"},
		{events.UserChanged, ada, "", dana, map[string]any{"name": [2]string{"Dan", "Dana"}, "capacity": [2]int{3, 5}, "queues_added": []int64{4}},
			"ada@example.com changed dana@example.com: added to billing_t2; name Dan → Dana; capacity 3 → 5"},
		{events.UserEnabled, ada, "", dana, map[string]any{}, "ada@example.com enabled dana@example.com"},
		{events.PasswordReset, ada, "", dana, map[string]any{},
			"ada@example.com reset the password of dana@example.com: their sessions ended"},
		{events.PasswordChanged, dana, "", dana, map[string]any{}, "dana@example.com chose a new password"},
		{events.QueueCreated, ada, "vip", "", map[string]any{"settings": map[string]any{"name": "vip", "ttl": "24h"}, "queue": "vip"},
			"ada@example.com created queue vip"},
		{events.QueueChanged, ada, "vip", "", map[string]any{"changed": map[string]any{"ttl": [2]string{"24h", "12h"}, "enabled": [2]bool{true, false}}},
			"ada@example.com changed queue vip: enabled yes → no; ttl 24h → 12h"},
		{events.APIKeyCreated, ada, "", "", map[string]any{"api_key_id": 2, "name": "tier1", "prefix": "hdk_ab12", "queues": []int64{4}, "webhook_url": "https://bot.example/hook"},
			"ada@example.com created bot key tier1 (hdk_ab12…) for billing_t2, webhooks to https://bot.example/hook"},
		{events.APIKeyChanged, ada, "", "", map[string]any{"api_key_id": 2, "name": "tier1", "queues": [2][]int64{{4}, {3, 4}}, "webhook_url": [2]string{"", "https://bot.example/hook"}},
			"ada@example.com changed bot key tier1: queues billing_t2 → billing, billing_t2; webhook URL none → https://bot.example/hook"},
		{events.APIKeyRevoked, ada, "", "", map[string]any{"api_key_id": 2, "name": "tier1", "prefix": "hdk_ab12"},
			"ada@example.com revoked bot key tier1 (hdk_ab12…)"},
		{events.WebhookRedelivered, ada, "", "", map[string]any{"api_key_id": 2, "delivery_id": 31, "event_id": "evt_1", "state": [2]string{"dead", "pending"}},
			"ada@example.com sent webhook delivery 31 again: dead → pending"},
		{events.WebhookSecretRotated, ada, "", "", map[string]any{"api_key_id": 2, "key": "tier1", "overlap": "24h0m0s", "previous_until": "2026-06-02T10:00:00Z"},
			"ada@example.com rotated the webhook signing secret of bot key tier1; the old one also signs until 2026-06-02 10:00:00 UTC"},
		{events.SSOSettingsChanged, ada, "", "", map[string]any{"unknown_emails": [2]string{"refuse", "create"}},
			"ada@example.com changed the single sign-on settings: unknown emails refuse → create"},
		{events.Message, "bot:tier1", "billing_t2", "", map[string]any{"status": "accepted", "seq": 3, "role": "user"},
			"Bot tier1 relayed the customer's message 3 of the conversation"},
		{events.Reopened, "bot:tier1", "billing_t2", "", map[string]any{"status": "queued", "seq": 4, "reason": "customer_wrote_again"},
			"The customer wrote again (message 4): Bot tier1 reopened the package in billing_t2"},
		{events.ReplyDelivery, "", "billing_t2", "", map[string]any{"state": "delivered"},
			"The desk recorded where a reply's webhook stands: delivered"},
		{events.Viewing, "", "", "", map[string]any{}, "Who has the package open changed"},
		{events.Noted, dana, "billing_t2", "", map[string]any{"status": "accepted", "note": "called back"},
			"dana@example.com added an internal note. Note: “called back”"},
		{events.Reassigned, ada, "billing_t2", "", map[string]any{"status": "accepted", "from": "Dana", "to": "Bea"},
			"ada@example.com reassigned the package: Dana → Bea"},
	}
	covered := map[events.Kind]bool{}
	for _, c := range cases {
		covered[c.kind] = true
		e := Entry{Kind: c.kind, Actor: c.actor, Queue: c.queue, Subject: c.subject, Detail: detail(t, c.detail)}
		if got := Summary(e, queues); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.kind, got, c.want)
		}
	}
	for _, k := range events.Kinds() {
		if !covered[k] {
			t.Errorf("kind %s has no sentence tested", k)
		}
	}
}

// A detail key no sentence words, and a kind the summary does not know, still show in words.
func TestSummaryShowsWhatItDoesNotWord(t *testing.T) {
	t.Parallel()
	e := Entry{Kind: events.Accepted, Actor: "dana@example.com", Queue: "billing",
		Detail: detail(t, map[string]any{"status": "accepted", "seconds_waited": 12.5})}
	if got, want := Summary(e, nil), "dana@example.com accepted the package in billing: seconds waited 12.5"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	e = Entry{Kind: "escalated", Actor: "sam@example.com", Detail: detail(t, map[string]any{"to": "Lee", "from": "Dana"})}
	if got, want := Summary(e, nil), "sam@example.com: escalated: from Dana; to Lee"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	e = Entry{Kind: events.UserCreated, Subject: "dana@example.com", Detail: detail(t, map[string]any{"queues": []int64{99}, "role": "agent", "name": "D", "capacity": 1})}
	if got := Summary(e, nil); !strings.Contains(got, "queues 99") || !strings.HasPrefix(got, "The desk created") {
		t.Errorf("a queue the summary cannot name shows as its id, and the command line as the desk: %s", got)
	}
}
