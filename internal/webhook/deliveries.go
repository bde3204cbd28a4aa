package webhook

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/desk"
)

// Delivery is one outbox row as the admin view shows it.
type Delivery struct {
	ID            int64
	EventID       string
	HandoffID     string
	Event         string
	State         string
	Attempts      int
	LastStatus    int    // 0 when no response was received
	LastError     string // why the last attempt got no response
	NextAttemptAt time.Time
	CreatedAt     time.Time
	DeliveredAt   *time.Time
}

// DeliveryFilter narrows Deliveries; zero fields match everything.
type DeliveryFilter struct {
	APIKeyID  int64
	State     string
	HandoffID string
	Limit     int // DefaultDeliveryLimit when zero, at most MaxDeliveryLimit
	// Before pages on: only rows older than this id (the last one of the page before).
	Before int64
}

// Page sizes of Deliveries.
const (
	DefaultDeliveryLimit = 50
	MaxDeliveryLimit     = 500
)

// Querier is what Deliveries reads through: a pool, or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Deliveries lists outbox rows, newest first.
func Deliveries(ctx context.Context, db Querier, f DeliveryFilter) ([]Delivery, error) {
	switch f.State {
	case "", StatePending, StateDelivered, StateDead, StateNoEndpoint:
	default:
		return nil, desk.Errorf(desk.Invalid, "state %q is not one of %s, %s, %s, %s",
			f.State, StatePending, StateDelivered, StateDead, StateNoEndpoint)
	}
	if f.Limit < 0 || f.Limit > MaxDeliveryLimit {
		return nil, desk.Errorf(desk.Invalid, "limit %d is not between 1 and %d", f.Limit, MaxDeliveryLimit)
	}
	if f.Limit == 0 {
		f.Limit = DefaultDeliveryLimit
	}
	rows, err := db.Query(ctx, `
		SELECT id, event_id, handoff_id, event, state, attempts, coalesce(last_status, 0),
			coalesce(last_error, ''), next_attempt_at, created_at, delivered_at
		FROM webhook_outbox
		WHERE ($1::bigint = 0 OR api_key_id = $1) AND ($2::text = '' OR state = $2)
			AND ($3::text = '' OR handoff_id = $3) AND ($5::bigint = 0 OR id < $5)
		ORDER BY id DESC
		LIMIT $4`,
		f.APIKeyID, f.State, f.HandoffID, f.Limit, f.Before)
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	deliveries, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Delivery, error) {
		var d Delivery
		err := row.Scan(&d.ID, &d.EventID, &d.HandoffID, &d.Event, &d.State, &d.Attempts, &d.LastStatus,
			&d.LastError, &d.NextAttemptAt, &d.CreatedAt, &d.DeliveredAt)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("list webhook deliveries: %w", err)
	}
	return deliveries, nil
}

// Backlog counts the deliveries pending in the outbox, due or waiting for a retry.
func Backlog(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM webhook_outbox WHERE state = 'pending'`).Scan(&n)
	return n, err
}

// Redeliver sends the key's delivery id again, inside tx, from its first attempt: a dead one, or a
// pending one that has failed at least once. It returns the row as it was.
func Redeliver(ctx context.Context, tx pgx.Tx, apiKeyID, id int64) (Delivery, error) {
	var d Delivery
	err := tx.QueryRow(ctx, `
		SELECT id, event_id, state, attempts, coalesce(last_status, 0), coalesce(last_error, '')
		FROM webhook_outbox WHERE id = $1 AND api_key_id = $2 FOR UPDATE`, id, apiKeyID).
		Scan(&d.ID, &d.EventID, &d.State, &d.Attempts, &d.LastStatus, &d.LastError)
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, desk.Errorf(desk.NotFound, "the key has no delivery %d", id)
	}
	if err != nil {
		return Delivery{}, err
	}
	if !d.Redeliverable() {
		return Delivery{}, desk.Errorf(desk.Conflict, "delivery %d is %s; only dead or failed deliveries are sent again", id, d.State)
	}
	_, err = tx.Exec(ctx, `UPDATE webhook_outbox SET state = 'pending', attempts = 0, next_attempt_at = now() WHERE id = $1`, id)
	return d, err
}

// Redeliverable reports whether an admin may send d again: it is dead, or pending after a failure.
func (d Delivery) Redeliverable() bool {
	return d.State == StateDead || (d.State == StatePending && d.Attempts > 0 && (d.LastStatus != 0 || d.LastError != ""))
}

// ReplyDeliveries is where each reply webhook of package handoffID stands, by the reply's message
// id in the thread (internal/conversation): what the package page shows beside each reply, since
// the customer has the reply only once the bot took it.
func ReplyDeliveries(ctx context.Context, db Querier, handoffID string) (map[string]Delivery, error) {
	rows, err := db.Query(ctx, `
		SELECT payload->>'message_id', id, event_id, handoff_id, event, state, attempts, coalesce(last_status, 0),
			coalesce(last_error, ''), next_attempt_at, created_at, delivered_at
		FROM webhook_outbox
		WHERE handoff_id = $1 AND event = 'reply' AND payload ? 'message_id'
		ORDER BY id`, handoffID)
	if err != nil {
		return nil, fmt.Errorf("read reply deliveries: %w", err)
	}
	out := map[string]Delivery{}
	var messageID string
	var d Delivery
	_, err = pgx.ForEachRow(rows, []any{&messageID, &d.ID, &d.EventID, &d.HandoffID, &d.Event, &d.State, &d.Attempts,
		&d.LastStatus, &d.LastError, &d.NextAttemptAt, &d.CreatedAt, &d.DeliveredAt}, func() error {
		out[messageID] = d
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read reply deliveries: %w", err)
	}
	return out, nil
}
