package actions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/tracing"
	"github.com/handoffdesk/desk/internal/webhook"
)

// ReasonReopened is the reason a reopened package's webhook gives: the customer wrote again.
const ReasonReopened = "customer_wrote_again"

// threadRow is a package locked for a message to its thread.
type threadRow struct {
	id, queueID, apiKeyID int64
	publicID, queue       string
	status                handoff.Status
	assigneeID            *int64
	closedAt              *time.Time
	contactID             string
	reopenWindow          time.Duration
	trace                 *string
}

func (r threadRow) change(c events.Change) events.Change {
	c.HandoffID, c.PublicID, c.QueueID, c.Queue, c.APIKeyID, c.PackageTrace = r.id, r.publicID, r.queueID, r.queue, r.apiKeyID, r.trace
	return c
}

// PostMessage appends a bot's message to the thread of its package, one of queueIDs (SPEC §2a).
// The same message again answers as the first time (Replayed). A customer message on a package
// resolved within its queue's reopen window reopens it, for the agent who resolved it first; the
// bot never talks over the human: its own messages are refused while an agent holds the package.
// The message commits with its event, whose notification moves every open view of the package.
func (a *Service) PostMessage(ctx context.Context, apiKeyID int64, queueIDs []int64, handoffID string, m conversation.Incoming) (posted conversation.Posted, err error) {
	ctx, span := a.tracing.Act(ctx, "handoff.message", handoffID)
	defer func() { tracing.End(span, err) }()
	posted = conversation.Posted{HandoffID: handoffID, MessageID: m.MessageID}
	err = a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		var r threadRow
		var look conversation.Look
		b := &pgx.Batch{}
		b.Queue(`
			SELECT h.id, h.handoff_id, h.status, h.queue_id, q.name, h.api_key_id, h.assignee_id, h.closed_at, h.contact_id,
				q.reopen_window, h.trace_parent
			FROM handoffs h JOIN queues q ON q.id = h.queue_id
			WHERE h.handoff_id = $1 AND h.queue_id = ANY($2) FOR UPDATE OF h`, handoffID, queueIDs).QueryRow(func(row pgx.Row) error {
			return row.Scan(&r.id, &r.publicID, &r.status, &r.queueID, &r.queue, &r.apiKeyID, &r.assigneeID, &r.closedAt, &r.contactID,
				&r.reopenWindow, &r.trace)
		})
		conversation.QueueLook(b, handoffID, m, now, &look)
		err := tx.SendBatch(ctx, b).Close()
		if errors.Is(err, pgx.ErrNoRows) {
			return desk.Errorf(desk.NotFound, "no handoff %q in this key's queues", handoffID)
		}
		if err != nil {
			return err
		}
		tracing.LinkPackage(ctx, r.trace)
		// Stamped once the row is ours, so that the thread's times follow its order.
		now = a.now()
		seq, replay, err := look.Replay(m)
		if errors.Is(err, conversation.ErrOtherBody) {
			return &desk.Error{Code: desk.Conflict, Reason: "message_id_reused", Details: map[string]string{"seq": fmt.Sprint(seq)},
				Message: fmt.Sprintf("message %q is message %d of the thread, with another body: give a new message its own message_id", m.MessageID, seq)}
		}
		if replay {
			posted.Seq, posted.Replayed = seq, true
			return nil
		}
		reopen, err := mayPost(ctx, tx, r, m.Role, now)
		if err != nil {
			return err
		}
		if retry, err := look.CheckLimits(); err != nil {
			if retry > 0 {
				return &desk.Error{Code: desk.RateLimited, Reason: "message_rate", RetryAfter: retry, Message: err.Error()}
			}
			return &desk.Error{Code: desk.Conflict, Reason: "thread_full", Message: err.Error()}
		}
		posted.Seq = look.Last + 1
		b = &pgx.Batch{}
		conversation.Append(b, r.id, posted.Seq, m, now)
		status := r.status
		if reopen {
			status = handoff.StatusQueued
		}
		if err := events.Queue(b, r.change(events.Change{Kind: events.Message, Status: status, ActorBot: &apiKeyID, At: now,
			Detail: map[string]any{"seq": posted.Seq, "role": m.Role}})); err != nil {
			return err
		}
		if !reopen {
			return tx.SendBatch(ctx, b).Close()
		}
		posted.Reopened = true
		return a.reopen(ctx, tx, b, r, m.MessageID, posted.Seq, now)
	})
	return posted, err
}

// mayPost applies the thread's rules to a bot's message on the locked package: whether it may be
// posted, and whether it reopens the package.
func mayPost(ctx context.Context, tx pgx.Tx, r threadRow, role conversation.Role, now time.Time) (reopen bool, err error) {
	switch {
	case r.status.Open() && role == conversation.Assistant && r.assigneeID != nil:
		return false, &desk.Error{Code: desk.Conflict, Reason: "agent_holds",
			Message: fmt.Sprintf("an agent holds handoff %s: the bot does not talk over the human; relay the customer's messages as role user", r.publicID)}
	case r.status.Open():
		return false, nil
	case r.status == handoff.StatusResolved && role == conversation.User && now.Sub(*r.closedAt) <= r.reopenWindow:
		var other string
		err := tx.QueryRow(ctx, `SELECT handoff_id FROM handoffs WHERE contact_id = $1 AND closed_at IS NULL AND id <> $2 LIMIT 1`,
			r.contactID, r.id).Scan(&other)
		if errors.Is(err, pgx.ErrNoRows) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return false, &desk.Error{Code: desk.Conflict, Reason: handoff.ReasonOpenHandoff, Details: map[string]string{"open_handoff_id": other},
			Message: fmt.Sprintf("contact %s has handoff %s open: post the customer's message to POST /api/v1/handoffs/%s/messages", r.contactID, other, other)}
	}
	return false, &desk.Error{Code: desk.Conflict, Reason: "handoff_closed", Details: map[string]string{"status": string(r.status)},
		Message: closedMessage(r, role, now)}
}

// closedMessage says why a closed package's thread takes no message, and what the bot does instead.
func closedMessage(r threadRow, role conversation.Role, now time.Time) string {
	again := "hand off again with POST /api/v1/handoffs if the customer needs a human"
	at := r.closedAt.UTC().Format(time.RFC3339)
	switch r.status {
	case handoff.StatusResolved:
		if role == conversation.Assistant {
			return fmt.Sprintf("handoff %s was resolved at %s and the conversation is the bot's again: its own messages stay with the bot", r.publicID, at)
		}
		return fmt.Sprintf("handoff %s was resolved at %s, more than queue %s's reopen window of %s ago: %s",
			r.publicID, at, r.queue, queue.FormatDuration(r.reopenWindow), again)
	case handoff.StatusReturnedToBot:
		return fmt.Sprintf("handoff %s was returned to the bot at %s: the conversation is the bot's; %s", r.publicID, at, again)
	case handoff.StatusCanceled:
		return fmt.Sprintf("handoff %s was canceled at %s: %s", r.publicID, at, again)
	case handoff.StatusExpired:
		return fmt.Sprintf("handoff %s expired at %s with nobody taking it: %s", r.publicID, at, again)
	}
	return fmt.Sprintf("handoff %s is %s: %s", r.publicID, r.status, again)
}

// reopen puts the locked resolved package back in its queue for the customer's message seq, with
// the thread it has: offered first to the agent who resolved it, as a ring when they are available,
// else held for them for one reservation timeout. It sends b.
func (a *Service) reopen(ctx context.Context, tx pgx.Tx, b *pgx.Batch, r threadRow, messageID string, seq int, now time.Time) error {
	q, err := queue.ByID(ctx, tx, r.queueID)
	if err != nil {
		return err
	}
	var resolver *int64
	var resolverEmail string
	var ringable bool
	if r.assigneeID != nil {
		err := tx.QueryRow(ctx, `SELECT u.id, u.email, EXISTS (SELECT 1 FROM ringable g WHERE g.user_id = u.id)
			FROM users u JOIN queue_members m ON m.user_id = u.id AND m.queue_id = $2
			WHERE u.id = $1 AND NOT u.disabled`, *r.assigneeID, r.queueID).Scan(&resolver, &resolverEmail, &ringable)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	var warmUntil, offeredUntil *time.Time
	var offeredTo *int64
	switch {
	case ringable:
		until := now.Add(q.WarmWait)
		warmUntil = &until
	case resolver != nil:
		until := now.Add(q.ReservationTimeout)
		offeredTo, offeredUntil = resolver, &until
	}
	b.Queue(`
		UPDATE handoffs SET status = 'queued', closed_at = NULL, outcome = NULL, outcome_note = NULL, hand_back = NULL, assignee_id = NULL,
			accepted_at = NULL, reserved_until = NULL, rejected_by = '{}', rejections = 0, needs_supervisor = false,
			enqueued_at = $2, expires_at = $2::timestamptz + $3::interval, updated_at = $2,
			offered_to = $4, offered_until = $5, warm_until = $6
		WHERE id = $1`, r.id, now, q.TTL, offeredTo, offeredUntil, warmUntil)
	if err := events.Queue(b, r.change(events.Change{Kind: events.Reopened, Status: handoff.StatusQueued, ActorBot: &r.apiKeyID,
		Reason: ReasonReopened, At: now, Detail: map[string]any{"seq": seq}, Message: &webhook.Message{ID: messageID, Seq: seq}})); err != nil {
		return err
	}
	if err := tx.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if !ringable {
		return nil
	}
	w, _, err := lockWarm(ctx, tx, r.id, false)
	if err != nil {
		return err
	}
	w.preferred = resolverEmail
	rb := &pgx.Batch{}
	rang, err := a.ring(ctx, tx, rb, w, a.now())
	if err != nil || rb.Len() == 0 {
		return err
	}
	if rang != nil {
		a.ringDue(rang.Until)
	}
	return tx.SendBatch(ctx, rb).Close()
}

// Reading is a package's thread after a seq, as its bot reads it, with where the package stands.
type Reading struct {
	RowID    int64 // the package's row, whose events a bot waiting for a reply watches
	Status   handoff.Status
	Messages []conversation.Message
}

// Messages returns the thread of a package in one of queueIDs after seq after, in order, as the
// bot reads it: whole, since the bot relayed every word of it.
func (a *Service) Messages(ctx context.Context, queueIDs []int64, handoffID string, after int) (Reading, error) {
	r := Reading{}
	err := a.db.QueryRow(ctx, `SELECT id, status FROM handoffs WHERE handoff_id = $1 AND queue_id = ANY($2)`, handoffID, queueIDs).Scan(&r.RowID, &r.Status)
	if errors.Is(err, pgx.ErrNoRows) {
		return r, desk.Errorf(desk.NotFound, "no handoff %q in this key's queues", handoffID)
	}
	if err != nil {
		return r, err
	}
	r.Messages, err = conversation.Read(ctx, a.db, r.RowID, after)
	return r, err
}

// RepliesSettled logs where reply webhooks stand after the deliverer recorded an attempt, one
// event per package and state: every open view of the package, on every instance, shows its
// replies' delivery anew from the outbox.
func (a *Service) RepliesSettled(ctx context.Context, settled []webhook.Settled) error {
	return a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		b := &pgx.Batch{}
		seen := map[webhook.Settled]bool{}
		for _, st := range settled {
			if seen[st] {
				continue
			}
			seen[st] = true
			var c events.Change
			err := tx.QueryRow(ctx, `SELECT h.id, h.handoff_id, h.queue_id, q.name, h.api_key_id, h.status
				FROM handoffs h JOIN queues q ON q.id = h.queue_id WHERE h.handoff_id = $1`, st.HandoffID).
				Scan(&c.HandoffID, &c.PublicID, &c.QueueID, &c.Queue, &c.APIKeyID, &c.Status)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			c.Kind, c.At, c.Detail = events.ReplyDelivery, now, map[string]any{"state": st.State}
			if err := events.Queue(b, c); err != nil {
				return err
			}
		}
		return tx.SendBatch(ctx, b).Close()
	})
}
