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

// Roster is what supervisors watch: every queue's health and every agent's presence and load.
type Roster struct {
	Queues []Health
	Agents []AgentLoad
}

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

// Roster reads the whole roster in two queries.
func (s *Service) Roster(ctx context.Context) (Roster, error) {
	var r Roster
	var err error
	if r.Queues, err = s.Health(ctx); err != nil {
		return r, err
	}
	rows, err := s.db.Query(ctx, `WITH `+presenceCTE+`
		SELECT u.id, u.display_name, u.role, coalesce(p.status, 'offline'), p.since,
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
	r.Agents, err = pgx.CollectRows(rows, pgx.RowToStructByPos[AgentLoad])
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
