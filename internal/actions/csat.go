package actions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/csat"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
)

// RecordCSAT keeps the customer's verdict on a package in one of queueIDs, once it closed: at
// most one per leg, and on the human leg only when an agent had the package. The verdict rates
// the queue and the agent the package had when it closed.
func (a *Service) RecordCSAT(ctx context.Context, queueIDs []int64, handoffID string, s csat.Survey) (csat.Recorded, error) {
	rec := csat.Recorded{HandoffID: handoffID, Leg: s.Leg, Score: s.Score, Comment: s.Comment}
	err := a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		var rowID, queueID int64
		var status handoff.Status
		var closedAt *time.Time
		var agentID *int64
		// The row lock orders the verdict after a close or reopen under way.
		err := tx.QueryRow(ctx, `SELECT id, queue_id, status, closed_at, assignee_id FROM handoffs
			WHERE handoff_id = $1 AND queue_id = ANY($2) FOR UPDATE`, handoffID, queueIDs).Scan(&rowID, &queueID, &status, &closedAt, &agentID)
		if errors.Is(err, pgx.ErrNoRows) {
			return desk.Errorf(desk.NotFound, "no handoff %q in this key's queues", handoffID)
		}
		if err != nil {
			return err
		}
		switch {
		case closedAt == nil:
			return &desk.Error{Code: desk.Conflict, Reason: "handoff_open", Details: map[string]string{"status": string(status)},
				Message: fmt.Sprintf("handoff %s is %s: send the customer's verdict once it is resolved, returned to the bot, canceled or expired", handoffID, status)}
		case s.Leg == csat.Human && agentID == nil:
			return &desk.Error{Code: desk.Conflict, Reason: "no_human_leg", Details: map[string]string{"status": string(status)},
				Message: fmt.Sprintf("handoff %s was %s with no agent taking it: there is no human leg to rate; rate the bot's (leg bot)", handoffID, status)}
		case s.Leg == csat.Bot:
			agentID = nil
		}
		rec.At = now
		err = csat.Insert(ctx, tx, rowID, queueID, agentID, s, now)
		var given csat.ErrGiven
		if errors.As(err, &given) {
			return &desk.Error{Code: desk.Conflict, Reason: "csat_given", Details: map[string]string{"given_at": given.When.UTC().Format(time.RFC3339)},
				Message: fmt.Sprintf("the %s leg of handoff %s has its verdict already, given at %s: a leg is rated once", s.Leg, handoffID, given.When.UTC().Format(time.RFC3339))}
		}
		return err
	})
	return rec, err
}
