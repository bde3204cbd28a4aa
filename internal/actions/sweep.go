package actions

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
)

// sweepBatch bounds one sweep transaction, so a backlog is worked off in short steps.
const sweepBatch = 100

// Sweep returns reservations that ran out to their queue, expires packages nobody claimed in
// their queue's TTL and refund approvals nobody decided in their queue's approval timeout,
// telling the bot, and moves warm packages on (ring.go). SKIP LOCKED lets every instance sweep at
// once without waiting on or repeating each other's work. It reports how many packages it moved.
func (a *Service) Sweep(ctx context.Context) (int, error) {
	// A warm package reserved by "next" keeps its warm phase: the ring pass below rings it again.
	released, err := a.sweep(ctx, `
		UPDATE handoffs h SET status = 'queued', assignee_id = NULL, reserved_until = NULL, updated_at = $1
		FROM (SELECT id FROM handoffs WHERE status = 'reserved' AND reserved_until <= $1
			ORDER BY reserved_until LIMIT $2 FOR UPDATE SKIP LOCKED) due, queues q
		WHERE h.id = due.id AND q.id = h.queue_id
		RETURNING h.id, h.handoff_id, h.queue_id, q.name, h.api_key_id, h.trace_parent, false`, events.Released, handoff.StatusQueued, "")
	if err != nil {
		return released, err
	}
	// Before the ring pass, which then ends the rings of the packages that expired.
	expired, err := a.sweep(ctx, `
		UPDATE handoffs h SET status = 'expired', outcome = 'expired', closed_at = $1, updated_at = $1, warm_until = NULL
		FROM (SELECT id, warm_until IS NOT NULL AS warm FROM handoffs WHERE status = 'queued' AND expires_at <= $1
			ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) due, queues q
		WHERE h.id = due.id AND q.id = h.queue_id
		RETURNING h.id, h.handoff_id, h.queue_id, q.name, h.api_key_id, h.trace_parent, due.warm`, events.Expired, handoff.StatusExpired, "expired")
	if err != nil {
		return released + expired, err
	}
	// Rings move no package: they are not counted.
	if err := a.sweepRings(ctx); err != nil {
		return released + expired, err
	}
	lapsed, err := a.expireApprovals(ctx)
	return released + expired + lapsed, err
}

// sweep runs update, which moves a batch of packages and returns, for each, whether it was in its
// warm phase, until a batch is not full. A warm package that expires tells its bot warm_timeout.
func (a *Service) sweep(ctx context.Context, update string, kind events.Kind, status handoff.Status, outcome string) (int, error) {
	total := 0
	for {
		moved := 0
		err := a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
			rows, err := tx.Query(ctx, update, now, sweepBatch)
			if err != nil {
				return err
			}
			var changes, warms []events.Change
			for rows.Next() {
				c := events.Change{Kind: kind, Status: status, Outcome: outcome, At: now}
				var warm bool
				if err := rows.Scan(&c.HandoffID, &c.PublicID, &c.QueueID, &c.Queue, &c.APIKeyID, &c.PackageTrace, &warm); err != nil {
					return err
				}
				if warm {
					warms = append(warms, warmEnded(c, handoff.WarmExpired))
				}
				changes = append(changes, c)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			moved = len(changes)
			if moved == 0 {
				return nil
			}
			// The warm phase ends before the package does, in the bot's order too: a statement's
			// rows are numbered in no particular order.
			b := &pgx.Batch{}
			if len(warms) > 0 {
				if err := events.Queue(b, warms...); err != nil {
					return err
				}
			}
			if err := events.Queue(b, changes...); err != nil {
				return err
			}
			return tx.SendBatch(ctx, b).Close()
		})
		total += moved
		if err != nil || moved < sweepBatch {
			return total, err
		}
	}
}

// RunSweeper sweeps every interval until ctx is done, and also when the earliest ring or warm
// wait runs out, whichever instance made it: an accept window and a warm wait are kept to the
// moment, not to the next tick. A
// failed sweep is a warning: reservations, rings and TTLs go unenforced until one succeeds.
func (a *Service) RunSweeper(ctx context.Context, interval time.Duration, logger *slog.Logger) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	ring := time.NewTimer(interval)
	defer ring.Stop()
	for {
		if n, err := a.Sweep(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("sweep failed", "err", err)
		} else if n > 0 {
			logger.Info("swept", "packages", n)
		}
		armed, err := a.nextRingDue(ctx)
		if err != nil && ctx.Err() == nil {
			logger.Warn("reading the next ring's end", "err", err)
		}
		// A ring already due that this pass left (another instance holds its package) waits for
		// the tick: arming for it would sweep in a loop.
		if d := time.Until(armed); d > 0 {
			ring.Reset(d)
		} else {
			ring.Stop()
			armed = time.Time{}
		}
		for waiting := true; waiting; {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
				waiting = false
			case <-ring.C:
				waiting = false
			case at := <-a.due:
				if armed.IsZero() || at.Before(armed) {
					armed = at
					ring.Reset(max(time.Until(at), 0))
				}
			}
		}
	}
}

// nextRingDue is when the earliest live ring or warm wait runs out, or zero when nothing rings
// and no package waits warm.
func (a *Service) nextRingDue(ctx context.Context) (time.Time, error) {
	var at *time.Time
	err := a.db.QueryRow(ctx, `SELECT least((SELECT min(until) FROM offers WHERE ended_at IS NULL),
		(SELECT min(warm_until) FROM handoffs WHERE warm_until IS NOT NULL AND status = 'queued'))`).Scan(&at)
	if at == nil {
		return time.Time{}, err
	}
	return *at, err
}
