package handoff

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/webhook"
)

// change is one state change of a package, as the live desk, the audit log and the bot learn it.
type change struct {
	HandoffID int64  // the row id
	PublicID  string // the bot's handoff_id
	QueueID   int64
	Queue     string
	// FromQueueID is the queue the package left, when the change moved it: pages of that queue
	// drop its card.
	FromQueueID int64
	APIKeyID    int64
	// Kind is the event's name: a webhook event (queued, accepted, ...) or a desk-only one
	// (reserved, released, moved) that bots are not told about.
	Kind      string
	Status    Status
	ActorUser *int64
	ActorBot  *int64
	Reason    string
	Note      string
	Outcome   string
	Assignee  string
	Detail    map[string]any
	At        time.Time
}

// queueChanges adds changes to a batch the caller sends inside the changes' transaction: the
// events that move every open browser, the audit rows, and, for the changes a bot hears about,
// their webhooks. All of them commit or roll back with the changes, in the caller's round trip,
// as one insert per table whatever their number: a statement's fixed cost in PostgreSQL
// outweighs a small row's.
func queueChanges(b *pgx.Batch, cs ...change) error {
	var events struct {
		queues, handoffs []int64
		kinds            []string
		at               []time.Time
	}
	addEvent := func(queueID, handoffID int64, kind string, at time.Time) {
		events.queues = append(events.queues, queueID)
		events.handoffs = append(events.handoffs, handoffID)
		events.kinds = append(events.kinds, kind)
		events.at = append(events.at, at)
	}
	audit := struct {
		at               []time.Time
		users, bots      []*int64
		actions, details []string
		handoffs         []int64
	}{}
	var hooks []webhook.Event
	for _, c := range cs {
		addEvent(c.QueueID, c.HandoffID, c.Kind, c.At)
		if c.FromQueueID != 0 && c.FromQueueID != c.QueueID {
			addEvent(c.FromQueueID, c.HandoffID, "moved", c.At)
		}
		detail, err := c.detail()
		if err != nil {
			return err
		}
		audit.at = append(audit.at, c.At)
		audit.users = append(audit.users, c.ActorUser)
		audit.bots = append(audit.bots, c.ActorBot)
		audit.actions = append(audit.actions, c.Kind)
		audit.handoffs = append(audit.handoffs, c.HandoffID)
		audit.details = append(audit.details, string(detail))
		if webhook.IsEvent(c.Kind) {
			hooks = append(hooks, webhook.Event{
				HandoffID: c.PublicID, APIKeyID: c.APIKeyID, Event: c.Kind, Status: string(c.Status), Queue: c.Queue,
				Reason: c.Reason, Note: c.Note, Outcome: c.Outcome, Assignee: c.Assignee, OccurredAt: c.At,
			})
		}
	}
	b.Queue(`INSERT INTO desk_events (queue_id, handoff_id, kind, created_at)
		SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[])`,
		events.queues, events.handoffs, events.kinds, events.at)
	b.Queue(`INSERT INTO audit_log (at, actor_user, actor_bot, action, handoff_id, detail)
		SELECT * FROM unnest($1::timestamptz[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[], $6::text[]::jsonb[])`,
		audit.at, audit.users, audit.bots, audit.actions, audit.handoffs, audit.details)
	if len(hooks) == 0 {
		return nil
	}
	return webhook.Queue(b, hooks...)
}

// detail is the audit row's account of c: the status it left the package in, and whatever the
// actor gave as reason, note or outcome.
func (c change) detail() ([]byte, error) {
	detail := map[string]any{"status": c.Status}
	for k, v := range c.Detail {
		detail[k] = v
	}
	for k, v := range map[string]string{"reason": c.Reason, "note": c.Note, "outcome": c.Outcome, "queue": c.Queue} {
		if v != "" {
			detail[k] = v
		}
	}
	return json.Marshal(detail)
}

// record writes one change inside tx.
func record(ctx context.Context, tx pgx.Tx, c change) error {
	return apply(ctx, tx, "", nil, c)
}

// apply runs the statement that makes a change (if any) and records the change, in one round trip.
func apply(ctx context.Context, tx pgx.Tx, update string, args []any, c change) error {
	b := &pgx.Batch{}
	if update != "" {
		b.Queue(update, args...)
	}
	if err := queueChanges(b, c); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}
