package actions

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/tracing"
)

// AddNote keeps an internal note on a package, at any time and in any status, for everyone who may
// see the package: the log's noted change, which the package's timeline reads, holds it, as does
// the notes table, whose words search finds; the bot never hears of it. Anyone who works the
// package's queue may write one, and supervisors (Check's Note). The text is refused, naming the
// form field text, when it is blank, longer than MaxNoteChars or holds a pasted mask.
func (a *Service) AddNote(ctx context.Context, user auth.User, handoffID, text string) (err error) {
	if strings.TrimSpace(text) == "" {
		return &desk.Error{Code: desk.Invalid, Details: map[string]string{"field": "text"}, Message: "the text of the note is empty: write what the next person should know"}
	}
	if err := checkNote("text", text); err != nil {
		return err
	}
	ctx, span := a.tracing.Act(ctx, "handoff.note", handoffID)
	defer func() { tracing.End(span, err) }()
	return a.inTx(ctx, func(tx pgx.Tx, now time.Time) error {
		h, err := lockTo(ctx, tx, Note, user, handoffID, now)
		if err != nil {
			return err
		}
		b := &pgx.Batch{}
		// The notes table is what search reads for a note's words (internal/search).
		b.Queue(`INSERT INTO handoff_notes (handoff_id, author_id, body, created_at, author_saw_contact) VALUES ($1, $2, $3, $4, $5)`,
			h.ID, user.ID, text, now, h.seenBy(user).PII)
		if err := record(ctx, b, events.Change{HandoffID: h.ID, PublicID: h.PublicID, QueueID: h.Queue.ID, Queue: h.Queue.Name,
			APIKeyID: h.APIKeyID, Kind: events.Noted, Status: h.Status, ActorUser: &user.ID, Note: text, At: now,
			PackageTrace: h.Trace}, nil); err != nil {
			return err
		}
		return tx.SendBatch(ctx, b).Close()
	})
}
