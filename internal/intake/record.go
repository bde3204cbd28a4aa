package intake

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
)

// Record is what a bot may know of a package it sent: where it is, who has it, how it ended.
type Record struct {
	HandoffID   string         `json:"handoff_id"`
	Status      handoff.Status `json:"status"`
	Queue       string         `json:"queue"`
	ContactID   string         `json:"contact_id"`
	Assignee    string         `json:"assignee,omitempty"`
	Outcome     string         `json:"outcome,omitempty"`
	OutcomeNote string         `json:"outcome_note,omitempty"`
	CreatedAt   time.Time      `json:"created_at"`
	AcceptedAt  *time.Time     `json:"accepted_at,omitempty"`
	ClosedAt    *time.Time     `json:"closed_at,omitempty"`
	ExpiresAt   time.Time      `json:"expires_at"`
	// Approval is the package's latest refund approval request, once one exists.
	Approval *Approval `json:"approval,omitempty"`
	// Refund is, once resolved as refunded, what was paid back against what the bot asked.
	Refund *handoff.RefundOutcome `json:"refund,omitempty"`
	// HandBack is, once returned to the bot or resolved, what the agent handed it back with.
	HandBack *handoff.HandBack `json:"hand_back,omitempty"`
}

// Approval is what a bot may know of a refund approval: no names, no notes.
type Approval struct {
	State     string     `json:"state"`
	Amount    string     `json:"amount"`
	Currency  string     `json:"currency"`
	DecidedAt *time.Time `json:"decided_at"`
}

const recordSelect = `
	SELECT h.handoff_id, h.status, q.name, h.contact_id, coalesce(u.display_name, ''), coalesce(h.outcome, ''),
		coalesce(h.outcome_note, ''), h.created_at, h.accepted_at, h.closed_at, h.expires_at,
		a.state, a.amount::text, a.currency, a.decided_at, h.refund, h.hand_back
	FROM handoffs h JOIN queues q ON q.id = h.queue_id LEFT JOIN users u ON u.id = h.assignee_id
	-- The latest refund approval request, read from its owner's table (internal/approvals).
	LEFT JOIN LATERAL (SELECT state, amount, currency, decided_at FROM approvals
		WHERE handoff_id = h.id ORDER BY requested_at DESC, id DESC LIMIT 1) a ON true`

func scanRecord(row pgx.Row) (Record, error) {
	var r Record
	var state, amount, currency *string
	var decidedAt *time.Time
	err := row.Scan(&r.HandoffID, &r.Status, &r.Queue, &r.ContactID, &r.Assignee, &r.Outcome, &r.OutcomeNote,
		&r.CreatedAt, &r.AcceptedAt, &r.ClosedAt, &r.ExpiresAt, &state, &amount, &currency, &decidedAt, &r.Refund, &r.HandBack)
	if state != nil {
		r.Approval = &Approval{State: *state, Amount: *amount, Currency: *currency, DecidedAt: decidedAt}
	}
	return r, err
}

// Get returns a package in one of the sender's queues; others are NotFound, so ids do not leak
// between bots.
func (in *Intake) Get(ctx context.Context, sender Sender, handoffID string) (Record, error) {
	r, err := scanRecord(in.db.QueryRow(ctx, recordSelect+` WHERE h.handoff_id = $1 AND h.queue_id = ANY($2)`,
		handoffID, sender.QueueIDs))
	if errors.Is(err, pgx.ErrNoRows) {
		return Record{}, desk.Errorf(desk.NotFound, "no handoff %q in this key's queues", handoffID)
	}
	return r, err
}

// ForContact lists a contact's packages in the sender's queues, newest first, so a bot can resume
// an incident when the customer comes back.
func (in *Intake) ForContact(ctx context.Context, sender Sender, contactID string, openOnly bool) ([]Record, error) {
	rows, err := in.db.Query(ctx, recordSelect+`
		WHERE h.contact_id = $1 AND h.queue_id = ANY($2) AND (NOT $3 OR h.closed_at IS NULL)
		ORDER BY h.created_at DESC LIMIT 100`, contactID, sender.QueueIDs, openOnly)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Record, error) { return scanRecord(row) })
}
