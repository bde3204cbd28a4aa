package handoff

import (
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/webhook"
)

// queueChanges adds several changes to a batch as one insert per table, whatever their number:
// a statement's fixed cost in PostgreSQL outweighs a small row's.
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
