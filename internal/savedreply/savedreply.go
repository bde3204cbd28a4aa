// Package savedreply is each queue's saved replies: answers an agent inserts in the co-pilot
// editor and edits, written with the editor's tokens (⟦first name⟧) where the customer's values
// go, so one text serves every customer and every role. It owns the saved_replies table; a reply
// that started from one records its id in the thread (internal/conversation), for the evals.
package savedreply

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/handoffdesk/desk/internal/desk"
)

// Limits of a saved reply: a title an agent picks from a list, a body as long as a reply may be.
const (
	MaxTitle = 80
	MaxBody  = 8000
)

// Reply is one saved reply of a queue.
type Reply struct {
	ID      int64
	QueueID int64
	Title   string
	Body    string
}

// Querier is a pool or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// List returns the saved replies of queueID, by title.
func List(ctx context.Context, db Querier, queueID int64) ([]Reply, error) {
	rows, err := db.Query(ctx, `SELECT id, queue_id, title, body FROM saved_replies
		WHERE queue_id = $1 AND removed_at IS NULL ORDER BY lower(title), id`, queueID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Reply])
}

// Add saves a reply for queueID; a title or body out of bounds, or a title the queue has, is
// refused naming the field.
func Add(ctx context.Context, tx pgx.Tx, queueID int64, title, body string) (Reply, error) {
	r := Reply{QueueID: queueID, Title: strings.TrimSpace(title), Body: strings.TrimSpace(body)}
	bad := desk.Fields{}
	if n := utf8.RuneCountInString(r.Title); n == 0 || n > MaxTitle {
		bad.Add("title", "a saved reply's title has 1 to %d characters, the name agents pick it by", MaxTitle)
	}
	if n := utf8.RuneCountInString(r.Body); n == 0 || n > MaxBody {
		bad.Add("body", "a saved reply's text has 1 to %d characters", MaxBody)
	}
	if err := bad.Err(); err != nil {
		return Reply{}, err
	}
	err := tx.QueryRow(ctx, `INSERT INTO saved_replies (queue_id, title, body) VALUES ($1, $2, $3) RETURNING id`,
		queueID, r.Title, r.Body).Scan(&r.ID)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return Reply{}, desk.Errorf(desk.NotFound, "no queue has id %d", queueID)
	}
	if errors.As(err, &pgErr) && pgErr.ConstraintName == "saved_replies_title_idx" {
		return Reply{}, &desk.Error{Code: desk.Conflict, Message: fmt.Sprintf("the queue has a saved reply titled %q: give this one another title", r.Title),
			Details: map[string]string{"title": "the queue has a saved reply with this title"}}
	}
	return r, err
}

// Remove takes saved reply id off queueID's list. It is kept, marked removed, for the replies that
// started from it.
func Remove(ctx context.Context, tx pgx.Tx, queueID, id int64) (Reply, error) {
	r := Reply{ID: id, QueueID: queueID}
	err := tx.QueryRow(ctx, `UPDATE saved_replies SET removed_at = now() WHERE id = $1 AND queue_id = $2 AND removed_at IS NULL
		RETURNING title`, id, queueID).Scan(&r.Title)
	if errors.Is(err, pgx.ErrNoRows) {
		return Reply{}, desk.Errorf(desk.NotFound, "the queue has no saved reply %d", id)
	}
	return r, err
}

// Check refuses a reply's saved reply id that is not one of queueID's (the record would name
// another queue's answer), and returns its text, which drafted the reply.
func Check(ctx context.Context, db Querier, queueID, id int64) (string, error) {
	var body string
	err := db.QueryRow(ctx, `SELECT body FROM saved_replies WHERE id = $1 AND queue_id = $2`, id, queueID).Scan(&body)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", &desk.Error{Code: desk.Invalid, Message: fmt.Sprintf("saved reply %d is not one of this queue's saved replies", id),
			Details: map[string]string{"field": "saved_reply"}}
	}
	return body, err
}
