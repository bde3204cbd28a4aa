package queue

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// A warm package rings one member of its queue at a time (docs/warm.md). Intake decides a new
// package's first ring inside its own batch, and the desk's actions ring the next agent after a
// decline, a timeout or an agent gone: both read the queue's ringable members with ringableSQL and
// order them with OrderRing, so the two ring by the same rule. What these read is a snapshot: the
// database holds the invariants (one live offer per agent and per package, offers_live_*_idx), and
// a writer whose offer conflicts tries the next member or reads again.

// Ringable is a member of a queue whom a warm package may ring: available, with a desk page open
// on a live instance (the view ringable) and an enabled account.
type Ringable struct {
	QueueID int64
	UserID  int64
	Name    string // the display name, which the bot's receipt and the ring show
	Email   string
	Role    string
	Holding int // packages they hold
	// Free: room for one more package, no reservation held and no ring live, so a ring may start now.
	Free bool
	// Passed: they were rung for the package before, or rejected it (read for one package only).
	Passed bool
	// Last is the later of their last ring and their last accept; nil when they had neither.
	Last *time.Time
}

// ringableSQL lists the ringable members of the queues named $1, for the package row $2 (0 for a
// package not stored yet) that the users $3 rejected.
const ringableSQL = `
	WITH m AS (
		SELECT qm.queue_id, u.id, u.display_name, u.email, u.capacity, u.role,
			(SELECT count(*) FROM handoffs x WHERE x.assignee_id = u.id AND x.closed_at IS NULL) AS holding
		FROM queues q JOIN queue_members qm ON qm.queue_id = q.id JOIN users u ON u.id = qm.user_id
			JOIN ringable r ON r.user_id = u.id
		WHERE q.name = ANY ($1::text[]) AND NOT u.disabled
	)
	SELECT m.queue_id, m.id, m.display_name, m.email, m.role, m.holding,
		m.holding < m.capacity
			AND NOT EXISTS (SELECT 1 FROM handoffs x WHERE x.assignee_id = m.id AND x.status = 'reserved')
			AND NOT EXISTS (SELECT 1 FROM offers o WHERE o.user_id = m.id AND o.ended_at IS NULL),
		m.id = ANY ($3::bigint[]) OR EXISTS (SELECT 1 FROM offers o WHERE o.handoff_id = $2 AND o.user_id = m.id),
		greatest((SELECT max(o.offered_at) FROM offers o WHERE o.user_id = m.id),
			(SELECT max(x.accepted_at) FROM handoffs x WHERE x.assignee_id = m.id AND x.accepted_at IS NOT NULL))
	FROM m`

func scanRingable(row pgx.CollectableRow) (Ringable, error) {
	var r Ringable
	return r, row.Scan(&r.QueueID, &r.UserID, &r.Name, &r.Email, &r.Role, &r.Holding, &r.Free, &r.Passed, &r.Last)
}

// RingableFor reads the ringable members of the queue named queue for the package row packageID,
// which the users rejectedBy rejected.
func RingableFor(ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, queue string, packageID int64, rejectedBy []int64) ([]Ringable, error) {
	rows, err := db.Query(ctx, ringableSQL, []string{queue}, packageID, nonNil(rejectedBy))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanRingable)
}

// QueueRingable adds to b the read of the ringable members of the named queues for packages not
// stored yet, as intake reads them in its batch's first round trip; found gets each queue's
// members by queue id, and only queues that have any.
func QueueRingable(b *pgx.Batch, queues []string, found func(map[int64][]Ringable)) {
	b.Queue(ringableSQL, queues, 0, []int64{}).Query(func(rows pgx.Rows) error {
		ms, err := pgx.CollectRows(rows, scanRingable)
		if err != nil {
			return err
		}
		byQueue := map[int64][]Ringable{}
		for _, m := range ms {
			byQueue[m.QueueID] = append(byQueue[m.QueueID], m)
		}
		found(byQueue)
		return nil
	})
}

func nonNil(ids []int64) []int64 {
	if ids == nil {
		return []int64{}
	}
	return ids
}

// RingOrder is whom a warm package may ring, as OrderRing decides it.
type RingOrder struct {
	// Now are the members it may ring now, best first: the first whose offer the database takes
	// is rung.
	Now []Ringable
	// Left counts the members not passed yet, free or busy. While any is left the package waits
	// for one; when none is, its warm phase ends.
	Left int
}

// OrderRing orders a queue's ringable members for a package: the preferred agent (by email)
// first, then whoever's last ring or accept is oldest (never first), then whoever holds fewer
// packages, then the lowest user id, so that the order is total. A package that needs a
// supervisor rings no agent.
func OrderRing(members []Ringable, preferred string, needsSupervisor bool) RingOrder {
	var o RingOrder
	for _, m := range members {
		if m.Passed {
			continue
		}
		o.Left++
		if m.Free && (!needsSupervisor || m.Role != "agent") {
			o.Now = append(o.Now, m)
		}
	}
	slices.SortFunc(o.Now, func(a, b Ringable) int {
		if pa, pb := strings.EqualFold(a.Email, preferred), strings.EqualFold(b.Email, preferred); pa != pb {
			if pa {
				return -1
			}
			return 1
		}
		switch {
		case a.Last == nil && b.Last != nil:
			return -1
		case a.Last != nil && b.Last == nil:
			return 1
		case a.Last != nil && !a.Last.Equal(*b.Last):
			return a.Last.Compare(*b.Last)
		}
		return cmp.Or(cmp.Compare(a.Holding, b.Holding), cmp.Compare(a.UserID, b.UserID))
	})
	return o
}

// EstimatedWait is how long a package that rings nobody may expect to wait in the queue: the
// median time to accept of the queue's last 50 accepted packages of the past day, or, without
// any, the queue's SLA (docs/warm.md).
func EstimatedWait(ctx context.Context, db Querier, queueID int64) (time.Duration, error) {
	var wait time.Duration
	err := db.QueryRow(ctx, estimatedWaitSQL+` WHERE q.id = $1`, queueID).Scan(&queueID, &wait)
	return wait, err
}

// QueueEstimatedWaits adds to b the read of the EstimatedWait of each of the named queues; found
// gets them by queue id.
func QueueEstimatedWaits(b *pgx.Batch, queues []string, found func(map[int64]time.Duration)) {
	b.Queue(estimatedWaitSQL+` WHERE q.name = ANY ($1::text[])`, queues).Query(func(rows pgx.Rows) error {
		waits := map[int64]time.Duration{}
		var id int64
		var wait time.Duration
		if _, err := pgx.ForEachRow(rows, []any{&id, &wait}, func() error {
			waits[id] = wait
			return nil
		}); err != nil {
			return err
		}
		found(waits)
		return nil
	})
}

// estimatedWaitSQL reads the newest accepts through handoffs_queue_accepted_idx, so its cost
// does not grow with the queue's history.
const estimatedWaitSQL = `
	SELECT q.id, coalesce((SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY took) FROM (
		SELECT accepted_at - created_at AS took FROM handoffs
		WHERE queue_id = q.id AND accepted_at IS NOT NULL AND accepted_at > now() - interval '1 day'
		ORDER BY accepted_at DESC LIMIT 50) recent), q.sla)
	FROM queues q`
