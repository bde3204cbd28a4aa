package actions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/approvals"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/tracing"
)

// Cancel closes an open package of the bot's key, in one of queueIDs, because the customer left,
// freeing its queue and its contact. A package still in its warm phase ends it with warm_timeout
// (canceled), and its ring, if any, stops at once.
func (a *Service) Cancel(ctx context.Context, apiKeyID int64, queueIDs []int64, handoffID string) (err error) {
	ctx, span := a.tracing.Act(ctx, "handoff.cancel", handoffID)
	defer func() { tracing.End(span, err) }()
	warm := false
	err = a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		c := events.Change{PublicID: handoffID, APIKeyID: apiKeyID, Kind: events.Canceled, Status: handoff.StatusCanceled,
			ActorBot: &apiKeyID, Outcome: "canceled", At: now}
		err := tx.QueryRow(ctx, `
			WITH old AS (
				SELECT id, warm_until IS NOT NULL AS warm FROM handoffs
				WHERE handoff_id = $1 AND queue_id = ANY($2) AND closed_at IS NULL FOR UPDATE)
			UPDATE handoffs h SET status = 'canceled', outcome = 'canceled', closed_at = $3, updated_at = $3,
				reserved_until = NULL, warm_until = NULL
			FROM queues q, old
			WHERE h.id = old.id AND h.closed_at IS NULL AND q.id = h.queue_id
			RETURNING h.id, h.api_key_id, h.queue_id, q.name, h.trace_parent, old.warm`, handoffID, queueIDs, now).
			Scan(&c.HandoffID, &c.APIKeyID, &c.QueueID, &c.Queue, &c.PackageTrace, &warm)
		if errors.Is(err, pgx.ErrNoRows) {
			return notOpen(ctx, tx, queueIDs, handoffID)
		}
		if err != nil {
			return err
		}
		tracing.LinkPackage(ctx, c.PackageTrace)
		c.Trace = tracing.Stored(ctx)
		changes := []events.Change{c}
		// A refund nobody will pay needs no decision: the request leaves the approvals page.
		req, err := approvals.End(ctx, tx, c.HandoffID, approvals.Withdrawn, now)
		switch {
		case err == nil:
			h := held{ID: c.HandoffID, State: State{PublicID: handoffID}, APIKeyID: c.APIKeyID}
			h.Queue.ID, h.Queue.Name = c.QueueID, c.Queue
			w := h.approvalChange(events.ApprovalWithdrawn, handoff.StatusCanceled, req, approvals.Withdrawn, nil, "", now)
			w.ActorBot = &apiKeyID
			w.PackageTrace, w.Trace = c.PackageTrace, c.Trace
			changes = append(changes, w)
		case desk.ErrorCode(err) != desk.NotFound:
			return err
		}
		b := &pgx.Batch{}
		// The warm phase ends before the package does, in the bot's order too: one statement's
		// rows are numbered in no particular order.
		if warm {
			if err := events.Queue(b, warmEnded(c, handoff.WarmCanceled)); err != nil {
				return err
			}
		}
		if err := events.Queue(b, changes...); err != nil {
			return err
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return fmt.Errorf("cancel %s: %w", handoffID, err)
	}
	a.ringAgain(warm, nil)
	return nil
}

// notOpen explains why a package of these queues could not be canceled.
func notOpen(ctx context.Context, tx pgx.Tx, queueIDs []int64, handoffID string) error {
	var status handoff.Status
	err := tx.QueryRow(ctx, `SELECT status FROM handoffs WHERE handoff_id = $1 AND queue_id = ANY($2)`, handoffID, queueIDs).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return desk.Errorf(desk.NotFound, "no handoff %q in this key's queues", handoffID)
	}
	if err != nil {
		return err
	}
	return desk.Errorf(desk.Conflict, "handoff %q is already %s", handoffID, status)
}
