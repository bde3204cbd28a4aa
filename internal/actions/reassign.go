package actions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/tracing"
)

// assignee is the agent a package is reassigned to, as the refusals name them.
type assignee struct {
	id       int64
	name     string
	disabled bool
	member   bool
}

// Reassign moves a package someone holds to the agent with email to, a member of its queue with
// room for one more package, or to the supervisor themselves (a take-over, which needs no
// membership, as a supervisor's accept does not). The package stays accepted, now by the new
// agent: a reservation the supervisor reassigns counts as acknowledged, since a person chose who
// works it. The bot hears reassigned with the new agent's name; the previous holder's pages drop
// the package's controls and show who holds it now; the new holder's pages (the event names them
// as its subject) count it and list it in "My work". It returns the new agent's display name.
//
// Refusals name why: no such person, disabled or not in the queue (Invalid, field to); already
// theirs or no room (Conflict). The target's row is locked before their packages are counted, so
// two reassignments to one agent at once cannot take them past their capacity.
func (a *Service) Reassign(ctx context.Context, user auth.User, handoffID, to string) (name string, err error) {
	email, err := auth.NormalizeEmail(to)
	if err != nil {
		return "", toField("to: %s", desk.ErrorMessage(err))
	}
	ctx, span := a.tracing.Act(ctx, "handoff.reassign", handoffID)
	defer func() { tracing.End(span, err) }()
	err = a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lockTo(ctx, tx, Reassign, user, handoffID, now)
		if err != nil {
			return err
		}
		target, err := assigneeOf(ctx, tx, email, h.Queue.ID)
		if err != nil {
			return err
		}
		switch {
		case *h.AssigneeID == target.id:
			return &desk.Error{Code: desk.Conflict, Reason: "already_holds", Message: fmt.Sprintf("%s already holds %s", target.name, h.PublicID)}
		case target.disabled:
			return toField("%s's account is disabled", target.name)
		case !target.member && target.id != user.ID:
			return toField("%s does not work the queue %s", target.name, h.Queue.Name)
		}
		capacity, holding, err := lockLoad(ctx, tx, target.id)
		if err != nil {
			return err
		}
		if holding >= capacity {
			return &desk.Error{Code: desk.Conflict, Reason: "at_capacity",
				Message: fmt.Sprintf("%s already holds %d of their %d packages", target.name, holding, capacity)}
		}
		name = target.name
		return apply(ctx, tx, `
			UPDATE handoffs SET status = 'accepted', assignee_id = $2, reserved_until = NULL,
				accepted_at = coalesce(accepted_at, $3), updated_at = $3
			WHERE id = $1`, []any{h.ID, target.id, now},
			h.hold(target.id).to(events.Change{Kind: events.Reassigned, Status: handoff.StatusAccepted, ActorUser: &user.ID,
				UserID: target.id, Assignee: target.name, At: now, Detail: map[string]any{"from": h.Assignee, "to": target.name}}))
	})
	if err != nil {
		return "", err
	}
	// This instance's hold named the previous holder; its fast path would only miss, but the new
	// holder's next action reads the row afresh anyway.
	a.holds.drop(handoffID)
	return name, nil
}

// assigneeOf reads the desk user with email and whether they work queueID.
func assigneeOf(ctx context.Context, tx pgx.Tx, email string, queueID int64) (assignee, error) {
	var t assignee
	err := tx.QueryRow(ctx, `
		SELECT u.id, u.display_name, u.disabled,
			EXISTS (SELECT 1 FROM queue_members m WHERE m.queue_id = $2 AND m.user_id = u.id)
		FROM users u WHERE u.email = $1`, email, queueID).Scan(&t.id, &t.name, &t.disabled, &t.member)
	if errors.Is(err, pgx.ErrNoRows) {
		return assignee{}, toField("no desk user has the email %s", email)
	}
	return t, err
}

// toField is an Invalid error about the form field to.
func toField(format string, args ...any) error {
	return &desk.Error{Code: desk.Invalid, Details: map[string]string{"field": "to"}, Message: fmt.Sprintf(format, args...)}
}
