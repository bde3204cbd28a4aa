// Package actions is the desk's work on a package: take next, accept, reject, return to the bot,
// transfer, resolve, a bot's cancel, and the sweeper that takes back reservations and expires
// what nobody claimed. Who may do what is one function, Check (rules.go). Every change commits
// with its row in the event log and, where the bot cares, its webhook.
//
// The common actions on a package this instance reserved or accepted for the agent take a fast
// path: their update goes with its records in one round trip, bound to what the instance
// remembers of the package (holds.go), and the round trips of many agents share one commit
// (commit.Trips). Everything else locks the package's row, checks the rules and then writes.
package actions

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/commit"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/metrics"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/savedreply"
	"github.com/handoffdesk/desk/internal/tracing"
	"github.com/handoffdesk/desk/internal/webhook"
)

// MaxNoteChars caps every reason and note an agent writes. The notes table holds 4,000
// characters (migration 00004); the same cap on rejection reasons and closing notes keeps the
// append-only event log and the bot's webhooks from carrying megabytes.
const MaxNoteChars = 4000

// checkNote refuses a reason or note over MaxNoteChars, or holding a mask pasted from the page
// (the bot and the eval record would get the bullets), naming field, the form field it comes in.
func checkNote(field, text string) error {
	if n := utf8.RuneCountInString(text); n > MaxNoteChars {
		return &desk.Error{Code: desk.Invalid, Details: map[string]string{"field": field},
			Message: fmt.Sprintf("the %s is %d characters; at most %d are allowed", field, n, MaxNoteChars)}
	}
	if strings.Contains(text, handoff.Masked) {
		return &desk.Error{Code: desk.Invalid, Details: map[string]string{"field": field},
			Message: fmt.Sprintf("the %s contains %s, which stands for a value you may not see: write the text out or leave it out", field, handoff.Masked)}
	}
	return nil
}

// Service does the desk's work on packages.
type Service struct {
	db      *pgxpool.Pool
	now     func() time.Time
	changed func() // called after a commit, to wake the live desk
	holds   holds
	trips   *commit.Trips
	counts  *metrics.Metrics
	// due carries to the sweeper when a ring this instance made runs out (ring.go).
	due     chan time.Time
	tracing *tracing.Tracing
	// base is the desk's address (BASE_URL), which the hand-back's thread link starts with.
	base string
}

// New returns a Service over db that tells time with now, calls changed after every committed
// change, observes each accept's and resolution's time in counts (nil: nowhere) and traces each
// action with traces (nil: not at all). base is the desk's address (BASE_URL), which the
// hand-back's thread link starts with ("": the link is the thread's path alone, for tools that
// close packages where no bot follows links).
func New(db *pgxpool.Pool, now func() time.Time, changed func(), counts *metrics.Metrics, traces *tracing.Tracing, base string) *Service {
	if changed == nil {
		changed = func() {}
	}
	if counts == nil {
		counts = metrics.New(nil)
	}
	if traces == nil {
		traces = tracing.Off()
	}
	return &Service{db: db, now: now, changed: changed, holds: holds{m: make(map[string]hold)}, trips: commit.NewTrips(db), counts: counts,
		due: make(chan time.Time, 1), tracing: traces, base: base}
}

// held is a package row locked for an action, with its queue.
type held struct {
	State
	ID       int64
	APIKeyID int64
	Queue    queue.Queue
	// Member says whether the acting user works the package's queue.
	Member bool
	// CreatedAt is when the package came in, which time to accept and to resolution count from.
	CreatedAt time.Time
	// Warm says that the package is in its warm phase, ringing agents (ring.go).
	Warm bool
	// Trace is the package's stored trace context.
	Trace *string
}

// seenBy is what user sees of the package by its queue's PII rule: what they write is recorded
// with whether they could see the contact then (handoff.Writer).
func (h held) seenBy(user auth.User) handoff.Visibility {
	return handoff.VisibilityFor(user.Role, handoff.PIIRule{MinRole: h.Queue.PIIMinRole,
		EntityKeys: h.Queue.PIIEntityKeys, WithholdTranscript: h.Queue.WithholdTranscript})
}

// hold is what this instance remembers of the locked package once the user holds it.
func (h held) hold(userID int64) hold {
	return hold{publicID: h.PublicID, rowID: h.ID, apiKeyID: h.APIKeyID, queueID: h.Queue.ID, queue: h.Queue.Name, userID: userID,
		createdAt: h.CreatedAt, trace: h.Trace}
}

// check applies the rules to the locked package.
func (h held) check(act Action, user auth.User, now time.Time) error {
	return Check(act, user, h.Member, h.State, now)
}

// lock takes the package's row lock for the rest of tx: whoever comes second waits, then sees the
// first one's result. That is what makes accept exactly-once across agents and instances. The
// same statement reads, across their owners' tables, the assignee's name and whether the user
// works the package's queue; the queue follows. The action's span links to the package.
func lock(ctx context.Context, tx pgx.Tx, user auth.User, handoffID string) (held, error) {
	var h held
	var queueID int64
	err := tx.QueryRow(ctx, `
		SELECT h.id, h.handoff_id, h.status, h.assignee_id, coalesce(u.display_name, ''), h.rejected_by, h.rejections,
			h.needs_supervisor, h.offered_to, h.offered_until, h.api_key_id, h.queue_id,
			EXISTS (SELECT 1 FROM queue_members m WHERE m.queue_id = h.queue_id AND m.user_id = $2), h.created_at,
			h.warm_until IS NOT NULL,
			EXISTS (SELECT 1 FROM offers o WHERE o.handoff_id = h.id AND o.ended_at IS NULL AND o.user_id = h.offered_to),
			(SELECT a.requested_by FROM approvals a WHERE a.handoff_id = h.id AND a.state = 'pending'),
			h.trace_parent
		FROM handoffs h LEFT JOIN users u ON u.id = h.assignee_id
		WHERE h.handoff_id = $1 FOR UPDATE OF h`, handoffID, user.ID).Scan(
		&h.ID, &h.PublicID, &h.Status, &h.AssigneeID, &h.Assignee, &h.RejectedBy, &h.Rejections,
		&h.NeedsSupervisor, &h.OfferedTo, &h.OfferedUntil, &h.APIKeyID, &queueID, &h.Member, &h.CreatedAt,
		&h.Warm, &h.Ringing, &h.ApprovalBy, &h.Trace)
	if errors.Is(err, pgx.ErrNoRows) {
		return held{}, desk.Errorf(desk.NotFound, "no handoff %q", handoffID)
	}
	if err != nil {
		return held{}, err
	}
	tracing.LinkPackage(ctx, h.Trace)
	h.Queue, err = queue.ByID(ctx, tx, queueID)
	return h, err
}

// lockTo locks the package and checks that the user may do act to it.
func lockTo(ctx context.Context, tx pgx.Tx, act Action, user auth.User, handoffID string, now time.Time) (held, error) {
	h, err := lock(ctx, tx, user, handoffID)
	if err != nil {
		return held{}, err
	}
	return h, h.check(act, user, now)
}

// checkRoom locks the agent's own row, so that two tabs of one agent claim one at a time, and
// refuses a claim beyond the agent's capacity. The count is a statement of its own, after the
// lock: a statement that waited for the lock would still count from the snapshot it began with,
// missing the claim the other tab committed meanwhile. Both travel in one round trip.
func checkRoom(ctx context.Context, tx pgx.Tx, user auth.User) error {
	capacity, holding, err := lockLoad(ctx, tx, user.ID)
	if err != nil {
		return err
	}
	return roomFor(capacity, holding)
}

// lockLoad locks the user's row and counts the packages they hold, for a claim or an assignment
// that must not take them past their capacity.
func lockLoad(ctx context.Context, tx pgx.Tx, userID int64) (capacity, holding int, err error) {
	b := &pgx.Batch{}
	b.Queue(`SELECT capacity FROM users WHERE id = $1 FOR UPDATE`, userID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&capacity)
	})
	b.Queue(`SELECT count(*) FROM handoffs WHERE assignee_id = $1 AND closed_at IS NULL`, userID).
		QueryRow(func(row pgx.Row) error { return row.Scan(&holding) })
	err = tx.SendBatch(ctx, b).Close()
	return capacity, holding, err
}

func roomFor(capacity, holding int) error {
	if holding >= capacity {
		return &desk.Error{Code: desk.Conflict, Reason: "at_capacity",
			Message: fmt.Sprintf("you already hold %d of your %d packages: resolve or hand one on first", holding, capacity)}
	}
	return nil
}

func (a *Service) inTx(ctx context.Context, f func(tx pgx.Tx, now time.Time) error) error {
	err := pgx.BeginFunc(ctx, a.db, func(tx pgx.Tx) error { return f(tx, a.now()) })
	if err == nil {
		a.changed()
	}
	return secondReservation(err)
}

// apply runs the statement that makes a change and records the change, with the eval records of
// its outcome, in one round trip.
func apply(ctx context.Context, tx pgx.Tx, update string, args []any, c events.Change, outcomes ...evals.Outcome) error {
	b := &pgx.Batch{}
	b.Queue(update, args...)
	if err := record(ctx, b, c, outcomes); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}

// record adds a change's log row and webhook, and the eval records of its outcome, to b. The
// webhook remembers the span of ctx, the action's, for its delivery to link to.
func record(ctx context.Context, b *pgx.Batch, c events.Change, outcomes []evals.Outcome) error {
	c.Trace = tracing.Stored(ctx)
	for _, o := range outcomes {
		evals.QueueOutcome(b, o)
	}
	return events.Queue(b, c)
}

// secondReservation explains the database's refusal of a second reservation to one agent.
func secondReservation(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.ConstraintName == "handoffs_one_reservation_idx" {
		return desk.Errorf(desk.Conflict, "you already hold a reservation: accept or reject it first")
	}
	return err
}

// nextSQL reserves the package Next takes and records the reservation, in one statement. The
// agent's row is locked so that two tabs of one agent claim one at a time; the claim skips rows
// other agents are claiming; the event is written only when a row was claimed. It always returns
// one row, which says why nothing was claimed when nothing was. It is the claim half of Check's
// Accept rule, written as a query over the queue. An agent who already holds a reservation is
// given that one again, claiming nothing: the answer to their last Next was lost (a dropped
// connection, an instance killed), and a refusal would leave them stuck until it timed out.
//
// A warm package that rings another agent is skipped: its ring is its offer, and only the rung
// agent may take it; the agent it rings may take it with Next as with the ring's accept. A warm
// package that rings nobody (every qualifying agent is busy) may be taken, and the reservation
// counts as its offer: its warm phase stays open (warm_until is kept), so the accept ends it with
// accepted, and a reservation that lapses or is rejected puts it back to ringing, or to
// waited_too_long once its warm wait is over. Skipping it instead would let a customer kept
// waiting on a chat sit behind cold packages an agent pulls meanwhile.
// $1 queue name, $2 user, $3 supervisor, $4 now, $5 the event's kind.
const nextSQL = `
	WITH q AS (
		SELECT id, name, reservation_timeout FROM queues WHERE name = $1
	), me AS (
		SELECT u.capacity, (SELECT count(*) FROM handoffs WHERE assignee_id = u.id AND closed_at IS NULL) AS holding,
			$3 OR EXISTS (SELECT 1 FROM queue_members m, q WHERE m.queue_id = q.id AND m.user_id = u.id) AS may_act
		FROM users u WHERE u.id = $2 FOR UPDATE
	), held AS (
		SELECT h.id, h.handoff_id, h.api_key_id, h.queue_id, hq.name, h.created_at, h.trace_parent
		FROM handoffs h JOIN queues hq ON hq.id = h.queue_id
		WHERE h.assignee_id = $2 AND h.status = 'reserved'
	), pick AS (
		-- Scalar subqueries, not joins, so that the queue's id is a constant to the planner and the
		-- claim reads handoffs_queue_page_idx in claim order instead of sorting the queue.
		SELECT h.id FROM handoffs h
		WHERE h.queue_id = (SELECT id FROM q) AND (SELECT may_act AND holding < capacity FROM me)
			AND NOT EXISTS (SELECT FROM held)
			AND h.status = 'queued' AND NOT ($2 = ANY (h.rejected_by))
			AND (NOT h.needs_supervisor OR $3)
			AND (h.offered_to IS NULL OR h.offered_to = $2 OR h.warm_until IS NULL AND h.offered_until <= $4)
		ORDER BY h.priority_rank, h.enqueued_at, h.id
		LIMIT 1 FOR UPDATE SKIP LOCKED
	), reserved AS (
		UPDATE handoffs h SET status = 'reserved', assignee_id = $2, reserved_until = $4::timestamptz + q.reservation_timeout,
			updated_at = $4
		FROM pick, q WHERE h.id = pick.id
		RETURNING h.id, h.handoff_id, h.api_key_id, h.reserved_until, h.created_at, h.trace_parent,
			h.warm_until IS NOT NULL AND h.offered_to = $2 AS rang
	), event AS (
		INSERT INTO events (at, kind, queue_id, handoff_id, actor_user, detail)
		SELECT $4, $5, q.id, r.id, $2, jsonb_build_object('status', 'reserved', 'queue', q.name, 'reserved_until', r.reserved_until)
		FROM reserved r, q
	)
	SELECT q.id, coalesce(me.may_act, false), coalesce(me.capacity, 0), coalesce(me.holding, 0),
		coalesce(r.id, held.id), coalesce(r.handoff_id, held.handoff_id), coalesce(r.api_key_id, held.api_key_id),
		coalesce(held.queue_id, q.id), coalesce(held.name, q.name), coalesce(r.created_at, held.created_at),
		coalesce(r.trace_parent, held.trace_parent), coalesce(r.rang, false)
	FROM (SELECT) one LEFT JOIN q ON true LEFT JOIN me ON true LEFT JOIN reserved r ON true
		LEFT JOIN held ON me.may_act`

// Next reserves the highest-priority, oldest package the agent may take in the queue. The agent
// accepts it within the queue's reservation timeout, or it goes back. An agent who holds a
// reservation already, in any queue they work, gets that one back.
func (a *Service) Next(ctx context.Context, user auth.User, queueName string) (_ string, err error) {
	ctx, span := a.tracing.Start(ctx, "handoff.next", trace.WithAttributes(tracing.Queue.String(queueName)))
	defer func() { tracing.End(span, err) }()
	var queueID, rowID, apiKeyID, inQueueID *int64
	var inQueue, handoffID *string
	var createdAt *time.Time
	var packageTrace *string
	var mayAct, rang bool
	var capacity, holding int
	b := &pgx.Batch{}
	b.Queue(nextSQL, queueName, user.ID, user.Role.AtLeast(auth.RoleSupervisor), a.now(), events.Reserved)
	err = a.trips.Send(ctx, b, func(br pgx.BatchResults) error {
		return br.QueryRow().Scan(&queueID, &mayAct, &capacity, &holding, &rowID, &handoffID, &apiKeyID, &inQueueID, &inQueue, &createdAt,
			&packageTrace, &rang)
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
	// The ring the agent took with Next has moved on: the sweeper ends it now.
	a.ringAgain(rang, nil)
	span.SetAttributes(tracing.HandoffID.String(*handoffID))
	tracing.LinkPackage(ctx, packageTrace)
	a.holds.put(hold{publicID: *handoffID, rowID: *rowID, apiKeyID: *apiKeyID, queueID: *inQueueID, queue: *inQueue, userID: user.ID,
		createdAt: *createdAt, trace: packageTrace})
	return *handoffID, nil
}

// Accept claims a package for the agent: the reservation they hold, or a waiting package they
// pick from the list. Across all agents and instances exactly one accept wins.
func (a *Service) Accept(ctx context.Context, user auth.User, handoffID string) (err error) {
	ctx, span := a.tracing.Act(ctx, "handoff.accept", handoffID)
	defer func() { tracing.End(span, err) }()
	accepted := func(hd hold, now time.Time) events.Change {
		took := now.Sub(hd.createdAt).Round(time.Millisecond).Seconds()
		return hd.to(events.Change{Kind: events.Accepted, Status: handoff.StatusAccepted, ActorUser: &user.ID,
			Assignee: user.DisplayName, At: now, SecondsToAccept: &took})
	}
	if hd, ok := a.holds.get(handoffID, user.ID); ok {
		now := a.now()
		done, err := a.fast(ctx, user, hd, `status = 'accepted', reserved_until = NULL, accepted_at = $6, updated_at = $6, warm_until = NULL`,
			`h.status = 'reserved'`, []any{now}, accepted(hd, now))
		if done {
			a.counts.Accepted(hd.queue, now.Sub(hd.createdAt))
		}
		if done || err != nil {
			return err
		}
	}
	var hd hold
	var at time.Time
	err = a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		at = now
		h, err := lockTo(ctx, tx, Accept, user, handoffID, now)
		if err != nil {
			return err
		}
		// Stamped once the row is ours: the ring's end must not come before a change this
		// transaction waited for.
		now = a.now()
		at = now
		if h.Status == handoff.StatusQueued {
			if err := checkRoom(ctx, tx, user); err != nil {
				return err
			}
		}
		hd = h.hold(user.ID)
		b := &pgx.Batch{}
		if h.Ringing {
			// The ring ends with the accept: its agent's, or, once its window passed, another's.
			outcome := offerTaken
			if *h.OfferedTo == user.ID {
				outcome = offerAccepted
			}
			b.Queue(`UPDATE offers SET ended_at = $2, outcome = $3 WHERE handoff_id = $1 AND ended_at IS NULL`, h.ID, now, outcome)
			if err := events.Queue(b, hd.to(events.Change{Kind: events.OfferEnded, Status: handoff.StatusAccepted, UserID: *h.OfferedTo,
				At: now, Detail: map[string]any{"outcome": outcome}})); err != nil {
				return err
			}
		}
		b.Queue(`
			UPDATE handoffs SET status = 'accepted', assignee_id = $2, reserved_until = NULL, accepted_at = $3, updated_at = $3,
				warm_until = NULL
			WHERE id = $1`, h.ID, user.ID, now)
		if err := record(ctx, b, accepted(hd, now), nil); err != nil {
			return err
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err == nil {
		a.holds.put(hd)
		a.counts.Accepted(hd.queue, at.Sub(hd.createdAt))
	}
	return err
}

// Reject hands a reserved or accepted package back to its queue (or to another queue the
// transfer policy allows). The agent is not offered it again; after the queue's max rejections
// only a supervisor can take it. A warm package reserved by "next" rings again. It returns the
// queue the package was in.
func (a *Service) Reject(ctx context.Context, user auth.User, handoffID, reason, toQueue string) (from string, err error) {
	if reason == "" {
		return "", desk.Errorf(desk.Invalid, "a rejection needs a reason")
	}
	if err := checkNote("reason", reason); err != nil {
		return "", err
	}
	ctx, span := a.tracing.Act(ctx, "handoff.reject", handoffID)
	defer func() { tracing.End(span, err) }()
	warm := false
	err = a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lockTo(ctx, tx, Reject, user, handoffID, now)
		if err != nil {
			return err
		}
		warm = h.Warm
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
			events.Change{HandoffID: h.ID, PublicID: h.PublicID, QueueID: target.ID, Queue: target.Name, FromQueueID: h.Queue.ID,
				APIKeyID: h.APIKeyID, Kind: events.Rejected, Status: handoff.StatusQueued, ActorUser: &user.ID, Reason: reason, At: now,
				Detail:       map[string]any{"rejections": rejections, "needs_supervisor": needsSupervisor, "from_queue": h.Queue.Name},
				PackageTrace: h.Trace},
			evals.Outcome{Kind: evals.KindReject, HandoffID: h.ID, QueueID: h.Queue.ID, EditorID: user.ID, At: now, Note: reason})
	})
	a.ringAgain(warm, err)
	return a.released(handoffID, from, err)
}

// released forgets the hold on a package that left its holder's hands.
func (a *Service) released(handoffID, from string, err error) (string, error) {
	if err != nil {
		return "", err
	}
	a.holds.drop(handoffID)
	return from, nil
}

// ReturnToBot closes the package and hands the conversation back to the bot with a reason code.
// It returns the queue the package was in.
func (a *Service) ReturnToBot(ctx context.Context, user auth.User, handoffID, reasonCode, note string, back handoff.HandBack) (from string, err error) {
	if !slices.Contains(handoff.ReturnReasons(), reasonCode) {
		return "", desk.Errorf(desk.Invalid, "reason %q is not one of %v", reasonCode, handoff.ReturnReasons())
	}
	return a.close(ctx, Return, user, handoffID, handoff.StatusReturnedToBot, events.ReturnedToBot, reasonCode, note, "", back)
}

// Resolve closes an accepted package with a resolution code. It returns the queue the package
// was in.
func (a *Service) Resolve(ctx context.Context, user auth.User, handoffID, code, note string, back handoff.HandBack) (from string, err error) {
	if !slices.Contains(handoff.ResolutionCodes(), code) {
		return "", desk.Errorf(desk.Invalid, "resolution %q is not one of %v", code, handoff.ResolutionCodes())
	}
	return a.close(ctx, Resolve, user, handoffID, handoff.StatusResolved, events.Resolved, code, note, "", back)
}

// ResolveRefunded closes an accepted package as refunded, for amount ("": the amount the package
// asks). A refund above the queue's threshold, or in another currency, needs a granted approval
// for exactly that amount and currency (approvals.Needed): otherwise a Conflict names it.
func (a *Service) ResolveRefunded(ctx context.Context, user auth.User, handoffID, amount, note string, back handoff.HandBack) (from string, err error) {
	return a.close(ctx, Resolve, user, handoffID, handoff.StatusResolved, events.Resolved, refunded, note, amount, back)
}

// refunded is the resolution code that pays money back: the one bound to refund approvals.
const refunded = "refunded"

// evalKinds are the eval records of the actions that close a package.
var evalKinds = map[Action]evals.Kind{Return: evals.KindReturnToBot, Resolve: evals.KindResolve}

// close ends a package for act, handing the conversation back to the bot with back, the agent's
// part, and where the thread stands (handBackSQL). The fast path's update holds the part of Check
// it relies on: a package the user holds, in a status act closes.
//
// A refund (outcome refunded) skips the fast path: whether it needs an approval depends on the
// package's refund and its queue's threshold, which the fast path does not read.
func (a *Service) close(ctx context.Context, act Action, user auth.User, handoffID string, status handoff.Status, kind events.Kind, outcome, note, amount string, back handoff.HandBack) (_ string, err error) {
	if err := checkNote("note", note); err != nil {
		return "", err
	}
	ctx, span := a.tracing.Act(ctx, "handoff."+string(act), handoffID)
	defer func() { tracing.End(span, err) }()
	closed := func(hd hold, now time.Time) events.Change {
		return hd.to(events.Change{Kind: kind, Status: status, ActorUser: &user.ID, Reason: outcome, Outcome: outcome,
			Note: note, Assignee: user.DisplayName, At: now})
	}
	label := func(hd hold, now time.Time) evals.Outcome {
		return evals.Outcome{Kind: evalKinds[act], HandoffID: hd.rowID, QueueID: hd.queueID, EditorID: user.ID, At: now,
			Code: outcome, Note: note, HandBack: true}
	}
	refund := act == Resolve && outcome == refunded
	// A hand-back the agent must fix takes the slow path, which names every bad field once the
	// package is the user's to close.
	if hd, ok := a.holds.get(handoffID, user.ID); ok && !refund && checkHandBack(back, nil) == nil {
		from := []handoff.Status{handoff.StatusAccepted}
		if act == Return {
			from = append(from, handoff.StatusReserved)
		}
		now := a.now()
		// A package still in its warm phase (reserved by "next") is closed on the slow path, which
		// tells the bot the warm phase ended; and so is a hand-back naming an entity the package
		// does not have, which the slow path names.
		done, err := a.fast(ctx, user, hd, `status = $6, outcome = $7, outcome_note = NULLIF($8, ''), closed_at = $9, updated_at = $9,
			reserved_until = NULL, hand_back = `+handBackSQL("$11", "$13"),
			`h.status = ANY ($10) AND h.warm_until IS NULL AND `+entitiesSQL+` @> $12::text[]`,
			[]any{status, outcome, note, now, from, back, entityKeys(back), a.base}, closed(hd, now), label(hd, now))
		if done && act == Resolve {
			a.counts.Resolved(hd.queue, now.Sub(hd.createdAt))
		}
		if done || err != nil {
			return a.released(handoffID, hd.queue, err)
		}
	}
	var queueName string
	var took time.Duration
	err = a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lockTo(ctx, tx, act, user, handoffID, now)
		if err != nil {
			return err
		}
		queueName, took = h.Queue.Name, now.Sub(h.CreatedAt)
		if err := checkHandBackOf(ctx, tx, h.ID, back); err != nil {
			return err
		}
		change, record := closed(h.hold(user.ID), now), label(h.hold(user.ID), now)
		var paid *handoff.RefundOutcome
		if refund {
			if paid, err = checkRefund(ctx, tx, h, amount); err != nil {
				return err
			}
			if paid != nil {
				change.Detail = map[string]any{"amount": paid.Amount, "currency": paid.Currency}
				if paid.RequestedAmount != "" {
					change.Detail["requested_amount"], change.Detail["requested_currency"] = paid.RequestedAmount, paid.RequestedCurrency
				}
				change.Refund, record.Refund = paid, paid
			}
		}
		if h.Warm {
			if err := endWarm(ctx, tx, change, handoff.WarmReturnedToBot); err != nil {
				return err
			}
		}
		return apply(ctx, tx, `
			UPDATE handoffs h SET status = $2, outcome = $3, outcome_note = NULLIF($4, ''), closed_at = $5, updated_at = $5,
				reserved_until = NULL, assignee_id = coalesce(assignee_id, $6), warm_until = NULL, refund = $7, hand_back = `+handBackSQL("$8", "$9")+`
			WHERE id = $1`, []any{h.ID, status, outcome, note, now, user.ID, paid, back, a.base}, change, record)
	})
	if err == nil && act == Resolve {
		a.counts.Resolved(queueName, took)
	}
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
	if err := queue.CheckTransfer(from, to); err != nil {
		return queue.Queue{}, err
	}
	return to, nil
}

// Transfer moves a package to another queue the transfer policy allows, with a note for the next
// agent. A warm package goes on ringing, the target queue's agents now, within its warm wait. The pair guard applies: a package moved out of a queue cannot be sent back within the
// target queue's cooldown, so two teams cannot bounce a customer. It returns the queue the
// package was in.
func (a *Service) Transfer(ctx context.Context, user auth.User, handoffID, toQueue, note string) (from string, err error) {
	if err := checkNote("note", note); err != nil {
		return "", err
	}
	ctx, span := a.tracing.Act(ctx, "handoff.transfer", handoffID)
	defer func() { tracing.End(span, err) }()
	warm := false
	err = a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lockTo(ctx, tx, Transfer, user, handoffID, now)
		if err != nil {
			return err
		}
		warm = h.Warm
		target, err := transferTarget(ctx, tx, h.Queue, toQueue)
		if err != nil {
			return err
		}
		bouncedAt, err := events.LastTransferOut(ctx, tx, h.ID, target.Name, now.Add(-target.Guards.PairCooldown))
		if err != nil {
			return err
		}
		if bouncedAt != nil {
			return &desk.Error{Code: desk.RateLimited, Reason: handoff.ReasonCircular, RetryAfter: bouncedAt.Add(target.Guards.PairCooldown).Sub(now),
				Message: fmt.Sprintf("%s left %s less than %s ago; it cannot go back yet", handoffID, target.Name, target.Guards.PairCooldown)}
		}
		from = h.Queue.Name
		if note != "" {
			if _, err := tx.Exec(ctx, `INSERT INTO handoff_notes (handoff_id, author_id, body, created_at, author_saw_contact) VALUES ($1, $2, $3, $4, $5)`,
				h.ID, user.ID, note, now, h.seenBy(user).PII); err != nil {
				return err
			}
		}
		return apply(ctx, tx, `
			UPDATE handoffs SET queue_id = $2, status = 'queued', assignee_id = NULL, reserved_until = NULL, accepted_at = NULL,
				rejected_by = '{}', needs_supervisor = false, offered_to = NULL, offered_until = NULL,
				expires_at = greatest(expires_at, $3::timestamptz + $4::interval), updated_at = $3
			WHERE id = $1`, []any{h.ID, target.ID, now, target.TTL},
			events.Change{HandoffID: h.ID, PublicID: h.PublicID, QueueID: target.ID, Queue: target.Name, FromQueueID: h.Queue.ID,
				APIKeyID: h.APIKeyID, Kind: events.Transferred, Status: handoff.StatusQueued, ActorUser: &user.ID, Note: note, At: now,
				Detail: map[string]any{"from_queue": h.Queue.Name, "to_queue": target.Name}, PackageTrace: h.Trace})
	})
	a.ringAgain(warm, err)
	return a.released(handoffID, from, err)
}

// turnDraft is the bot's draft of the turn a reply answers: the latest draft_reply the customer's
// messages brought since the previous reply, else, for the first answer only, the package's own.
// A later turn without a fresh draft was written from scratch: an older turn's draft answered
// other words, and pairing it with this reply would teach a trainer a wrong preference. The first
// answer prefers a customer message's draft to the package's for the same reason: it drafts an
// answer to the message the reply answers, which the package's cannot.
func turnDraft(t conversation.Turn, p handoff.Package) string {
	if t.Draft == "" && t.FirstAnswer {
		return p.DraftReply
	}
	return t.Draft
}

// Reply sends the customer the agent's reply on a package they accepted, through the package's
// bot, and keeps it as an eval record of its turn: against the bot's draft of that turn ("" when
// it had none: a reply written from scratch), after the conversation it answers. An agent may
// reply several times; each reply is a record of its own.
//
// An agent whose role sees the package's contact masked edited the draft with tokens where the
// hidden values are (handoff.Draft): the tokens they kept become the values again, exactly, in
// what is sent and recorded, so the customer is greeted by name and the record shows only the
// agent's edits. A damaged token is refused with the reply unsent.
func (a *Service) Reply(ctx context.Context, user auth.User, handoffID string, r evals.Reply) error {
	return a.ReplyFrom(ctx, user, handoffID, r, 0)
}

// ReplyFrom is Reply for a reply the agent started from saved reply savedID of the package's queue
// (0: none), which the thread records with it, for the evals.
func (a *Service) ReplyFrom(ctx context.Context, user auth.User, handoffID string, r evals.Reply, savedID int64) (err error) {
	ctx, span := a.tracing.Act(ctx, "handoff.reply", handoffID)
	defer func() { tracing.End(span, err) }()
	return a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lockTo(ctx, tx, Reply, user, handoffID, now)
		if err != nil {
			return err
		}
		var p handoff.Package
		if err := tx.QueryRow(ctx, `SELECT package FROM handoffs WHERE id = $1`, h.ID).Scan(&p); err != nil {
			return err
		}
		vis := h.seenBy(user)
		// Readers who cannot see the values read the reply of an agent who could not either as
		// they submitted it, tokens and all (conversation.Message.AsWritten).
		asWritten := ""
		if !vis.PII {
			asWritten = r.Text
		}
		if r.Text, err = p.DraftFor(vis).Fill(r.Text); err != nil {
			return err
		}
		thread, err := conversation.State(ctx, tx, h.ID, now)
		if err != nil {
			return err
		}
		turn, err := conversation.TurnOf(ctx, tx, h.ID, thread)
		if err != nil {
			return err
		}
		turnDraft := turnDraft(turn, p)
		if savedID != 0 {
			// A reply started from a saved one was drafted by it, with the customer's values as
			// they were sent: the eval pairs the agent's edits with what they started from.
			body, err := savedreply.Check(ctx, tx, h.Queue.ID, savedID)
			if err != nil {
				return err
			}
			turnDraft = p.TemplateFor(handoff.Visibility{PII: true}, body)
		}
		b := &pgx.Batch{}
		// The reply joins the thread, answering the customer's latest message: the bot relays it
		// and reads it back in order with GET …/messages.
		sent := conversation.AppendReply(b, h.ID, thread, user.ID, r.Text, asWritten, savedID, now)
		if err := evals.QueueReply(b, evals.Sent{HandoffID: h.ID, QueueID: h.Queue.ID, EditorID: user.ID, At: now,
			Draft: turnDraft, InReplyTo: sent.InReplyTo, Before: turn.Before, SavedReplyID: savedID, Reply: r}); err != nil {
			return err
		}
		if err := record(ctx, b, h.hold(user.ID).to(events.Change{Kind: events.Reply, Status: h.Status, ActorUser: &user.ID,
			Assignee: user.DisplayName, Text: r.Text, At: now, Detail: map[string]any{"tags": r.Tags, "seq": sent.Seq},
			Message: &webhook.Message{ID: sent.MessageID, Seq: sent.Seq, InReplyTo: sent.InReplyTo}}), nil); err != nil {
			return err
		}
		return tx.SendBatch(ctx, b).Close()
	})
}
