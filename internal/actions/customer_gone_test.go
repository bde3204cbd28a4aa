package actions

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/handoff"
)

// On the test clock: an agent's reply the customer leaves unanswered for the queue's
// customer_gone resolves the package as customer_unreachable, once however many instances sweep,
// and frees the agent; a customer who answers in time starts the wait again from the agent's next
// reply. The bot hears resolved with where the thread stood.
func TestCustomerGoneResolvesOnceAndFreesTheAgent(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 1, "billing")
	if _, err := d.db.Exec(ctx, `UPDATE queues SET customer_gone = '30 minutes' WHERE name = 'billing'`); err != nil {
		t.Fatal(err)
	}
	id := d.submit(t, "billing", nil)
	if _, err := d.actions.Next(ctx, alex, "billing"); err != nil {
		t.Fatal(err)
	}
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	sweep := func(what string, want handoff.Status) {
		t.Helper()
		if _, err := d.actions.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		if got, _ := d.status(t, id); got != want {
			t.Fatalf("%s: %s, want %s", what, got, want)
		}
	}
	d.clock.Advance(2 * time.Hour)
	sweep("no reply waits for the customer yet", handoff.StatusAccepted)
	if err := d.actions.Reply(ctx, alex, id, reply(t, "Could you send me the order number?")); err != nil {
		t.Fatal(err)
	}
	d.clock.Advance(29 * time.Minute)
	sweep("29 minutes after the reply", handoff.StatusAccepted)
	if _, err := d.actions.PostMessage(ctx, d.sender.APIKeyID, d.sender.QueueIDs, id,
		conversation.Incoming{MessageID: "m1", Role: conversation.User, Text: "It is 4417."}); err != nil {
		t.Fatal(err)
	}
	d.clock.Advance(5 * time.Minute)
	sweep("the customer answered", handoff.StatusAccepted)
	if err := d.actions.Reply(ctx, alex, id, reply(t, "Refunded. Anything else?")); err != nil {
		t.Fatal(err)
	}
	d.clock.Advance(31 * time.Minute)

	// Three instances sweep at once: one resolves it.
	var wg sync.WaitGroup
	for range 3 {
		instance, _ := d.instance(t)
		wg.Go(func() {
			if _, err := instance.Sweep(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var status, outcome string
	var resolved, hooks int
	var lastSeq, replySeq int
	if err := d.db.QueryRow(ctx, `
		SELECT h.status, h.outcome, (h.hand_back->>'last_seq')::int, (h.hand_back->'last_reply'->>'seq')::int,
			(SELECT count(*) FROM events e WHERE e.handoff_id = h.id AND e.kind = 'resolved'),
			(SELECT count(*) FROM webhook_outbox o WHERE o.handoff_id = h.handoff_id AND o.event = 'resolved'
				AND o.payload->>'outcome' = 'customer_unreachable' AND (o.payload->'hand_back'->>'last_seq')::int = 3)
		FROM handoffs h WHERE h.handoff_id = $1`, id).Scan(&status, &outcome, &lastSeq, &replySeq, &resolved, &hooks); err != nil {
		t.Fatal(err)
	}
	if status != "resolved" || outcome != handoff.OutcomeCustomerUnreachable || resolved != 1 || hooks != 1 || lastSeq != 3 || replySeq != 3 {
		t.Errorf("the customer gone: %s %s, %d resolved events, %d webhooks, hand-back at %d (reply %d)", status, outcome, resolved, hooks, lastSeq, replySeq)
	}
	// Alex's one seat is free again.
	next := d.submit(t, "billing", nil)
	if got, err := d.actions.Next(ctx, alex, "billing"); err != nil || got != next {
		t.Errorf("alex's next after the customer left: %q %v, want %s", got, err, next)
	}
}
