package actions

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/queue"
)

// Warm transfers ring one agent at a time. While a warm package is in its warm phase
// (handoffs.warm_until set), it is offered to one qualifying agent for the queue's accept window;
// a decline, a timeout or the agent going offline offers it to the next one, and when nobody is
// left, or the warm wait has run out, the bot hears warm_timeout and the package waits like any
// other. The database holds one live offer per package and one per agent (migration 00019): the
// package's row lock orders the offers of one package, and the agent's index entry makes a second
// instance's offer to the same agent wait and then find the conflict.

// How an offer ended (offers.outcome, and the offer_ended event's detail).
const (
	offerAccepted  = "accepted"
	offerDeclined  = "declined"
	offerTimedOut  = "timed_out"
	offerWithdrawn = "withdrawn" // the agent's last socket closed
	offerTaken     = "taken"     // the package moved on by another way (an accept from the list, a transfer, a cancel)
)

// Ringing is where a warm package stands after intake: ringing an agent, or waiting.
type Ringing struct {
	Agent string // the display name of the agent it rings; "" when it rings nobody
	Until time.Time
	// EstimatedWait is, when it rings nobody, the queue's recent median time to accept.
	EstimatedWait time.Duration
}

// Offer is a live ring, as the agent's pages show it. The package is unmasked: the caller masks
// it for the agent.
type Offer struct {
	PublicID      string
	Queue         string
	Until         time.Time
	Package       handoff.Package
	PIIMinRole    string
	PIIEntityKeys []string
}

// warmRow is a package locked for a ring.
type warmRow struct {
	id, queueID, apiKeyID int64
	publicID, queue       string
	status                handoff.Status
	warmUntil             *time.Time
	preferred             string
	rejectedBy            []int64
	needsSupervisor       bool
	acceptWindow          time.Duration
	missedRingsAway       int
	// The live offer, if any, and whether it is still the package's ring.
	offerUser  *int64
	offerName  string
	offerUntil *time.Time
	// offerStale: the package moved on without the offer (an accept from the list, a transfer,
	// a cancel); offerOnline: its agent may be rung still (ringable).
	offerStale, offerOnline bool
}

// lockWarm locks the package's row and reads what a ring needs. skip makes it give up (ok false)
// when another transaction holds the row: the sweeper leaves that package to whoever has it.
func lockWarm(ctx context.Context, tx pgx.Tx, rowID int64, skip bool) (warmRow, bool, error) {
	var w warmRow
	lockClause := "FOR UPDATE OF h"
	if skip {
		lockClause += " SKIP LOCKED"
	}
	err := tx.QueryRow(ctx, `
		SELECT h.id, h.handoff_id, h.status, h.queue_id, q.name, h.api_key_id, h.warm_until,
			coalesce(h.package->>'preferred_agent', ''), h.rejected_by, h.needs_supervisor, q.accept_window,
			q.missed_rings_away
		FROM handoffs h JOIN queues q ON q.id = h.queue_id WHERE h.id = $1 `+lockClause, rowID).Scan(
		&w.id, &w.publicID, &w.status, &w.queueID, &w.queue, &w.apiKeyID, &w.warmUntil,
		&w.preferred, &w.rejectedBy, &w.needsSupervisor, &w.acceptWindow, &w.missedRingsAway)
	if errors.Is(err, pgx.ErrNoRows) {
		return w, false, nil
	}
	if err != nil {
		return w, false, err
	}
	// The offer is read after the row lock: every offer of this package is made under it.
	err = tx.QueryRow(ctx, `
		SELECT o.user_id, u.display_name, o.until,
			h.status <> 'queued' OR h.offered_to IS DISTINCT FROM o.user_id,
			EXISTS (SELECT 1 FROM ringable r WHERE r.user_id = o.user_id)
		FROM offers o JOIN users u ON u.id = o.user_id JOIN handoffs h ON h.id = o.handoff_id
		WHERE o.handoff_id = $1 AND o.ended_at IS NULL`, rowID).Scan(
		&w.offerUser, &w.offerName, &w.offerUntil, &w.offerStale, &w.offerOnline)
	if errors.Is(err, pgx.ErrNoRows) {
		err = nil
	}
	return w, true, err
}

func (w warmRow) change(c events.Change) events.Change {
	c.HandoffID, c.PublicID, c.QueueID, c.Queue, c.APIKeyID = w.id, w.publicID, w.queueID, w.queue, w.apiKeyID
	return c
}

// endOffer ends the package's live offer with outcome, frees the package for others and records
// the end, naming the agent whose ring stops. away sets that agent away, as the last of the
// queue's missed rings in a row: the end's event says so, and it reaches every page of theirs.
func endOffer(b *pgx.Batch, w warmRow, outcome string, away bool, now time.Time) error {
	b.Queue(`UPDATE offers SET ended_at = $2, outcome = $3 WHERE handoff_id = $1 AND ended_at IS NULL`, w.id, now, outcome)
	b.Queue(`UPDATE handoffs SET offered_to = NULL, offered_until = NULL WHERE id = $1 AND offered_to = $2`, w.id, *w.offerUser)
	detail := map[string]any{"outcome": outcome, "agent": w.offerName}
	if away {
		// As if they had chosen it (live.Presence.Choose), with the desk's reason; the presence
		// event refreshes the supervisors' rosters.
		queue.QueueChoice(b, *w.offerUser, queue.Away, queue.ReasonMissedRings, now)
		if err := events.Queue(b, events.Change{Kind: events.Presence, At: now}); err != nil {
			return err
		}
		detail["away"] = true
	}
	return events.Queue(b, w.change(events.Change{Kind: events.OfferEnded, Status: w.status, UserID: *w.offerUser, At: now,
		Detail: detail}))
}

// missedEnough reports whether the offer that timed out is the last of the queue's missed rings
// before away in a row for its agent: their offers before it, since they last chose what to be,
// all ran out too. Only rings they let run out count; an accept, a decline, a Next or a ring
// withdrawn as they left breaks the row, and choosing available again starts it afresh.
func missedEnough(ctx context.Context, tx pgx.Tx, w warmRow) (bool, error) {
	before := w.missedRingsAway - 1
	var missed int
	err := tx.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE outcome = 'timed_out') FROM (
			SELECT o.outcome FROM offers o
			WHERE o.user_id = $1 AND o.ended_at IS NOT NULL
				AND o.offered_at >= coalesce((SELECT a.since FROM availability a WHERE a.user_id = $1), '-infinity')
			ORDER BY o.offered_at DESC LIMIT $2) last`, *w.offerUser, before).Scan(&missed)
	return missed == before, err
}

// ring offers the locked warm package to the first qualifying agent, or ends its warm phase when
// nobody is left or it waited too long. A package whose agents are all busy stays in its warm
// phase, and the sweeper tries again, at the latest when its warm wait runs out. It returns the
// offer it made, if any. A ring never outlasts the warm wait, so waited_too_long comes on time.
func (a *Service) ring(ctx context.Context, tx pgx.Tx, b *pgx.Batch, w warmRow, now time.Time) (*Ringing, error) {
	if w.status != handoff.StatusQueued || w.warmUntil == nil {
		return nil, nil
	}
	if !now.Before(*w.warmUntil) {
		return nil, warmTimeout(b, w, handoff.WarmWaitedTooLong, now)
	}
	cs, err := queue.RingableFor(ctx, tx, w.queue, w.id, w.rejectedBy)
	if err != nil {
		return nil, err
	}
	order := queue.OrderRing(cs, w.preferred, w.needsSupervisor)
	for _, c := range order.Now {
		// A second instance ringing the same agent for another package waits here on the index
		// entry, and then finds the conflict: the agent is busy and the next one is tried.
		var offerID int64
		err := tx.QueryRow(ctx, `
			INSERT INTO offers (handoff_id, user_id, offered_at, until) VALUES ($1, $2, $3, $3)
			ON CONFLICT DO NOTHING RETURNING id`, w.id, c.UserID, now).Scan(&offerID)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		// Stamped now that the row is written: the insert may have waited for another
		// transaction's offer to this agent to end, and the ring starts after that end.
		at := a.now()
		until := at.Add(w.acceptWindow)
		if w.warmUntil.Before(until) {
			until = *w.warmUntil
		}
		b.Queue(`UPDATE offers SET offered_at = $2, until = $3 WHERE id = $1`, offerID, at, until)
		b.Queue(`UPDATE handoffs SET offered_to = $2, offered_until = $3, updated_at = $4 WHERE id = $1`, w.id, c.UserID, until, at)
		return &Ringing{Agent: c.Name, Until: until}, events.Queue(b, w.change(events.Change{Status: w.status, At: at}.Rings(c.UserID, c.Name, until)))
	}
	if order.Left > 0 {
		a.ringDue(*w.warmUntil)
		return nil, nil
	}
	// Nobody is left to ring: the bot hears why, and an agent who went away is not a decline.
	var last *string
	if err := tx.QueryRow(ctx, `SELECT outcome FROM offers WHERE handoff_id = $1 AND ended_at IS NOT NULL ORDER BY id DESC LIMIT 1`,
		w.id).Scan(&last); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, err
	}
	switch {
	case last != nil && *last == offerWithdrawn:
		return nil, warmTimeout(b, w, handoff.WarmAgentGone, now)
	case len(cs) == 0:
		return nil, warmTimeout(b, w, handoff.WarmNoAgentOnline, now)
	}
	return nil, warmTimeout(b, w, handoff.WarmAllDeclined, now)
}

// warmTimeout ends the package's warm phase: it waits in its queue like any other, and the bot
// hears why nobody took it, so that it can tell the customer and fall back.
func warmTimeout(b *pgx.Batch, w warmRow, reason string, now time.Time) error {
	b.Queue(`UPDATE handoffs SET warm_until = NULL, updated_at = $2 WHERE id = $1`, w.id, now)
	return events.Queue(b, w.change(events.Change{Kind: events.WarmTimeout, Status: w.status, Reason: reason, At: now}))
}

// advance moves a warm package on: it ends its offer when that timed out, went stale (the package
// moved on) or lost its agent (no live presence), and rings the next agent when the package is
// still warm and rings nobody. why, when set, vets the locked row and names how its offer ends
// whatever its time (a decline); skip leaves a row another transaction holds to it.
func (a *Service) advance(ctx context.Context, rowID int64, skip bool, why func(tx pgx.Tx, w warmRow, now time.Time) (string, error)) (*Ringing, error) {
	var rang *Ringing
	err := a.inTx(ctx, func(tx pgx.Tx, _ time.Time) error {
		w, ok, err := lockWarm(ctx, tx, rowID, skip)
		if err != nil || !ok {
			return err
		}
		// The time is read once the row is ours: an offer ended or made here must not be
		// stamped before a change this transaction waited for.
		now := a.now()
		b := &pgx.Batch{}
		outcome := ""
		if why != nil {
			if outcome, err = why(tx, w, now); err != nil {
				return err
			}
		}
		if outcome == "" && w.offerUser != nil {
			switch {
			case w.offerStale:
				outcome = offerTaken
			case !w.offerOnline:
				outcome = offerWithdrawn
			case !now.Before(*w.offerUntil):
				outcome = offerTimedOut
			default:
				rang = &Ringing{Agent: w.offerName, Until: *w.offerUntil}
				return nil // it rings still
			}
		}
		if outcome != "" {
			away := false
			if outcome == offerTimedOut {
				if away, err = missedEnough(ctx, tx, w); err != nil {
					return err
				}
			}
			// Ended before the next offer is written: the package's live offer must be gone, and
			// an agent set away is no longer among those it may ring.
			if err := endOffer(b, w, outcome, away, now); err != nil {
				return err
			}
			if err := tx.SendBatch(ctx, b).Close(); err != nil {
				return err
			}
			b, w.offerUser = &pgx.Batch{}, nil
		}
		if rang, err = a.ring(ctx, tx, b, w, now); err != nil {
			return err
		}
		if b.Len() == 0 {
			return nil
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err == nil && rang != nil {
		a.ringDue(rang.Until)
	}
	return rang, err
}

// Ring offers a warm package that has come in to its first agent, when intake left that to the
// desk (a replay asks again; a batch that lost the race for its agents twice), and answers who it
// rings, or, when it rings nobody, the queue's estimated wait. A package intake rang already
// answers the ring it has.
func (a *Service) Ring(ctx context.Context, publicID string) (Ringing, error) {
	var rowID, queueID int64
	if err := a.db.QueryRow(ctx, `SELECT id, queue_id FROM handoffs WHERE handoff_id = $1`, publicID).Scan(&rowID, &queueID); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return Ringing{}, desk.Errorf(desk.NotFound, "no handoff %q", publicID)
		}
		return Ringing{}, err
	}
	rang, err := a.advance(ctx, rowID, false, nil)
	if err != nil || rang != nil {
		return derefRinging(rang), err
	}
	wait, err := queue.EstimatedWait(ctx, a.db, queueID)
	return Ringing{EstimatedWait: wait}, err
}

func derefRinging(r *Ringing) Ringing {
	if r == nil {
		return Ringing{}
	}
	return *r
}

// Decline turns down the ring the agent has for the package; it rings the next agent. It returns
// the package's queue.
func (a *Service) Decline(ctx context.Context, user auth.User, publicID string) (from string, err error) {
	var rowID int64
	if err := a.db.QueryRow(ctx, `SELECT id FROM handoffs WHERE handoff_id = $1`, publicID).Scan(&rowID); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return "", desk.Errorf(desk.NotFound, "no handoff %q", publicID)
		}
		return "", err
	}
	_, err = a.advance(ctx, rowID, false, func(tx pgx.Tx, w warmRow, now time.Time) (string, error) {
		from = w.queue
		member, err := queue.IsMember(ctx, tx, user.ID, w.queueID)
		if err != nil {
			return "", err
		}
		st := State{PublicID: w.publicID, Status: w.status, OfferedTo: w.offerUser, OfferedUntil: w.offerUntil,
			Ringing: w.offerUser != nil && !w.offerStale}
		if err := Check(Decline, user, member, st, now); err != nil {
			return "", err
		}
		return offerDeclined, nil
	})
	return from, err
}

// Withdraw takes back the ring of an agent whose last socket closed, whose instance died or who
// chose a break or away, at once rather than at the end of the window, and rings the next agent.
// An agent still online and available elsewhere keeps it.
func (a *Service) Withdraw(ctx context.Context, userID int64) error {
	var rowID int64
	err := a.db.QueryRow(ctx, `
		SELECT o.handoff_id FROM offers o WHERE o.user_id = $1 AND o.ended_at IS NULL
			AND NOT EXISTS (SELECT 1 FROM ringable r WHERE r.user_id = $1)`,
		userID).Scan(&rowID)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	// advance finds the offer without a presence and withdraws it.
	_, err = a.advance(ctx, rowID, false, nil)
	return err
}

// sweepRings ends the offers that timed out, went stale or lost their agent, and rings for the
// warm packages that ring nobody, a package at a time, a batch after another until none is left:
// a backlog of warm packages must not make the last of them hear waited_too_long late. SKIP
// LOCKED leaves a package another instance is ringing to it; a package whose agents are all
// busy is tried once a pass.
func (a *Service) sweepRings(ctx context.Context) error {
	var after int64
	for {
		rows, err := a.db.Query(ctx, `
			SELECT id FROM (
				(SELECT o.handoff_id AS id FROM offers o JOIN handoffs h ON h.id = o.handoff_id
				WHERE o.ended_at IS NULL AND o.handoff_id > $3
					AND (o.until <= $1 OR h.status <> 'queued' OR h.offered_to IS DISTINCT FROM o.user_id
						OR NOT EXISTS (SELECT 1 FROM ringable r WHERE r.user_id = o.user_id))
				ORDER BY o.handoff_id LIMIT $2)
				UNION
				(SELECT h.id FROM handoffs h WHERE h.warm_until IS NOT NULL AND h.status = 'queued' AND h.id > $3
					AND NOT EXISTS (SELECT 1 FROM offers o WHERE o.handoff_id = h.id AND o.ended_at IS NULL)
				ORDER BY h.id LIMIT $2)) due
			ORDER BY id LIMIT $2`, a.now(), sweepBatch, after)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return err
		}
		for _, id := range ids {
			if _, err := a.advance(ctx, id, true, nil); err != nil {
				return err
			}
		}
		if len(ids) < sweepBatch {
			return nil
		}
		after = ids[len(ids)-1]
	}
}

// ringAgain wakes this instance's sweeper for a warm package whose ring went stale (taken with
// Next, canceled) or that went back to its queue, or to another, still in its warm phase (a
// rejected or transferred package): its stale ring ends and its next agent is rung now, not at
// the next tick. A failed change rings nothing.
func (a *Service) ringAgain(warm bool, err error) {
	if warm && err == nil {
		a.ringDue(a.now())
	}
}

// endWarm ends the warm phase of a package that leaves its queue without an accept (returned to
// its bot, canceled, expired), beside c, the change that closes it: the bot hears warm_timeout
// naming why, as every warm phase ends with exactly one accepted or warm_timeout. The caller's
// update clears warm_until.
func endWarm(ctx context.Context, tx pgx.Tx, c events.Change, reason string) error {
	b := &pgx.Batch{}
	if err := events.Queue(b, warmEnded(c, reason)); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}

// warmEnded is the warm_timeout of a package that c closes.
func warmEnded(c events.Change, reason string) events.Change {
	return events.Change{HandoffID: c.HandoffID, PublicID: c.PublicID, QueueID: c.QueueID, Queue: c.Queue, APIKeyID: c.APIKeyID,
		Kind: events.WarmTimeout, Status: c.Status, Reason: reason, At: c.At, PackageTrace: c.PackageTrace, Trace: c.Trace}
}

// RingDue tells this instance's sweeper when a ring that intake started runs out, or the warm
// wait of a package it left waiting for a busy agent ends (intake.Intake.OnRing).
func (a *Service) RingDue(at time.Time) { a.ringDue(at) }

// ringDue tells the sweeper when a ring this instance made runs out, so that it is timed out on
// time rather than at the next sweep.
func (a *Service) ringDue(at time.Time) {
	select {
	case a.due <- at:
	default:
	}
}

// Missed is a ring the agent let run out, as their pages list it.
type Missed struct {
	PublicID string
	Queue    string
	At       time.Time // when it rang
}

// The missed rings an agent's pages list: the newest few of about a working day.
const (
	missedShown = 5
	missedFor   = 24 * time.Hour
)

// MissedRings lists the rings the agent let run out lately, newest first.
func (a *Service) MissedRings(ctx context.Context, userID int64) ([]Missed, error) {
	var missed []Missed
	b := &pgx.Batch{}
	a.QueueMissedRings(b, userID, &missed)
	return missed, a.db.SendBatch(ctx, b).Close()
}

// QueueMissedRings adds to b the read of MissedRings into missed, so that a page reads it in the
// round trip of its top bar.
func (a *Service) QueueMissedRings(b *pgx.Batch, userID int64, missed *[]Missed) {
	b.Queue(`
		SELECT h.handoff_id, q.name, o.offered_at
		FROM offers o JOIN handoffs h ON h.id = o.handoff_id JOIN queues q ON q.id = h.queue_id
		WHERE o.user_id = $1 AND o.offered_at > $2 AND o.outcome = 'timed_out'
		ORDER BY o.offered_at DESC LIMIT $3`, userID, a.now().Add(-missedFor), missedShown).Query(func(rows pgx.Rows) error {
		var err error
		*missed, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Missed, error) {
			var m Missed
			return m, row.Scan(&m.PublicID, &m.Queue, &m.At)
		})
		return err
	})
}

// LiveOffer is the ring the agent has now, if any, for their pages.
func (a *Service) LiveOffer(ctx context.Context, userID int64) (*Offer, error) {
	var o *Offer
	b := &pgx.Batch{}
	a.QueueLiveOffer(b, userID, &o)
	return o, a.db.SendBatch(ctx, b).Close()
}

// QueueLiveOffer adds to b the read of LiveOffer into o (nil: no ring), so that a page reads it
// in the round trip of its top bar.
func (a *Service) QueueLiveOffer(b *pgx.Batch, userID int64, o **Offer) {
	b.Queue(`
		SELECT h.handoff_id, q.name, o.until, h.package, q.pii_min_role, q.pii_entity_keys
		FROM offers o JOIN handoffs h ON h.id = o.handoff_id JOIN queues q ON q.id = h.queue_id
		WHERE o.user_id = $1 AND o.ended_at IS NULL AND h.status = 'queued' AND h.offered_to = $1 AND o.until > $2`,
		userID, a.now()).QueryRow(func(row pgx.Row) error {
		var got Offer
		err := row.Scan(&got.PublicID, &got.Queue, &got.Until, &got.Package, &got.PIIMinRole, &got.PIIEntityKeys)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			*o = nil
			return nil
		case err != nil:
			return err
		}
		*o = &got
		return nil
	})
}
