package live

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/events"
)

// Who has which package open: each package page's socket counts here, and the viewing table holds
// a row per agent, package and instance, kept as presence is (Run) and gone with the instance's
// lease. A change writes a viewing event for the package, so that every instance's hub shows its
// viewers anew on the package's open pages.

type viewKey struct{ user, handoff int64 }

// Open counts a package page's socket of the user.
func (p *Presence) Open(userID, handoffID int64) { p.view(viewKey{userID, handoffID}, 1) }

// Close counts a package page's socket fewer.
func (p *Presence) Close(userID, handoffID int64) { p.view(viewKey{userID, handoffID}, -1) }

func (p *Presence) view(k viewKey, by int) {
	p.mu.Lock()
	if p.views == nil {
		p.views = map[viewKey]int{}
	}
	p.views[k] += by
	p.mu.Unlock()
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// flushViews writes this instance's viewing rows: the ones whose last socket closed go, the rest
// are written anew (after a lapsed lease, the reaper may have taken them). It returns the packages
// whose viewers changed: a row deleted or a row that was not there.
func (p *Presence) flushViews(ctx context.Context) ([]int64, error) {
	p.mu.Lock()
	var goneU, goneH, openU, openH []int64
	var counts []int32
	for k, n := range p.views {
		if n <= 0 {
			goneU, goneH = append(goneU, k.user), append(goneH, k.handoff)
			continue
		}
		openU, openH = append(openU, k.user), append(openH, k.handoff)
		counts = append(counts, int32(n)) //nolint:gosec // G115: one user's sockets on one package, bounded by maxUserSockets.
	}
	p.mu.Unlock()
	rows, err := p.db.Query(ctx, `
		WITH gone AS (
			DELETE FROM viewing v USING unnest($2::bigint[], $3::bigint[]) AS g(u, h)
			WHERE v.instance_id = $1 AND v.user_id = g.u AND v.handoff_id = g.h
			RETURNING v.handoff_id
		), put AS (
			INSERT INTO viewing (instance_id, user_id, handoff_id, sockets)
			SELECT $1, u, h, c FROM unnest($4::bigint[], $5::bigint[], $6::int[]) AS t(u, h, c)
			WHERE EXISTS (SELECT 1 FROM handoffs WHERE id = h)
			ON CONFLICT (handoff_id, user_id, instance_id) DO UPDATE SET sockets = excluded.sockets
				WHERE viewing.sockets <> excluded.sockets
			-- xmax is 0 on a row this statement inserted, not on one it updated.
			RETURNING handoff_id, xmax = 0 AS inserted
		)
		SELECT handoff_id FROM gone UNION SELECT handoff_id FROM put WHERE inserted`,
		p.instance, goneU, goneH, openU, openH, counts)
	if err != nil {
		return nil, err
	}
	changed, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	for i := range goneU {
		// Unless the page opened again while the row was being deleted: the next write has it.
		if k := (viewKey{goneU[i], goneH[i]}); p.views[k] <= 0 {
			delete(p.views, k)
		}
	}
	p.mu.Unlock()
	return changed, nil
}

// reapViews deletes the viewing rows of instances that hold no lease (reap deleted the lapsed
// ones) and returns their packages.
func (p *Presence) reapViews(ctx context.Context) ([]int64, error) {
	rows, err := p.db.Query(ctx, `
		WITH gone AS (
			DELETE FROM viewing v WHERE NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = v.instance_id)
			RETURNING v.handoff_id
		)
		SELECT DISTINCT handoff_id FROM gone`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// announceViews writes a viewing event for each package.
func (p *Presence) announceViews(ctx context.Context, handoffs []int64) error {
	if len(handoffs) == 0 {
		return nil
	}
	now := time.Now()
	cs := make([]events.Change, len(handoffs))
	for i, id := range handoffs {
		cs[i] = events.Change{Kind: events.Viewing, HandoffID: id, At: now}
	}
	b := &pgx.Batch{}
	if err := events.Queue(b, cs...); err != nil {
		return err
	}
	err := p.db.SendBatch(ctx, b).Close()
	if err == nil {
		p.changed()
	}
	return err
}

// Viewer is someone who has a package open.
type Viewer struct {
	UserID int64
	Name   string
}

// Viewers are who has the package open, on any instance, by name.
func Viewers(ctx context.Context, db *pgxpool.Pool, handoffID int64) ([]Viewer, error) {
	rows, err := db.Query(ctx, `
		SELECT u.id, u.display_name FROM users u
		WHERE EXISTS (SELECT 1 FROM viewing v WHERE v.handoff_id = $1 AND v.user_id = u.id)
		ORDER BY u.display_name, u.id`, handoffID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Viewer])
}
