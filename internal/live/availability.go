package live

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/queue"
)

// Choose records what the user chose to be, queue.Available, queue.OnBreak or queue.Away, and
// tells every instance, whose supervisors' rosters show it. One who is no longer available loses
// their ring at once, as when they close the desk. A choice not among queue.Availabilities is
// Invalid, naming it.
func (p *Presence) Choose(ctx context.Context, userID int64, status string) error {
	if !slices.Contains(queue.Availabilities(), status) {
		return &desk.Error{Code: desk.Invalid, Details: map[string]string{"field": "status"},
			Message: fmt.Sprintf("status %q is not one of %v", status, queue.Availabilities())}
	}
	now := time.Now()
	b := &pgx.Batch{}
	queue.QueueChoice(b, userID, status, "", now)
	if err := events.Queue(b, events.Change{Kind: events.Presence, At: now}); err != nil {
		return err
	}
	if err := p.db.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	p.changed()
	if status != queue.Available && p.gone != nil {
		p.gone(ctx, []int64{userID})
	}
	return nil
}
