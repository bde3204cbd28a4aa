package queue

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Health is one queue's line on the supervisors' roster.
type Health struct {
	Name         string
	Waiting      int
	Reserved     int
	Accepted     int
	OldestWait   *time.Time
	SLA          time.Duration
	AgentsOnline int
}

// AgentLoad is one agent's line on the roster.
type AgentLoad struct {
	ID     int64
	Name   string
	Email  string
	Role   string
	Status string // offline, or what they chose: available, break or away
	// Since is when they chose it; nil while offline, or if they never chose (available).
	Since    *time.Time
	Holding  int
	Capacity int
	Queues   []string
	Ringing  string // the warm package ringing for the agent (actions' offers), if any
	// The agent's rings of the last RingWindow: how many, how many they accepted, and how the
	// latest that ended ended (accepted, declined, timed_out, withdrawn or taken; "" if none).
	Rings         int
	RingsAccepted int
	LastRing      string
}

// RingWindow is how far back the roster counts each agent's rings.
const RingWindow = 24 * time.Hour

// Roster is what supervisors watch: every queue's health and every agent's presence and load,
// the packages held that a supervisor may move to another agent (Held, with the agents each may go
// to) and the waiting packages nearest their SLA's end (Waiting).
type Roster struct {
	Queues []Health
	Agents []AgentLoad
	// Held are the longest held of the packages agents hold (reserved or accepted), at most
	// RosterHeld; HeldCount is how many there are.
	Held      []Held
	HeldCount int
	// Assignables are each queue's members a package may be moved to, by queue id.
	Assignables map[int64][]Assignable
	// Waiting are the waiting packages whose SLA ends first, at most RosterWaiting.
	Waiting []Waiting
}

// RosterHeld and RosterWaiting bound the roster's lists, which every change of the desk renders
// again for every supervisor watching.
const (
	RosterHeld    = 50
	RosterWaiting = 20
)

// Held is a package an agent holds, which a supervisor may reassign.
type Held struct {
	PublicID string
	QueueID  int64
	Queue    string
	Status   string // reserved or accepted
	HolderID int64
	Holder   string
	// Since is when the accept that stands was made; nil for a reservation.
	Since *time.Time
}

// Waiting is a package waiting for an agent (queued or reserved, no accept standing), with when
// its queue's SLA ends: its arrival plus the SLA, the clock of /packages' sla_breached.
type Waiting struct {
	PublicID string
	Queue    string
	Status   string
	Arrived  time.Time
	SLA      time.Duration
}

// Due is when the package's SLA ends.
func (w Waiting) Due() time.Time { return w.Arrived.Add(w.SLA) }

// presenceCTE lists who has a desk page open on an instance holding its lease (the view
// live_presence), with what they chose to be (availability) and since when.
const presenceCTE = `
	presence_now AS (
		SELECT p.user_id, coalesce(a.status, 'available') AS status, a.since
		FROM (SELECT DISTINCT user_id FROM live_presence) p LEFT JOIN availability a ON a.user_id = p.user_id)`

// Health reads every enabled queue's line of the roster in one query.
func (s *Service) Health(ctx context.Context) ([]Health, error) {
	rows, err := s.db.Query(ctx, `WITH `+presenceCTE+`
		SELECT q.name,
			count(h.id) FILTER (WHERE h.status = 'queued'),
			count(h.id) FILTER (WHERE h.status = 'reserved'),
			count(h.id) FILTER (WHERE h.status NOT IN ('queued', 'reserved')),
			min(h.enqueued_at) FILTER (WHERE h.status = 'queued'),
			q.sla,
			(SELECT count(*) FROM queue_members m JOIN presence_now p ON p.user_id = m.user_id
				WHERE m.queue_id = q.id AND p.status = 'available')
		FROM queues q LEFT JOIN handoffs h ON h.queue_id = q.id
			AND h.closed_at IS NULL
		WHERE q.enabled GROUP BY q.id ORDER BY q.name`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Health])
}

// Roster reads the whole roster in five queries.
func (s *Service) Roster(ctx context.Context) (Roster, error) {
	var r Roster
	var err error
	if r.Queues, err = s.Health(ctx); err != nil {
		return r, err
	}
	rows, err := s.db.Query(ctx, `WITH `+presenceCTE+`
		SELECT u.id, u.display_name, u.email, u.role, coalesce(p.status, 'offline'), p.since,
			(SELECT count(*) FROM handoffs h WHERE h.assignee_id = u.id
				AND h.closed_at IS NULL),
			u.capacity,
			coalesce((SELECT array_agg(q.name ORDER BY q.name) FROM queue_members m JOIN queues q ON q.id = m.queue_id
				WHERE m.user_id = u.id), '{}'),
			coalesce((SELECT h.handoff_id FROM offers o JOIN handoffs h ON h.id = o.handoff_id
				WHERE o.user_id = u.id AND o.ended_at IS NULL), ''),
			r.rings, r.accepted,
			coalesce((SELECT o.outcome FROM offers o WHERE o.user_id = u.id AND o.offered_at > now() - $1::interval
				AND o.ended_at IS NOT NULL ORDER BY o.offered_at DESC LIMIT 1), '')
		FROM users u LEFT JOIN presence_now p ON p.user_id = u.id
		CROSS JOIN LATERAL (SELECT count(*) AS rings, count(*) FILTER (WHERE o.outcome = 'accepted') AS accepted
			FROM offers o WHERE o.user_id = u.id AND o.offered_at > now() - $1::interval) r
		WHERE NOT u.disabled AND u.role IN ('agent', 'supervisor')
		ORDER BY coalesce(p.status, 'offline') = 'offline', u.display_name`, RingWindow)
	if err != nil {
		return r, err
	}
	if r.Agents, err = pgx.CollectRows(rows, pgx.RowToStructByPos[AgentLoad]); err != nil {
		return r, err
	}
	rows, err = s.db.Query(ctx, `
		SELECT h.handoff_id, h.queue_id, q.name, h.status, h.assignee_id, u.display_name, h.accepted_at, count(*) OVER ()
		FROM handoffs h JOIN queues q ON q.id = h.queue_id JOIN users u ON u.id = h.assignee_id
		WHERE h.status IN ('reserved', 'accepted') AND h.assignee_id IS NOT NULL
		ORDER BY h.accepted_at NULLS LAST, h.id LIMIT $1`, RosterHeld)
	if err != nil {
		return r, err
	}
	var held Held
	if _, err := pgx.ForEachRow(rows, []any{&held.PublicID, &held.QueueID, &held.Queue, &held.Status, &held.HolderID, &held.Holder,
		&held.Since, &r.HeldCount}, func() error {
		r.Held = append(r.Held, held)
		return nil
	}); err != nil {
		return r, err
	}
	queues := make([]int64, len(r.Held))
	for i, h := range r.Held {
		queues[i] = h.QueueID
	}
	if r.Assignables, err = AssignablesIn(ctx, s.db, queues); err != nil {
		return r, err
	}
	// Ordered by when the SLA ends, a fact of each package: the list changes only with the desk,
	// and the page counts down to each end itself (views.SLAList).
	rows, err = s.db.Query(ctx, `
		SELECT h.handoff_id, q.name, h.status, h.created_at, q.sla
		FROM handoffs h JOIN queues q ON q.id = h.queue_id
		WHERE h.status IN ('queued', 'reserved') AND h.accepted_at IS NULL
		ORDER BY h.created_at + q.sla, h.id LIMIT $1`, RosterWaiting)
	if err != nil {
		return r, err
	}
	r.Waiting, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Waiting])
	return r, err
}

// OnlineWithRoom reports whether the user has a desk open and is available and holds fewer packages
// than their capacity: the condition for offering them a package first.
func OnlineWithRoom(ctx context.Context, db Querier, userID int64) (bool, error) {
	var ok bool
	err := db.QueryRow(ctx, `WITH `+presenceCTE+`
		SELECT EXISTS (SELECT 1 FROM presence_now p JOIN users u ON u.id = p.user_id
			WHERE p.user_id = $1 AND p.status = 'available' AND u.capacity > (SELECT count(*) FROM handoffs
				WHERE assignee_id = u.id AND closed_at IS NULL))`,
		userID).Scan(&ok)
	return ok, err
}

// AgentsOnline counts the queue's members who have a desk open and are available.
func AgentsOnline(ctx context.Context, db Querier, queueID int64) (int, error) {
	var n int
	err := db.QueryRow(ctx, `WITH `+presenceCTE+`
		SELECT count(*) FROM queue_members m JOIN presence_now p ON p.user_id = m.user_id
		WHERE m.queue_id = $1 AND p.status = 'available'`, queueID).Scan(&n)
	return n, err
}

// SeenNow lists when each person with a page open was last heard from, across instances: the
// admin's list of users shows it before their last login.
func (s *Service) SeenNow(ctx context.Context) (map[int64]time.Time, error) {
	rows, err := s.db.Query(ctx, `SELECT user_id, max(seen_at) FROM live_presence GROUP BY user_id`)
	if err != nil {
		return nil, err
	}
	seen := map[int64]time.Time{}
	var id int64
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &at}, func() error {
		seen[id] = at
		return nil
	})
	return seen, err
}
