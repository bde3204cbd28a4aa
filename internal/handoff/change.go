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

// queueChange adds c to a batch the caller sends inside the change's transaction: the event that
// moves every open browser, the audit row, and, for the changes a bot hears about, its webhook.
// All of them commit or roll back with the change, in one round trip.
func queueChange(b *pgx.Batch, c change) error {
	detail := map[string]any{"status": c.Status}
	for k, v := range c.Detail {
		detail[k] = v
	}
	for k, v := range map[string]string{"reason": c.Reason, "note": c.Note, "outcome": c.Outcome, "queue": c.Queue} {
		if v != "" {
			detail[k] = v
		}
	}
	detailJSON, err := json.Marshal(detail)
	if err != nil {
		return err
	}
	b.Queue(`INSERT INTO desk_events (queue_id, handoff_id, kind, created_at) VALUES ($1, $2, $3, $4)`,
		c.QueueID, c.HandoffID, c.Kind, c.At)
	if c.FromQueueID != 0 && c.FromQueueID != c.QueueID {
		b.Queue(`INSERT INTO desk_events (queue_id, handoff_id, kind, created_at) VALUES ($1, $2, 'moved', $3)`,
			c.FromQueueID, c.HandoffID, c.At)
	}
	b.Queue(`INSERT INTO audit_log (at, actor_user, actor_bot, action, handoff_id, detail) VALUES ($1, $2, $3, $4, $5, $6)`,
		c.At, c.ActorUser, c.ActorBot, c.Kind, c.HandoffID, detailJSON)
	if !webhook.IsEvent(c.Kind) {
		return nil
	}
	return webhook.Queue(b, webhook.Event{
		HandoffID: c.PublicID, APIKeyID: c.APIKeyID, Event: c.Kind, Status: string(c.Status), Queue: c.Queue,
		Reason: c.Reason, Note: c.Note, Outcome: c.Outcome, Assignee: c.Assignee, OccurredAt: c.At,
	})
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
	if err := queueChange(b, c); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}
