package actions

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/approvals"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/tracing"
	"github.com/handoffdesk/desk/internal/webhook"
)

// approvalChange is the log row and webhook of a step of request a on the locked package.
func (h held) approvalChange(kind events.Kind, status handoff.Status, a approvals.Approval, state approvals.State, actor *int64, note string, now time.Time) events.Change {
	return events.Change{HandoffID: h.ID, PublicID: h.PublicID, QueueID: h.Queue.ID, Queue: h.Queue.Name, APIKeyID: h.APIKeyID,
		Kind: kind, Status: status, ActorUser: actor, Note: note, Assignee: h.Assignee, At: now, PackageTrace: h.Trace,
		Approval: &webhook.Approval{ID: a.ID, State: string(state), Amount: a.Refund.Amount, Currency: a.Refund.Currency},
		Detail:   map[string]any{"approval_id": a.ID, "amount": a.Refund.Amount, "currency": a.Refund.Currency}}
}

// packageRefund reads the refund the locked package asks for, or nil.
func packageRefund(ctx context.Context, tx pgx.Tx, h held) (*approvals.Refund, error) {
	var p handoff.Package
	if err := tx.QueryRow(ctx, `SELECT package FROM handoffs WHERE id = $1`, h.ID).Scan(&p); err != nil {
		return nil, err
	}
	return approvals.RefundOf(p), nil
}

func requireNote(note string) error {
	if strings.TrimSpace(note) == "" {
		return &desk.Error{Code: desk.Invalid, Details: map[string]string{"field": "note"}, Message: "a note is required"}
	}
	return checkNote("note", note)
}

// RequestApproval asks a supervisor to approve the refund of the package the agent holds: the
// package waits as awaiting_approval, in the agent's hands, until a supervisor decides, the agent
// withdraws or the queue's approval timeout runs out. It returns the request's id.
func (a *Service) RequestApproval(ctx context.Context, user auth.User, handoffID, note string) (id int64, err error) {
	if err := requireNote(note); err != nil {
		return 0, err
	}
	ctx, span := a.tracing.Act(ctx, "handoff.request_approval", handoffID)
	defer func() { tracing.End(span, err) }()
	err = a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lockTo(ctx, tx, RequestApproval, user, handoffID, now)
		if err != nil {
			return err
		}
		refund, err := packageRefund(ctx, tx, h)
		if err != nil {
			return err
		}
		if refund == nil {
			return desk.Errorf(desk.Conflict, "%s asks for no refund, so there is nothing to approve", h.PublicID)
		}
		needed, err := approvals.Needed(*refund, h.Queue.RefundThreshold, h.Queue.Currency)
		if err != nil {
			return err
		}
		if !needed {
			return desk.Errorf(desk.Conflict, "%s: resolve it without approval",
				approvals.Why(*refund, h.Queue.Name, h.Queue.RefundThreshold, h.Queue.Currency))
		}
		if id, err = approvals.Insert(ctx, tx, approvals.Request{HandoffID: h.ID, QueueID: h.Queue.ID, Refund: *refund,
			RequestedBy: user.ID, SawContact: h.seenBy(user).PII, Note: note, At: now, Timeout: h.Queue.ApprovalTimeout}); err != nil {
			return err
		}
		req := approvals.Approval{ID: id, Refund: *refund}
		return apply(ctx, tx, `UPDATE handoffs SET status = 'awaiting_approval', updated_at = $2 WHERE id = $1`,
			[]any{h.ID, now}, h.approvalChange(events.ApprovalRequested, handoff.StatusAwaitingApproval, req, approvals.Pending, &user.ID, note, now))
	})
	return id, err
}

// WithdrawApproval takes the agent's pending request back: the package is theirs to work again.
func (a *Service) WithdrawApproval(ctx context.Context, user auth.User, handoffID string) (err error) {
	ctx, span := a.tracing.Act(ctx, "handoff.withdraw_approval", handoffID)
	defer func() { tracing.End(span, err) }()
	return a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lockTo(ctx, tx, WithdrawApproval, user, handoffID, now)
		if err != nil {
			return err
		}
		req, err := approvals.End(ctx, tx, h.ID, approvals.Withdrawn, now)
		if err != nil {
			return err
		}
		return apply(ctx, tx, `UPDATE handoffs SET status = 'accepted', updated_at = $2 WHERE id = $1`,
			[]any{h.ID, now}, h.approvalChange(events.ApprovalWithdrawn, handoff.StatusAccepted, req, approvals.Withdrawn, &user.ID, "", now))
	})
}

// Decide grants or denies request id with the supervisor's note, and gives the package back to
// its agent, who sees the decision live. Four eyes (approvals.Check): never the requester nor the
// package's holder. Of two supervisors deciding at once, the second waits for the package's row
// lock, then reads the request as the first left it and is refused with a Conflict.
func (a *Service) Decide(ctx context.Context, user auth.User, id int64, grant bool, note string) (_ approvals.Approval, err error) {
	if err := requireNote(note); err != nil {
		return approvals.Approval{}, err
	}
	state, kind := approvals.Denied, events.ApprovalDenied
	if grant {
		state, kind = approvals.Granted, events.ApprovalGranted
	}
	first, err := approvals.Get(ctx, a.db, id)
	if err != nil {
		return approvals.Approval{}, err
	}
	ctx, span := a.tracing.Act(ctx, "handoff.decide_approval", first.PublicID)
	defer func() { tracing.End(span, err) }()
	var req approvals.Approval
	err = a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lock(ctx, tx, user, first.PublicID)
		if err != nil {
			return err
		}
		if req, err = approvals.Get(ctx, tx, id); err != nil {
			return err
		}
		if err := approvals.Check(user, req, h.AssigneeID, now); err != nil {
			return err
		}
		if err := approvals.Decide(ctx, tx, id, state, user.ID, h.seenBy(user).PII, note, now); err != nil {
			return err
		}
		return apply(ctx, tx, `UPDATE handoffs SET status = 'accepted', updated_at = $2 WHERE id = $1 AND status = 'awaiting_approval'`,
			[]any{h.ID, now}, h.approvalChange(kind, handoff.StatusAccepted, req, state, &user.ID, note, now))
	})
	return req, err
}

// checkRefund refuses to resolve the locked package as refunded for amount ("" for the amount the
// package asks) when the refund needs approval and no grant covers it, and otherwise returns what
// the resolution pays back against what was asked; nil when the package asked for no refund and
// the agent named no amount.
func checkRefund(ctx context.Context, tx pgx.Tx, h held, amount string) (*handoff.RefundOutcome, error) {
	requested, err := packageRefund(ctx, tx, h)
	if err != nil {
		return nil, err
	}
	refund := requested
	if amount != "" {
		if !handoff.ValidAmount(amount) {
			return nil, &desk.Error{Code: desk.Invalid, Details: map[string]string{"field": "amount"},
				Message: fmt.Sprintf("refunded amount %q is not a positive decimal like 49.99", amount)}
		}
		currency := h.Queue.Currency
		if requested != nil {
			currency = requested.Currency
		}
		refund = &approvals.Refund{Amount: amount, Currency: currency}
	}
	if refund == nil {
		return nil, nil
	}
	paid := func() (*handoff.RefundOutcome, error) {
		o, err := approvals.Outcome(*refund, requested)
		return &o, err
	}
	needed, err := approvals.Needed(*refund, h.Queue.RefundThreshold, h.Queue.Currency)
	if err != nil {
		return nil, err
	}
	if !needed {
		return paid()
	}
	covered, err := approvals.Covered(ctx, tx, h.ID, *refund)
	if err != nil {
		return nil, err
	}
	if covered {
		return paid()
	}
	granted, err := approvals.LastGranted(ctx, tx, h.ID)
	if err != nil {
		return nil, err
	}
	refused := &desk.Error{Code: desk.Conflict, Reason: "approval_required",
		Message: fmt.Sprintf("%s, so it needs a supervisor's approval, which it does not have: request approval first",
			approvals.Why(*refund, h.Queue.Name, h.Queue.RefundThreshold, h.Queue.Currency))}
	if granted != nil {
		refused.Message = fmt.Sprintf("the approval granted covers %s, not %s: request approval for the new amount", granted, refund)
	}
	return nil, refused
}

// expireApprovals ends requests that ran past their queue's approval timeout and gives their
// packages back to their agents. The packages are locked first, skipping those someone is
// deciding or withdrawing right now, so several instances sweep at once without waiting on each
// other or on a supervisor; a request a decision beat is no longer pending, and End skips it.
func (a *Service) expireApprovals(ctx context.Context) (int, error) {
	total := 0
	for {
		moved := 0
		err := a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
			due, err := approvals.Due(ctx, tx, now, sweepBatch)
			if err != nil || len(due) == 0 {
				return err
			}
			rows, err := tx.Query(ctx, `
				SELECT h.id, h.handoff_id, h.queue_id, q.name, h.api_key_id, coalesce(u.display_name, ''), h.trace_parent
				FROM handoffs h JOIN queues q ON q.id = h.queue_id LEFT JOIN users u ON u.id = h.assignee_id
				WHERE h.id = ANY($1) AND h.status = 'awaiting_approval' FOR UPDATE OF h SKIP LOCKED`, due)
			if err != nil {
				return err
			}
			var locked []held
			for rows.Next() {
				var h held
				if err := rows.Scan(&h.ID, &h.PublicID, &h.Queue.ID, &h.Queue.Name, &h.APIKeyID, &h.Assignee, &h.Trace); err != nil {
					return err
				}
				locked = append(locked, h)
			}
			if err := rows.Err(); err != nil {
				return err
			}
			b := &pgx.Batch{}
			var ids []int64
			var changes []events.Change
			for _, h := range locked {
				req, err := approvals.End(ctx, tx, h.ID, approvals.Expired, now)
				if desk.ErrorCode(err) == desk.NotFound {
					continue
				}
				if err != nil {
					return err
				}
				ids = append(ids, h.ID)
				changes = append(changes, h.approvalChange(events.ApprovalExpired, handoff.StatusAccepted, req, approvals.Expired, nil, "", now))
			}
			if moved = len(ids); moved == 0 {
				return nil
			}
			b.Queue(`UPDATE handoffs SET status = 'accepted', updated_at = $2 WHERE id = ANY($1)`, ids, now)
			if err := events.Queue(b, changes...); err != nil {
				return err
			}
			return tx.SendBatch(ctx, b).Close()
		})
		total += moved
		if err != nil || moved < sweepBatch {
			return total, err
		}
	}
}
