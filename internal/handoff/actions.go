package handoff

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// Actions are what people do with packages at the desk. Each one is a transaction that also
// writes the live event, the audit row and the bot's webhook (see record).
type Actions struct {
	db      *pgxpool.Pool
	now     func() time.Time
	changed func() // called after a commit, to wake the live desk
}

// NewActions returns Actions over db; changed is called after every committed change.
func NewActions(db *pgxpool.Pool, changed func()) *Actions {
	if changed == nil {
		changed = func() {}
	}
	return &Actions{db: db, now: time.Now, changed: changed}
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
		return desk.Errorf(desk.Forbidden, "you are not a member of this queue")
	}
	return nil
}

// checkRoom locks the agent's own row, so that two tabs of one agent claim one at a time, and
// refuses a claim beyond the agent's capacity.
func checkRoom(ctx context.Context, tx pgx.Tx, user auth.User) error {
	var capacity, holding int
	err := tx.QueryRow(ctx, `
		SELECT u.capacity, (SELECT count(*) FROM handoffs WHERE assignee_id = u.id AND status IN `+openStatuses+`)
		FROM users u WHERE u.id = $1 FOR UPDATE`, user.ID).Scan(&capacity, &holding)
	if err != nil {
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
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.ConstraintName == "handoffs_one_reservation_idx" {
		return desk.Errorf(desk.Conflict, "you already hold a reservation: accept or reject it first")
	}
	return err
}

func offeredToOther(h held, userID int64, now time.Time) bool {
	return h.OfferedTo != nil && *h.OfferedTo != userID && h.OfferedUntil != nil && now.Before(*h.OfferedUntil)
}

// Next reserves the highest-priority, oldest package the agent may take in the queue. The agent
// accepts it within the queue's reservation timeout, or it goes back.
func (a *Actions) Next(ctx context.Context, user auth.User, queueName string) (string, error) {
	var handoffID string
	err := a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		var q queue.Queue
		var member bool
		var capacity, holding int
		// The agent's own row is locked so that two tabs of one agent claim one at a time.
		err := tx.QueryRow(ctx, `
			SELECT q.*, EXISTS (SELECT 1 FROM queue_members m WHERE m.queue_id = q.id AND m.user_id = $2),
				u.capacity, (SELECT count(*) FROM handoffs WHERE assignee_id = u.id AND status IN `+openStatuses+`)
			FROM (SELECT `+queue.Columns+` FROM queues WHERE name = $1) q, users u
			WHERE u.id = $2 FOR UPDATE OF u`, queueName, user.ID).
			Scan(append(q.ScanTargets(), &member, &capacity, &holding)...)
		if errors.Is(err, pgx.ErrNoRows) {
			return desk.Errorf(desk.NotFound, "queue %q does not exist", queueName)
		}
		if err != nil {
			return err
		}
		if err := (held{Member: member}).mayAct(user); err != nil {
			return err
		}
		if err := roomFor(capacity, holding); err != nil {
			return err
		}
		supervisor := user.Role.AtLeast(auth.RoleSupervisor)
		var id, apiKeyID int64
		err = tx.QueryRow(ctx, `
			SELECT id, handoff_id, api_key_id FROM handoffs
			WHERE queue_id = $1 AND status = 'queued' AND NOT ($2 = ANY (rejected_by))
				AND (NOT needs_supervisor OR $3)
				AND (offered_to IS NULL OR offered_to = $2 OR offered_until <= $4)
			ORDER BY priority_rank, enqueued_at, id
			LIMIT 1 FOR UPDATE SKIP LOCKED`, q.ID, user.ID, supervisor, now).Scan(&id, &handoffID, &apiKeyID)
		if errors.Is(err, pgx.ErrNoRows) {
			return desk.Errorf(desk.NotFound, "nothing is waiting for you in %s", queueName)
		}
		if err != nil {
			return err
		}
		until := now.Add(q.ReservationTimeout)
		return apply(ctx, tx, `
			UPDATE handoffs SET status = 'reserved', assignee_id = $2, reserved_until = $3, updated_at = $4
			WHERE id = $1`, []any{id, user.ID, until, now},
			change{HandoffID: id, PublicID: handoffID, QueueID: q.ID, Queue: q.Name, APIKeyID: apiKeyID,
				Kind: "reserved", Status: StatusReserved, ActorUser: &user.ID, Assignee: user.DisplayName, At: now,
				Detail: map[string]any{"reserved_until": until}})
	})
	return handoffID, err
}

// Accept claims a package for the agent: the reservation they hold, or a waiting package they
// pick from the list. Across all agents and instances exactly one accept wins.
func (a *Actions) Accept(ctx context.Context, user auth.User, handoffID string) error {
	return a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
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
		return apply(ctx, tx, `
			UPDATE handoffs SET status = 'accepted', assignee_id = $2, reserved_until = NULL, accepted_at = $3, updated_at = $3
			WHERE id = $1`, []any{h.ID, user.ID, now},
			change{HandoffID: h.ID, PublicID: h.PublicID, QueueID: h.Queue.ID, Queue: h.Queue.Name,
				APIKeyID: h.APIKeyID, Kind: "accepted", Status: StatusAccepted, ActorUser: &user.ID, Assignee: user.DisplayName, At: now})
	})
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
// only a supervisor can take it.
func (a *Actions) Reject(ctx context.Context, user auth.User, handoffID, reason, toQueue string) error {
	if reason == "" {
		return desk.Errorf(desk.Invalid, "a rejection needs a reason")
	}
	return a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
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
		return apply(ctx, tx, `
			UPDATE handoffs SET status = 'queued', assignee_id = NULL, reserved_until = NULL, accepted_at = NULL,
				rejected_by = array_append(rejected_by, $2), rejections = $3, needs_supervisor = $4,
				queue_id = $5, offered_to = NULL, offered_until = NULL, updated_at = $6
			WHERE id = $1`, []any{h.ID, user.ID, rejections, needsSupervisor, target.ID, now},
			change{HandoffID: h.ID, PublicID: h.PublicID, QueueID: target.ID, Queue: target.Name, FromQueueID: h.Queue.ID,
				APIKeyID: h.APIKeyID, Kind: "rejected", Status: StatusQueued, ActorUser: &user.ID, Reason: reason, At: now,
				Detail: map[string]any{"rejections": rejections, "needs_supervisor": needsSupervisor, "from_queue": h.Queue.Name}})
	})
}

// ReturnToBot closes the package and hands the conversation back to the bot with a reason code.
func (a *Actions) ReturnToBot(ctx context.Context, user auth.User, handoffID, reasonCode, note string) error {
	if !slices.Contains(ReturnReasons, reasonCode) {
		return desk.Errorf(desk.Invalid, "reason %q is not one of %v", reasonCode, ReturnReasons)
	}
	return a.close(ctx, user, handoffID, StatusReturnedToBot, "returned_to_bot", reasonCode, note,
		StatusQueued, StatusReserved, StatusAccepted)
}

// Resolve closes an accepted package with a resolution code.
func (a *Actions) Resolve(ctx context.Context, user auth.User, handoffID, code, note string) error {
	if !slices.Contains(ResolutionCodes, code) {
		return desk.Errorf(desk.Invalid, "resolution %q is not one of %v", code, ResolutionCodes)
	}
	return a.close(ctx, user, handoffID, StatusResolved, "resolved", code, note, StatusAccepted)
}

func (a *Actions) close(ctx context.Context, user auth.User, handoffID string, status Status, kind, outcome, note string, from ...Status) error {
	if len(note) > 2000 {
		return desk.Errorf(desk.Invalid, "the note is over 2000 characters")
	}
	return a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lockToAct(ctx, tx, user, handoffID)
		if err != nil {
			return err
		}
		if h.Status != StatusQueued || !slices.Contains(from, StatusQueued) {
			if err := requireHolder(user, h, from...); err != nil {
				return err
			}
		}
		return apply(ctx, tx, `
			UPDATE handoffs SET status = $2, outcome = $3, outcome_note = NULLIF($4, ''), closed_at = $5, updated_at = $5,
				reserved_until = NULL, assignee_id = coalesce(assignee_id, $6)
			WHERE id = $1`, []any{h.ID, status, outcome, note, now, user.ID},
			change{HandoffID: h.ID, PublicID: h.PublicID, QueueID: h.Queue.ID, Queue: h.Queue.Name,
				APIKeyID: h.APIKeyID, Kind: kind, Status: status, ActorUser: &user.ID, Reason: outcome, Outcome: outcome,
				Note: note, Assignee: user.DisplayName, At: now})
	})
}

// transferTarget resolves a queue the policy of from lets packages move to.
func transferTarget(ctx context.Context, tx pgx.Tx, from queue.Queue, name string) (queue.Queue, error) {
	to, err := queue.ScanQueue(tx.QueryRow(ctx, `SELECT `+queue.Columns+` FROM queues WHERE name = $1 AND enabled`, name))
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
// target queue's cooldown, so two teams cannot bounce a customer.
func (a *Actions) Transfer(ctx context.Context, user auth.User, handoffID, toQueue, note string) error {
	return a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
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
}
