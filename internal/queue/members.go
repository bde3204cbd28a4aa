package queue

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Assignable is a member of a queue a supervisor may hand a package to, with their room.
type Assignable struct {
	UserID   int64
	Email    string
	Name     string
	Capacity int
	Holding  int
}

// Assignables lists the queue's members whose accounts are enabled, by name, with how many
// packages each holds: the choices of a reassignment (actions.Reassign checks them again under
// lock).
func Assignables(ctx context.Context, db Lister, queueID int64) ([]Assignable, error) {
	by, err := AssignablesIn(ctx, db, []int64{queueID})
	return by[queueID], err
}

// Lister is what reading lists needs: a pool, a connection or a transaction.
type Lister interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}

// AssignablesIn lists Assignables of each of the queues, by queue id, in one query.
func AssignablesIn(ctx context.Context, db Lister, queueIDs []int64) (map[int64][]Assignable, error) {
	rows, err := db.Query(ctx, `
		SELECT m.queue_id, u.id, u.email, u.display_name, u.capacity,
			(SELECT count(*) FROM handoffs h WHERE h.assignee_id = u.id AND h.closed_at IS NULL)
		FROM queue_members m JOIN users u ON u.id = m.user_id
		WHERE m.queue_id = ANY($1) AND NOT u.disabled
		ORDER BY u.display_name, u.id`, queueIDs)
	if err != nil {
		return nil, err
	}
	out := map[int64][]Assignable{}
	var queueID int64
	var a Assignable
	_, err = pgx.ForEachRow(rows, []any{&queueID, &a.UserID, &a.Email, &a.Name, &a.Capacity, &a.Holding}, func() error {
		out[queueID] = append(out[queueID], a)
		return nil
	})
	return out, err
}
