package actions

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/approvals"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/queue"
)

// ReturnHeld puts every open package the user holds back in its queue, inside tx (an admin's
// disabling of the user): nobody else could work them while their holder cannot log in. It
// returns one Released change each, for the caller to log in the same transaction; the
// bot is not told, as when a reservation runs out. A package awaiting a refund approval the user
// asked for has its request withdrawn first (an ApprovalWithdrawn change, which the bot hears
// of): the next agent to take it may not agree to the refund, and asks again if they do.
func ReturnHeld(ctx context.Context, tx pgx.Tx, userID int64, actor *int64, now time.Time) ([]events.Change, error) {
	rows, err := tx.Query(ctx, `
		UPDATE handoffs h SET status = 'queued', assignee_id = NULL, reserved_until = NULL, accepted_at = NULL, updated_at = $2
		FROM (SELECT id, status FROM handoffs WHERE assignee_id = $1 AND closed_at IS NULL ORDER BY id FOR UPDATE) held, queues q
		WHERE h.id = held.id AND q.id = h.queue_id
		RETURNING h.id, h.handoff_id, h.queue_id, q.name, h.api_key_id, held.status`, userID, now)
	if err != nil {
		return nil, err
	}
	type returned struct {
		events.Change
		was handoff.Status
	}
	released, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (returned, error) {
		r := returned{Change: events.Change{Kind: events.Released, Status: handoff.StatusQueued, ActorUser: actor, At: now,
			Reason: "assignee_disabled", Detail: map[string]any{"from_assignee": userID}}}
		err := row.Scan(&r.HandoffID, &r.PublicID, &r.QueueID, &r.Queue, &r.APIKeyID, &r.was)
		return r, err
	})
	if err != nil {
		return nil, err
	}
	var changes []events.Change
	for _, r := range released {
		if r.was == handoff.StatusAwaitingApproval {
			req, err := approvals.End(ctx, tx, r.HandoffID, approvals.Withdrawn, now)
			switch {
			case err == nil:
				h := held{ID: r.HandoffID, State: State{PublicID: r.PublicID}, APIKeyID: r.APIKeyID}
				h.Queue.ID, h.Queue.Name = r.QueueID, r.Queue
				w := h.approvalChange(events.ApprovalWithdrawn, handoff.StatusQueued, req, approvals.Withdrawn, actor, "", now)
				w.Reason = "assignee_disabled"
				changes = append(changes, w)
			case desk.ErrorCode(err) != desk.NotFound:
				return nil, err
			}
		}
		changes = append(changes, r.Change)
	}
	return changes, nil
}

// Held is, in one queue, what ReturnHeld would send back: the open packages a user holds, and
// how many of them wait on a refund approval the user asked for.
type Held struct {
	Queue            string
	Packages         int
	AwaitingApproval int
}

// HeldBy lists, by queue name, the open packages the user holds: what an admin is told before
// disabling them.
func HeldBy(ctx context.Context, db *pgxpool.Pool, userID int64) ([]Held, error) {
	rows, err := db.Query(ctx, `
		SELECT q.name, count(*), count(*) FILTER (WHERE h.status = 'awaiting_approval')
		FROM handoffs h JOIN queues q ON q.id = h.queue_id
		WHERE h.assignee_id = $1 AND h.closed_at IS NULL
		GROUP BY q.name ORDER BY q.name`, userID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Held])
}

// OpenFrom counts the open packages a bot key sent: what an admin is told before revoking it.
func OpenFrom(ctx context.Context, db *pgxpool.Pool, keyID int64) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM handoffs WHERE api_key_id = $1 AND closed_at IS NULL`, keyID).Scan(&n)
	return n, err
}

// CountOpen counts the open packages in the queue, inside tx: a queue that holds any is not
// disabled until they are moved (MoveOpen).
func CountOpen(ctx context.Context, tx pgx.Tx, queueID int64) (int, error) {
	var n int
	err := tx.QueryRow(ctx, `SELECT count(*) FROM handoffs WHERE queue_id = $1 AND closed_at IS NULL`, queueID).Scan(&n)
	return n, err
}

// MoveOpen moves every open package of from into to, inside tx, when an admin disables from. A
// package waiting or reserved waits in to; one an agent accepted stays with them. Each move is a
// Transferred change, which the bot hears of, returned for the caller to log in the same
// transaction.
func MoveOpen(ctx context.Context, tx pgx.Tx, from, to queue.Queue, actor *int64, now time.Time) ([]events.Change, error) {
	rows, err := tx.Query(ctx, `
		UPDATE handoffs h SET queue_id = $2,
			status = CASE WHEN h.status = 'reserved' THEN 'queued' ELSE h.status END,
			assignee_id = CASE WHEN h.status = 'reserved' THEN NULL ELSE h.assignee_id END,
			reserved_until = NULL, expires_at = greatest(h.expires_at, $3::timestamptz + $4::interval), updated_at = $3
		FROM (SELECT id FROM handoffs WHERE queue_id = $1 AND closed_at IS NULL ORDER BY id FOR UPDATE) open
		WHERE h.id = open.id
		RETURNING h.id, h.handoff_id, h.api_key_id, h.status`, from.ID, to.ID, now, to.TTL)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (events.Change, error) {
		c := events.Change{QueueID: to.ID, Queue: to.Name, FromQueueID: from.ID, Kind: events.Transferred, ActorUser: actor, At: now,
			Reason: "queue_disabled", Detail: map[string]any{"from_queue": from.Name, "to_queue": to.Name}}
		err := row.Scan(&c.HandoffID, &c.PublicID, &c.APIKeyID, &c.Status)
		return c, err
	})
}
