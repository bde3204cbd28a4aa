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

// Sweep returns reservations that ran out to their queue and expires packages nobody claimed in
// their queue's TTL, telling the bot. SKIP LOCKED lets every instance sweep at once without
// waiting on or repeating each other's work. It reports how many packages it moved.
func (a *Service) Sweep(ctx context.Context) (int, error) {
	released, err := a.sweep(ctx, `
		UPDATE handoffs h SET status = 'queued', assignee_id = NULL, reserved_until = NULL, updated_at = $1
		FROM (SELECT id FROM handoffs WHERE status = 'reserved' AND reserved_until <= $1
			ORDER BY reserved_until LIMIT $2 FOR UPDATE SKIP LOCKED) due, queues q
		WHERE h.id = due.id AND q.id = h.queue_id
		RETURNING h.id, h.handoff_id, h.queue_id, q.name, h.api_key_id, h.trace_parent`, events.Released, handoff.StatusQueued, "")
	if err != nil {
		return released, err
	}
	expired, err := a.sweep(ctx, `
		UPDATE handoffs h SET status = 'expired', outcome = 'expired', closed_at = $1, updated_at = $1
		FROM (SELECT id FROM handoffs WHERE status = 'queued' AND expires_at <= $1
			ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED) due, queues q
		WHERE h.id = due.id AND q.id = h.queue_id
		RETURNING h.id, h.handoff_id, h.queue_id, q.name, h.api_key_id, h.trace_parent`, events.Expired, handoff.StatusExpired, "expired")
	return released + expired, err
}

func (a *Service) sweep(ctx context.Context, update string, kind events.Kind, status handoff.Status, outcome string) (int, error) {
	total := 0
	for {
		moved := 0
		err := a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
			rows, err := tx.Query(ctx, update, now, sweepBatch)
			if err != nil {
				return err
			}
			b := &pgx.Batch{}
			var changes []events.Change
			for rows.Next() {
				c := events.Change{Kind: kind, Status: status, Outcome: outcome, At: now}
				if err := rows.Scan(&c.HandoffID, &c.PublicID, &c.QueueID, &c.Queue, &c.APIKeyID, &c.PackageTrace); err != nil {
					return err
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

// RunSweeper sweeps every interval until ctx is done. A failed sweep is a warning: reservations
// and TTLs go unenforced until one succeeds.
func (a *Service) RunSweeper(ctx context.Context, interval time.Duration, logger *slog.Logger) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if n, err := a.Sweep(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("sweep failed", "err", err)
		} else if n > 0 {
			logger.Info("swept", "packages", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
