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
func Assignables(ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, queueID int64) ([]Assignable, error) {
	rows, err := db.Query(ctx, `
		SELECT u.id, u.email, u.display_name, u.capacity,
			(SELECT count(*) FROM handoffs h WHERE h.assignee_id = u.id AND h.closed_at IS NULL)
		FROM queue_members m JOIN users u ON u.id = m.user_id
		WHERE m.queue_id = $1 AND NOT u.disabled
		ORDER BY u.display_name, u.id`, queueID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Assignable])
}
