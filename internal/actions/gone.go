package actions

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/queue"
)

// Unreachable is the resolution the sweeper gives a package whose customer is gone.
const Unreachable = "customer_unreachable"

// goneCandidate is an accepted package of a queue that resolves gone customers, whose silence may
// have lasted long enough.
type goneCandidate struct {
	id        int64
	updatedAt time.Time
	gone      time.Duration
}

// resolveGone resolves as customer_unreachable, with its webhook, every accepted package of a
// queue with customer_gone whose customer has left the agent's reply unanswered that long, and
// frees its agent's capacity. The silence counts from the package's last change of hands
// (updated_at: the accept, a reassignment, an approval's end) when that came after the reply: the
// agent who holds it now gets the whole customer_gone to hear back. A package awaiting approval is
// left alone: the desk owes the customer the decision.
//
// The candidates are read without locks (only queues with customer_gone, only packages whose
// holder has had them that long); each batch is then locked with SKIP LOCKED and checked again
// under the lock, in a statement that sees every message appended before it (messages are
// appended under the package's row lock), so that a customer who wrote meanwhile is not resolved,
// and two sweepers never resolve one package twice: the second skips the row or finds it resolved.
func (a *Service) resolveGone(ctx context.Context) (int, error) {
	now := a.now()
	rows, err := a.db.Query(ctx, `
		SELECT h.id, h.updated_at, q.customer_gone
		FROM queues q JOIN handoffs h ON h.queue_id = q.id AND h.status = 'accepted'
		WHERE q.customer_gone > '0'::interval AND h.updated_at + q.customer_gone <= $1`, now)
	if err != nil {
		return 0, err
	}
	candidates, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (goneCandidate, error) {
		var c goneCandidate
		err := row.Scan(&c.id, &c.updatedAt, &c.gone)
		return c, err
	})
	if err != nil || len(candidates) == 0 {
		return 0, err
	}
	ids := make([]int64, len(candidates))
	for i, c := range candidates {
		ids[i] = c.id
	}
	quiet, err := conversation.Quiet(ctx, a.db, ids)
	if err != nil {
		return 0, err
	}
	var due []int64
	for _, c := range candidates {
		if since, ok := conversation.QuietSince(quiet, c.id, c.updatedAt); ok && !since.Add(c.gone).After(now) {
			due = append(due, c.id)
		}
	}
	total := 0
	for len(due) > 0 {
		batch := due[:min(len(due), sweepBatch)]
		due = due[len(batch):]
		n, err := a.resolveGoneBatch(ctx, batch)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// gonePackage is a package locked to be resolved as gone.
type gonePackage struct {
	hold
	assignee  string
	updatedAt time.Time
	gone      time.Duration
}

// resolveGoneBatch locks those of ids no other transaction holds, checks each again and resolves
// those whose customer is still gone.
func (a *Service) resolveGoneBatch(ctx context.Context, ids []int64) (int, error) {
	var resolved []string
	err := a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		rows, err := tx.Query(ctx, `
			SELECT h.id, h.handoff_id, h.queue_id, q.name, h.api_key_id, h.trace_parent, coalesce(u.display_name, ''),
				h.updated_at, q.customer_gone
			FROM handoffs h JOIN queues q ON q.id = h.queue_id LEFT JOIN users u ON u.id = h.assignee_id
			WHERE h.id = ANY($1) AND h.status = 'accepted' AND q.customer_gone > '0'::interval
			FOR UPDATE OF h SKIP LOCKED`, ids)
		if err != nil {
			return err
		}
		locked, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (gonePackage, error) {
			var g gonePackage
			err := row.Scan(&g.rowID, &g.publicID, &g.queueID, &g.queue, &g.apiKeyID, &g.trace, &g.assignee, &g.updatedAt, &g.gone)
			return g, err
		})
		if err != nil || len(locked) == 0 {
			return err
		}
		lockedIDs := make([]int64, len(locked))
		for i, g := range locked {
			lockedIDs[i] = g.rowID
		}
		quiet, err := conversation.Quiet(ctx, tx, lockedIDs)
		if err != nil {
			return err
		}
		var closing []int64
		var notes []string
		var changes []events.Change
		for _, g := range locked {
			since, ok := conversation.QuietSince(quiet, g.rowID, g.updatedAt)
			if !ok || since.Add(g.gone).After(now) {
				continue
			}
			note := fmt.Sprintf("The customer left the agent's reply unanswered since %s, longer than the queue's customer gone (%s).",
				since.UTC().Format(time.RFC3339), queue.FormatDuration(g.gone))
			closing, notes = append(closing, g.rowID), append(notes, note)
			resolved = append(resolved, g.publicID)
			changes = append(changes, g.to(events.Change{Kind: events.Resolved, Status: handoff.StatusResolved, Reason: Unreachable,
				Outcome: Unreachable, Note: note, Assignee: g.assignee, At: now,
				Detail: map[string]any{"quiet_since": since.UTC().Format(time.RFC3339Nano)}}))
		}
		if len(closing) == 0 {
			return nil
		}
		b := &pgx.Batch{}
		b.Queue(`
			UPDATE handoffs h SET status = 'resolved', outcome = $3, outcome_note = n.note, closed_at = $4, updated_at = $4
			FROM unnest($1::bigint[], $2::text[]) AS n(id, note)
			WHERE h.id = n.id`, closing, notes, Unreachable, now)
		if err := events.Queue(b, changes...); err != nil {
			return err
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return 0, err
	}
	for _, id := range resolved {
		a.holds.drop(id)
	}
	return len(resolved), nil
}
