package handoff

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/queue"
)

// Return-to-bot reason codes: why a human sent the conversation back. They feed the bots' evals.
var ReturnReasons = []string{"resolved_by_policy", "wrong_escalation", "needs_more_info", "out_of_scope", "duplicate"}

// Resolution codes an agent closes a package with.
var ResolutionCodes = []string{"solved", "refunded", "workaround", "no_fault_found", "customer_unreachable"}

// Actions are what people do with packages at the desk. Each one commits with the live event, the
// audit row and the bot's webhook it writes (see record); the common ones need no answer from
// PostgreSQL before their end and share a transaction with other agents' (see trips).
type Actions struct {
	db      *pgxpool.Pool
	now     func() time.Time
	changed func() // called after a commit, to wake the live desk
	holds   holds
	trips   *trips
}

// NewActions returns Actions over db; changed is called after every committed change.
func NewActions(db *pgxpool.Pool, changed func()) *Actions {
	if changed == nil {
		changed = func() {}
	}
	return &Actions{db: db, now: time.Now, changed: changed, holds: holds{m: make(map[string]hold)},
		trips: newTrips(db)}
}

// held is a package row locked for an action, with its queue.
type held struct {
	ID              int64
	PublicID        string
	Status          Status
	AssigneeID      *int64
	ReservedUntil   *time.Time
	RejectedBy      []int64
	Rejections      int
	NeedsSupervisor bool
	OfferedTo       *int64
	OfferedUntil    *time.Time
	APIKeyID        int64
	Queue           queue.Queue
	// Member says whether the acting user works the package's queue.
	Member bool
}

func (h held) heldBy(userID int64) bool { return h.AssigneeID != nil && *h.AssigneeID == userID }

// hold is what this instance remembers of the locked package once the user holds it.
func (h held) hold(userID int64) hold {
	return hold{publicID: h.PublicID, rowID: h.ID, apiKeyID: h.APIKeyID, queueID: h.Queue.ID, queue: h.Queue.Name, userID: userID}
}

// hold is what this instance remembers of a package it reserved or accepted for an agent: the
// row and where it is, so that the agent's next action on it goes with its records in one round
// trip, without reading the row first. A hold goes stale when the sweeper takes a reservation
// back, a supervisor steps in or another instance moves the package; the fast update checks
// every field it relies on, so a stale hold costs only the slow path.
type hold struct {
	publicID                 string
	rowID, apiKeyID, queueID int64
	queue                    string
	userID                   int64 // the holder
}

// to fills in the package's side of c.
func (hd hold) to(c change) change {
	c.HandoffID, c.PublicID, c.QueueID, c.Queue, c.APIKeyID = hd.rowID, hd.publicID, hd.queueID, hd.queue, hd.apiKeyID
	return c
}

// holdsMax bounds the holds an instance remembers; past it they start over rather than grow.
// Agents hold a few packages each, so it is only reached when holds are left behind (a package
// another instance closed), and forgetting one costs only a slow path.
const holdsMax = 10000

// holds are the packages this instance reserved or accepted for agents, by public id.
type holds struct {
	mu sync.Mutex
	m  map[string]hold
}

// get returns the hold on the package if the user is its holder.
func (hs *holds) get(publicID string, userID int64) (hold, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hd, ok := hs.m[publicID]
	return hd, ok && hd.userID == userID
}

func (hs *holds) put(hd hold) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.m) >= holdsMax {
		clear(hs.m)
	}
	hs.m[hd.publicID] = hd
}

func (hs *holds) drop(publicID string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	delete(hs.m, publicID)
}

// notAsExpected is the SQLSTATE expect_change raises (migrations/00006) when a fast update
// changed no row.
const notAsExpected = "HD001"

// fast makes a change to a package the user holds as hd remembers, in one trip: the update,
// bound to the remembered row, queue and holder and to the user's right to act in that queue,
// travels with the change's records. set and where may use $6 onwards, from args. It reports
// false, with nothing written, when the package is no longer as remembered: the caller then takes
// the slow path, which says why, or succeeds when the change is still allowed.
func (a *Actions) fast(ctx context.Context, user auth.User, hd hold, set, where string, args []any, c change) (bool, error) {
	b := &pgx.Batch{}
	b.Queue(`
		WITH changed AS (
			UPDATE handoffs h SET `+set+`
			WHERE h.id = $1 AND h.queue_id = $2 AND h.assignee_id = $4 AND `+where+`
				AND EXISTS (SELECT 1 FROM queues q WHERE q.id = $2 AND q.name = $3)
				AND ($5 OR EXISTS (SELECT 1 FROM queue_members m WHERE m.queue_id = $2 AND m.user_id = $4))
			RETURNING 1)
		SELECT expect_change(count(*)) FROM changed`,
		append([]any{hd.rowID, hd.queueID, hd.queue, user.ID, user.Role.AtLeast(auth.RoleSupervisor)}, args...)...)
	if err := queueChanges(b, c); err != nil {
		return false, err
	}
	err := a.trips.send(ctx, b, execAll(b))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == notAsExpected {
		a.holds.drop(hd.publicID)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	a.changed()
	return true, nil
}

// lock takes the package's row lock for the rest of tx: whoever comes second waits, then sees the
// first one's result. That is what makes accept exactly-once across agents and instances. The
// same round trip reads the package's queue and whether the user works it.
func lock(ctx context.Context, tx pgx.Tx, user auth.User, handoffID string) (held, error) {
	var h held
	targets := append([]any{&h.ID, &h.PublicID, &h.Status, &h.AssigneeID, &h.ReservedUntil, &h.RejectedBy, &h.Rejections,
		&h.NeedsSupervisor, &h.OfferedTo, &h.OfferedUntil, &h.APIKeyID, &h.Member}, h.Queue.ScanTargets()...)
	err := tx.QueryRow(ctx, `
		SELECT h.id, h.handoff_id, h.status, h.assignee_id, h.reserved_until, h.rejected_by, h.rejections,
			h.needs_supervisor, h.offered_to, h.offered_until, h.api_key_id,
			EXISTS (SELECT 1 FROM queue_members m WHERE m.queue_id = h.queue_id AND m.user_id = $2), q.*
		FROM handoffs h, LATERAL (SELECT `+queue.Columns+` FROM queues WHERE id = h.queue_id) q
		WHERE h.handoff_id = $1 FOR UPDATE OF h`, handoffID, user.ID).Scan(targets...)
	if errors.Is(err, pgx.ErrNoRows) {
		return held{}, desk.Errorf(desk.NotFound, "no handoff %q", handoffID)
	}
	return h, err
}

// lockToAct locks the package and checks that the user may act in its queue.
func lockToAct(ctx context.Context, tx pgx.Tx, user auth.User, handoffID string) (held, error) {
	h, err := lock(ctx, tx, user, handoffID)
	if err != nil {
		return held{}, err
	}
	return h, h.mayAct(user)
}

// mayAct checks that the user works the locked package's queue: its members, and supervisors
// anywhere.
func (h held) mayAct(user auth.User) error {
	if !h.Member && !user.Role.AtLeast(auth.RoleSupervisor) {
		return notMember()
	}
	return nil
}

func notMember() error { return desk.Errorf(desk.Forbidden, "you are not a member of this queue") }

// checkRoom locks the agent's own row, so that two tabs of one agent claim one at a time, and
// refuses a claim beyond the agent's capacity. The count is a statement of its own, after the
// lock: a statement that waited for the lock would still count from the snapshot it began with,
// missing the claim the other tab committed meanwhile. Both travel in one round trip.
func checkRoom(ctx context.Context, tx pgx.Tx, user auth.User) error {
	var capacity, holding int
	b := &pgx.Batch{}
	b.Queue(`SELECT capacity FROM users WHERE id = $1 FOR UPDATE`, user.ID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&capacity)
	})
	b.Queue(`SELECT count(*) FROM handoffs WHERE assignee_id = $1 AND status IN `+openStatuses, user.ID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&holding)
	})
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	return roomFor(capacity, holding)
}

func roomFor(capacity, holding int) error {
	if holding >= capacity {
		return &desk.Error{Code: desk.Conflict, Reason: "at_capacity",
			Message: fmt.Sprintf("you already hold %d of your %d packages: resolve or hand one on first", holding, capacity)}
	}
	return nil
}

func (a *Actions) inTx(ctx context.Context, f func(tx pgx.Tx, now time.Time) error) error {
	err := pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error { return f(tx, a.now()) })
	if err == nil {
		a.changed()
	}
	return secondReservation(err)
}

// secondReservation explains the database's refusal of a second reservation to one agent.
func secondReservation(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.ConstraintName == "handoffs_one_reservation_idx" {
		return desk.Errorf(desk.Conflict, "you already hold a reservation: accept or reject it first")
	}
	return err
}

func offeredToOther(h held, userID int64, now time.Time) bool {
	return h.OfferedTo != nil && *h.OfferedTo != userID && h.OfferedUntil != nil && now.Before(*h.OfferedUntil)
}

// nextSQL reserves the package Next takes and records the reservation, in one statement. The
// agent's row is locked so that two tabs of one agent claim one at a time; the claim skips rows
// other agents are claiming; the event and audit rows are written only when a row was claimed.
// It always returns one row, which says why nothing was claimed when nothing was.
// $1 queue name, $2 user, $3 supervisor, $4 now.
const nextSQL = `
	WITH q AS (
		SELECT id, name, reservation_timeout FROM queues WHERE name = $1
	), me AS (
		SELECT u.capacity, (SELECT count(*) FROM handoffs WHERE assignee_id = u.id AND status IN ` + openStatuses + `) AS holding,
			$3 OR EXISTS (SELECT 1 FROM queue_members m, q WHERE m.queue_id = q.id AND m.user_id = u.id) AS may_act
		FROM users u WHERE u.id = $2 FOR UPDATE
	), pick AS (
		-- Scalar subqueries, not joins, so that the queue's id is a constant to the planner and the
		-- claim reads handoffs_queue_page_idx in claim order instead of sorting the queue.
		SELECT h.id FROM handoffs h
		WHERE h.queue_id = (SELECT id FROM q) AND (SELECT may_act AND holding < capacity FROM me)
			AND h.status = 'queued' AND NOT ($2 = ANY (h.rejected_by))
			AND (NOT h.needs_supervisor OR $3)
			AND (h.offered_to IS NULL OR h.offered_to = $2 OR h.offered_until <= $4)
		ORDER BY h.priority_rank, h.enqueued_at, h.id
		LIMIT 1 FOR UPDATE SKIP LOCKED
	), reserved AS (
		UPDATE handoffs h SET status = 'reserved', assignee_id = $2, reserved_until = $4::timestamptz + q.reservation_timeout,
			updated_at = $4
		FROM pick, q WHERE h.id = pick.id
		RETURNING h.id, h.handoff_id, h.api_key_id, h.reserved_until
	), event AS (
		INSERT INTO desk_events (queue_id, handoff_id, kind, created_at)
		SELECT q.id, r.id, 'reserved', $4 FROM reserved r, q
	), audit AS (
		INSERT INTO audit_log (at, actor_user, action, handoff_id, detail)
		SELECT $4, $2, 'reserved', r.id, jsonb_build_object('status', 'reserved', 'queue', q.name, 'reserved_until', r.reserved_until)
		FROM reserved r, q
	)
	SELECT q.id, q.name, coalesce(me.may_act, false), coalesce(me.capacity, 0), coalesce(me.holding, 0),
		r.id, r.handoff_id, r.api_key_id
	FROM (SELECT) one LEFT JOIN q ON true LEFT JOIN me ON true LEFT JOIN reserved r ON true`

// Next reserves the highest-priority, oldest package the agent may take in the queue. The agent
// accepts it within the queue's reservation timeout, or it goes back.
func (a *Actions) Next(ctx context.Context, user auth.User, queueName string) (string, error) {
	var queueID, rowID, apiKeyID *int64
	var name, handoffID *string
	var mayAct bool
	var capacity, holding int
	b := &pgx.Batch{}
	b.Queue(nextSQL, queueName, user.ID, user.Role.AtLeast(auth.RoleSupervisor), a.now())
	err := a.trips.send(ctx, b, func(br pgx.BatchResults) error {
		return br.QueryRow().Scan(&queueID, &name, &mayAct, &capacity, &holding, &rowID, &handoffID, &apiKeyID)
	})
	switch {
	case err != nil:
		return "", secondReservation(err)
	case queueID == nil:
		return "", desk.Errorf(desk.NotFound, "queue %q does not exist", queueName)
	case !mayAct:
		return "", notMember()
	case handoffID == nil:
		if err := roomFor(capacity, holding); err != nil {
			return "", err
		}
		return "", desk.Errorf(desk.NotFound, "nothing is waiting for you in %s", queueName)
	}
	a.changed()
	a.holds.put(hold{publicID: *handoffID, rowID: *rowID, apiKeyID: *apiKeyID, queueID: *queueID, queue: *name, userID: user.ID})
	return *handoffID, nil
}

// Accept claims a package for the agent: the reservation they hold, or a waiting package they
// pick from the list. Across all agents and instances exactly one accept wins.
func (a *Actions) Accept(ctx context.Context, user auth.User, handoffID string) error {
	accepted := func(hd hold, now time.Time) change {
		return hd.to(change{Kind: "accepted", Status: StatusAccepted, ActorUser: &user.ID, Assignee: user.DisplayName, At: now})
	}
	if hd, ok := a.holds.get(handoffID, user.ID); ok {
		now := a.now()
		done, err := a.fast(ctx, user, hd, `status = 'accepted', reserved_until = NULL, accepted_at = $6, updated_at = $6`,
			`h.status = 'reserved'`, []any{now}, accepted(hd, now))
		if done || err != nil {
			return err
		}
	}
	var hd hold
	err := a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lockToAct(ctx, tx, user, handoffID)
		if err != nil {
			return err
		}
		switch {
		case h.Status == StatusReserved && h.heldBy(user.ID):
		case h.Status == StatusQueued:
			if slices.Contains(h.RejectedBy, user.ID) {
				return desk.Errorf(desk.Conflict, "you rejected %s; it is for someone else now", handoffID)
			}
			if h.NeedsSupervisor && !user.Role.AtLeast(auth.RoleSupervisor) {
				return desk.Errorf(desk.Forbidden, "%s was rejected %d times and waits for a supervisor", handoffID, h.Rejections)
			}
			if offeredToOther(h, user.ID, now) {
				return desk.Errorf(desk.Conflict, "%s is offered to its preferred agent until %s", handoffID, h.OfferedUntil.Format(time.Kitchen))
			}
			if err := checkRoom(ctx, tx, user); err != nil {
				return err
			}
		default:
			return alreadyTaken(ctx, tx, h)
		}
		hd = h.hold(user.ID)
		return apply(ctx, tx, `
			UPDATE handoffs SET status = 'accepted', assignee_id = $2, reserved_until = NULL, accepted_at = $3, updated_at = $3
			WHERE id = $1`, []any{h.ID, user.ID, now}, accepted(hd, now))
	})
	if err == nil {
		a.holds.put(hd)
	}
	return err
}

// alreadyTaken explains why a package cannot be claimed.
func alreadyTaken(ctx context.Context, tx pgx.Tx, h held) error {
	if h.AssigneeID == nil {
		return desk.Errorf(desk.Conflict, "%s is %s", h.PublicID, h.Status)
	}
	var name string
	if err := tx.QueryRow(ctx, `SELECT display_name FROM users WHERE id = $1`, *h.AssigneeID).Scan(&name); err != nil {
		return err
	}
	return desk.Errorf(desk.Conflict, "%s is already %s by %s", h.PublicID, h.Status, name)
}

// requireHolder lets the agent who holds the package act on it, and supervisors step in.
func requireHolder(user auth.User, h held, statuses ...Status) error {
	if !slices.Contains(statuses, h.Status) {
		return desk.Errorf(desk.Conflict, "%s is %s", h.PublicID, h.Status)
	}
	if !h.heldBy(user.ID) && !user.Role.AtLeast(auth.RoleSupervisor) {
		return desk.Errorf(desk.Forbidden, "%s is not yours", h.PublicID)
	}
	return nil
}

// Reject hands a reserved or accepted package back to its queue (or to another queue the
// transfer policy allows). The agent is not offered it again; after the queue's max rejections
// only a supervisor can take it. It returns the queue the package was in.
func (a *Actions) Reject(ctx context.Context, user auth.User, handoffID, reason, toQueue string) (from string, err error) {
	if reason == "" {
		return "", desk.Errorf(desk.Invalid, "a rejection needs a reason")
	}
	err = a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lock(ctx, tx, user, handoffID)
		if err != nil {
			return err
		}
		if err := requireHolder(user, h, StatusReserved, StatusAccepted); err != nil {
			return err
		}
		target := h.Queue
		if toQueue != "" && toQueue != h.Queue.Name {
			if target, err = transferTarget(ctx, tx, h.Queue, toQueue); err != nil {
				return err
			}
		}
		rejections := h.Rejections + 1
		needsSupervisor := rejections >= h.Queue.MaxRejections
		from = h.Queue.Name
		return apply(ctx, tx, `
			UPDATE handoffs SET status = 'queued', assignee_id = NULL, reserved_until = NULL, accepted_at = NULL,
				rejected_by = array_append(rejected_by, $2), rejections = $3, needs_supervisor = $4,
				queue_id = $5, offered_to = NULL, offered_until = NULL, updated_at = $6
			WHERE id = $1`, []any{h.ID, user.ID, rejections, needsSupervisor, target.ID, now},
			change{HandoffID: h.ID, PublicID: h.PublicID, QueueID: target.ID, Queue: target.Name, FromQueueID: h.Queue.ID,
				APIKeyID: h.APIKeyID, Kind: "rejected", Status: StatusQueued, ActorUser: &user.ID, Reason: reason, At: now,
				Detail: map[string]any{"rejections": rejections, "needs_supervisor": needsSupervisor, "from_queue": h.Queue.Name}})
	})
	return a.released(handoffID, from, err)
}

// released forgets the hold on a package that left its holder's hands.
func (a *Actions) released(handoffID, from string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	a.holds.drop(handoffID)
	return from, nil
}

// ReturnToBot closes the package and hands the conversation back to the bot with a reason code.
// It returns the queue the package was in.
func (a *Actions) ReturnToBot(ctx context.Context, user auth.User, handoffID, reasonCode, note string) (from string, err error) {
	if !slices.Contains(ReturnReasons, reasonCode) {
		return "", desk.Errorf(desk.Invalid, "reason %q is not one of %v", reasonCode, ReturnReasons)
	}
	return a.close(ctx, user, handoffID, StatusReturnedToBot, "returned_to_bot", reasonCode, note,
		StatusQueued, StatusReserved, StatusAccepted)
}

// Resolve closes an accepted package with a resolution code. It returns the queue the package
// was in.
func (a *Actions) Resolve(ctx context.Context, user auth.User, handoffID, code, note string) (from string, err error) {
	if !slices.Contains(ResolutionCodes, code) {
		return "", desk.Errorf(desk.Invalid, "resolution %q is not one of %v", code, ResolutionCodes)
	}
	return a.close(ctx, user, handoffID, StatusResolved, "resolved", code, note, StatusAccepted)
}

func (a *Actions) close(ctx context.Context, user auth.User, handoffID string, status Status, kind, outcome, note string, from ...Status) (string, error) {
	if len(note) > 2000 {
		return "", desk.Errorf(desk.Invalid, "the note is over 2000 characters")
	}
	closed := func(hd hold, now time.Time) change {
		return hd.to(change{Kind: kind, Status: status, ActorUser: &user.ID, Reason: outcome, Outcome: outcome,
			Note: note, Assignee: user.DisplayName, At: now})
	}
	if hd, ok := a.holds.get(handoffID, user.ID); ok {
		now := a.now()
		done, err := a.fast(ctx, user, hd, `status = $6, outcome = $7, outcome_note = NULLIF($8, ''), closed_at = $9, updated_at = $9,
			reserved_until = NULL`, `h.status = ANY ($10)`, []any{status, outcome, note, now, from}, closed(hd, now))
		if done || err != nil {
			return a.released(handoffID, hd.queue, err)
		}
	}
	var queueName string
	err := a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lockToAct(ctx, tx, user, handoffID)
		if err != nil {
			return err
		}
		if h.Status != StatusQueued || !slices.Contains(from, StatusQueued) {
			if err := requireHolder(user, h, from...); err != nil {
				return err
			}
		}
		queueName = h.Queue.Name
		return apply(ctx, tx, `
			UPDATE handoffs SET status = $2, outcome = $3, outcome_note = NULLIF($4, ''), closed_at = $5, updated_at = $5,
				reserved_until = NULL, assignee_id = coalesce(assignee_id, $6)
			WHERE id = $1`, []any{h.ID, status, outcome, note, now, user.ID}, closed(h.hold(user.ID), now))
	})
	return a.released(handoffID, queueName, err)
}

// transferTarget resolves a queue the policy of from lets packages move to.
func transferTarget(ctx context.Context, tx pgx.Tx, from queue.Queue, name string) (queue.Queue, error) {
	to, err := queue.Enabled(ctx, tx, name)
	if desk.ErrorCode(err) == desk.NotFound {
		return queue.Queue{}, desk.Errorf(desk.Invalid, "no enabled queue is named %q", name)
	}
	if err != nil {
		return queue.Queue{}, err
	}
	if !queue.TransferAllowed(from, to) {
		return queue.Queue{}, desk.Errorf(desk.Forbidden, "%s's transfer policy (%v) does not allow %s", from.Name, from.TransferPolicy, to.Name)
	}
	return to, nil
}

// Transfer moves a package to another queue the transfer policy allows, with a note for the next
// agent. The pair guard applies: a package moved out of a queue cannot be sent back within the
// target queue's cooldown, so two teams cannot bounce a customer. It returns the queue the
// package was in.
func (a *Actions) Transfer(ctx context.Context, user auth.User, handoffID, toQueue, note string) (from string, err error) {
	err = a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lockToAct(ctx, tx, user, handoffID)
		if err != nil {
			return err
		}
		if h.Status != StatusQueued {
			if err := requireHolder(user, h, StatusReserved, StatusAccepted); err != nil {
				return err
			}
		}
		target, err := transferTarget(ctx, tx, h.Queue, toQueue)
		if err != nil {
			return err
		}
		if target.ID == h.Queue.ID {
			return desk.Errorf(desk.Invalid, "%s is already in %s", handoffID, toQueue)
		}
		var bouncedAt *time.Time
		if err := tx.QueryRow(ctx, `
			SELECT max(at) FROM audit_log
			WHERE handoff_id = $1 AND action = 'transferred' AND detail->>'from_queue' = $2 AND at > $3`,
			h.ID, target.Name, now.Add(-target.Guards.PairCooldown)).Scan(&bouncedAt); err != nil {
			return err
		}
		if bouncedAt != nil {
			return &desk.Error{Code: desk.RateLimited, Reason: ReasonCircular, RetryAfter: bouncedAt.Add(target.Guards.PairCooldown).Sub(now),
				Message: fmt.Sprintf("%s left %s less than %s ago; it cannot go back yet", handoffID, target.Name, target.Guards.PairCooldown)}
		}
		from = h.Queue.Name
		if note != "" {
			if _, err := tx.Exec(ctx, `INSERT INTO handoff_notes (handoff_id, author_id, body, created_at) VALUES ($1, $2, $3, $4)`,
				h.ID, user.ID, note, now); err != nil {
				return err
			}
		}
		return apply(ctx, tx, `
			UPDATE handoffs SET queue_id = $2, status = 'queued', assignee_id = NULL, reserved_until = NULL, accepted_at = NULL,
				rejected_by = '{}', needs_supervisor = false, offered_to = NULL, offered_until = NULL,
				expires_at = greatest(expires_at, $3::timestamptz + $4::interval), updated_at = $3
			WHERE id = $1`, []any{h.ID, target.ID, now, target.TTL},
			change{HandoffID: h.ID, PublicID: h.PublicID, QueueID: target.ID, Queue: target.Name, FromQueueID: h.Queue.ID,
				APIKeyID: h.APIKeyID, Kind: "transferred", Status: StatusQueued, ActorUser: &user.ID, Note: note, At: now,
				Detail: map[string]any{"from_queue": h.Queue.Name, "to_queue": target.Name}})
	})
	return a.released(handoffID, from, err)
}
