// Package csat is the customer's verdict on a package (SPEC §2a): the survey the bot ran once the
// conversation ended, a score from 1 to 5 and a comment, at most once per leg (the human agents'
// part, the bot's own). It owns the csat table; when a verdict may be given is the desk's rule
// (internal/actions), which records it here inside its own transaction.
package csat

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/handoff"
)

// Leg is the part of the conversation a verdict rates.
type Leg string

const (
	Human Leg = "human" // the agents', from the handoff to its close
	Bot   Leg = "bot"   // the bot's own, before the handoff and after it came back
)

// AllowedValues lists the legs.
func (Leg) AllowedValues() []string { return []string{string(Human), string(Bot)} }

// MaxComment is the most characters a comment has.
const MaxComment = 2000

// Survey is a verdict as the bot sends it (POST /api/v1/handoffs/{id}/csat).
type Survey struct {
	Score   int64  `json:"score" validate:"required,min=1,max=5"`
	Comment string `json:"comment,omitempty" validate:"max=2000"`
	Leg     Leg    `json:"leg" validate:"required,oneof"`
}

// Decode reads a survey from a request body: a *handoff.SyntaxError for a body that is not JSON,
// a *handoff.ValidationError naming every bad field, as a package's are.
func Decode(body []byte) (Survey, error) {
	var s Survey
	err := handoff.DecodeObject(body, &s, "a survey")
	var invalid *handoff.ValidationError
	if errors.As(err, &invalid) {
		invalid.Subject = "survey"
		return Survey{}, invalid
	}
	return s, err
}

// Recorded is a verdict as the desk keeps it.
type Recorded struct {
	HandoffID string    `json:"handoff_id"`
	Leg       Leg       `json:"leg"`
	Score     int64     `json:"score"`
	Comment   string    `json:"comment,omitempty"`
	At        time.Time `json:"at"`
}

// ErrGiven is Insert's answer for a leg that has its verdict already, given at When.
type ErrGiven struct{ When time.Time }

func (e ErrGiven) Error() string {
	return "the verdict on this leg was given at " + e.When.UTC().Format(time.RFC3339)
}

// Insert keeps the verdict s on package rowID, rating queueID and, for the human leg, agentID.
func Insert(ctx context.Context, tx pgx.Tx, rowID, queueID int64, agentID *int64, s Survey, now time.Time) error {
	var comment *string
	if s.Comment != "" {
		comment = &s.Comment
	}
	tag, err := tx.Exec(ctx, `INSERT INTO csat (handoff_id, leg, score, comment, queue_id, agent_id, at)
		VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (handoff_id, leg) DO NOTHING`, rowID, s.Leg, s.Score, comment, queueID, agentID, now)
	if err != nil || tag.RowsAffected() == 1 {
		return err
	}
	var at time.Time
	if err := tx.QueryRow(ctx, `SELECT at FROM csat WHERE handoff_id = $1 AND leg = $2`, rowID, s.Leg).Scan(&at); err != nil {
		return err
	}
	return ErrGiven{When: at}
}

// GivenSQL is SQL that holds when package row has the customer's verdict on leg (SQL for a text).
func GivenSQL(row, leg string) string {
	return `EXISTS (SELECT 1 FROM csat c WHERE c.handoff_id = ` + row + ` AND c.leg = ` + leg + `)`
}
