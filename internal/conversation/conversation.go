// Package conversation is a package's thread after the handoff (SPEC §2a): every message the
// customer writes, the bot's own while no agent holds the package, and every reply an agent sends,
// in one order per package. It owns the messages table and every read of it; the rules of who may
// post when are the desk's (internal/actions), which appends here inside its own transaction, with
// the change's event and webhook, under the package's row lock.
package conversation

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/handoff"
)

// Role is who wrote a message.
type Role string

const (
	User      Role = "user"      // the customer, relayed by the bot
	Assistant Role = "assistant" // the bot itself, while no agent holds the package
	Agent     Role = "agent"     // a desk agent's reply
)

// AllowedValues lists the roles a bot may post: agents reply at the desk.
func (Role) AllowedValues() []string { return []string{string(User), string(Assistant)} }

// Limits of the thread. A package takes at least 120 messages a minute (SPEC §2a): a customer who
// pastes a long text as a burst of lines must not be cut off, a runaway relay must.
const (
	MaxTextChars   = 8000
	MaxAttachments = 10
	PerMinute      = 300
	MaxMessages    = 2000
)

// Attachment is a link the customer sent: the desk stores links, never files.
type Attachment struct {
	URL         string `json:"url" validate:"required,max=2048,https"`
	Name        string `json:"name,omitempty" validate:"max=255"`
	ContentType string `json:"content_type,omitempty" validate:"max=255"`
	Size        *int64 `json:"size,omitempty" validate:"omitnil,min=0"`
}

// Incoming is a message a bot posts (POST /api/v1/handoffs/{id}/messages).
type Incoming struct {
	MessageID   string       `json:"message_id" validate:"required,max=128,handoff_id"`
	Role        Role         `json:"role" validate:"required,oneof"`
	Text        string       `json:"text" validate:"required,notblank,max=8000"`
	At          *time.Time   `json:"at,omitzero"`
	DraftReply  string       `json:"draft_reply,omitempty" validate:"max=8000"`
	Attachments []Attachment `json:"attachments,omitempty" validate:"max=10,dive"`
}

// Decode reads a message from a request body: a *handoff.SyntaxError for a body that is not JSON,
// a *handoff.ValidationError naming every bad field, as a package's are.
func Decode(body []byte) (Incoming, error) {
	var m Incoming
	err := handoff.DecodeObject(body, &m, "a message")
	var fields []handoff.FieldError
	var invalid *handoff.ValidationError
	switch {
	case errors.As(err, &invalid):
		fields = invalid.Fields
	case err != nil:
		return Incoming{}, err
	}
	if m.DraftReply != "" && m.Role != User {
		fields = append(fields, handoff.FieldError{Field: "draft_reply", Rule: "user_only",
			Message: "draft_reply drafts the answer to a customer's message: send it on a message with role user"})
	}
	if len(fields) > 0 {
		return Incoming{}, &handoff.ValidationError{Subject: "message", Fields: fields}
	}
	if m.At != nil {
		*m.At = m.At.UTC()
	}
	return m, nil
}

// digest is what identifies a bot's message for its replay: the same id with the same body answers
// again, with another body is refused. The time it was received is no part of it.
func (m Incoming) digest() []byte {
	body, _ := json.Marshal(m) // a struct of strings, times and ints always encodes
	sum := sha256.Sum256(body)
	return sum[:]
}

// Message is one message of the thread.
type Message struct {
	Seq         int          `json:"seq"`
	MessageID   string       `json:"message_id"`
	Role        Role         `json:"role"`
	Text        string       `json:"text"`
	At          time.Time    `json:"at"`
	Author      string       `json:"author,omitempty"` // agents: their display name
	AuthorID    *int64       `json:"-"`
	DraftReply  string       `json:"-"` // the co-pilot's, never the bot's to read back
	Attachments []Attachment `json:"attachments"`
	// InReplyTo is, on an agent's reply, the seq of the customer message it answers.
	InReplyTo *int `json:"in_reply_to,omitempty"`
	// SavedReplyID is, on an agent's reply, the saved reply it started from (internal/savedreply).
	SavedReplyID *int64 `json:"-"`
	// AsWritten is, on the reply of an agent who could not see the contact's values, the text as
	// they submitted it, before its tokens were filled with the values: what readers who cannot
	// see the values read, so that a guess they typed reads alike right or wrong. "" otherwise.
	AsWritten string `json:"-"`
}

// Thread is where a package's thread stands, read under the package's row lock before a message
// is appended.
type Thread struct {
	Last int // the last seq; 0 for none
	// FromBot counts the bot's messages, in all and in the minute before the read.
	FromBot, FromBotLastMinute int
	// LastCustomer is the seq of the customer's latest message (0: none yet).
	LastCustomer int
}

// State reads the thread of the locked package rowID as of now.
func State(ctx context.Context, tx pgx.Tx, rowID int64, now time.Time) (Thread, error) {
	var t Thread
	err := tx.QueryRow(ctx, `
		SELECT coalesce(max(seq), 0), count(*) FILTER (WHERE role <> 'agent'),
			count(*) FILTER (WHERE role <> 'agent' AND received_at > $2::timestamptz - interval '1 minute'),
			coalesce(max(seq) FILTER (WHERE role = 'user'), 0)
		FROM messages WHERE handoff_id = $1`, rowID, now).Scan(&t.Last, &t.FromBot, &t.FromBotLastMinute, &t.LastCustomer)
	return t, err
}

// Posted is a bot's message in the thread.
type Posted struct {
	HandoffID string `json:"handoff_id"`
	MessageID string `json:"message_id"`
	Seq       int    `json:"seq"`
	// Replayed: the message was in the thread already, with the same body.
	Replayed bool `json:"-"`
	// Reopened: the customer's message reopened the resolved package.
	Reopened bool `json:"-"`
}

// ErrOtherBody is a message id the thread holds with another body.
var ErrOtherBody = errors.New("message id already used with another body")

// Look is what a bot's message finds in the thread of its package: the thread's state, and the
// message if the thread holds its id already.
type Look struct {
	Thread
	seq    *int
	digest []byte
}

// QueueLook adds to b the read of what m finds in the thread of the package publicID, as of now.
// The caller queues it after the statement that locks the package, in the same batch: each
// statement of a batch reads afresh, so it sees every message committed before the lock was
// granted, and the lock's round trip carries it.
func QueueLook(b *pgx.Batch, publicID string, m Incoming, now time.Time, l *Look) {
	b.Queue(`
		WITH h AS (SELECT id FROM handoffs WHERE handoff_id = $1)
		SELECT coalesce(max(m.seq), 0), count(*) FILTER (WHERE m.role <> 'agent'),
			count(*) FILTER (WHERE m.role <> 'agent' AND m.received_at > $2::timestamptz - interval '1 minute'),
			coalesce(max(m.seq) FILTER (WHERE m.role = 'user'), 0),
			max(m.seq) FILTER (WHERE m.message_id = $3), (array_agg(m.body_sha256) FILTER (WHERE m.message_id = $3))[1]
		FROM messages m WHERE m.handoff_id = (SELECT id FROM h)`, publicID, now, m.MessageID).QueryRow(func(row pgx.Row) error {
		return row.Scan(&l.Last, &l.FromBot, &l.FromBotLastMinute, &l.LastCustomer, &l.seq, &l.digest)
	})
}

// Replay says whether m is in the thread already: ok false when it is not, ErrOtherBody when its
// id is, with another body.
func (l Look) Replay(m Incoming) (seq int, ok bool, err error) {
	switch {
	case l.seq == nil:
		return 0, false, nil
	case string(l.digest) != string(m.digest()):
		return *l.seq, true, ErrOtherBody
	}
	return *l.seq, true, nil
}

// Append adds the bot's message m to b as the thread's message seq, received at now.
func Append(b *pgx.Batch, rowID int64, seq int, m Incoming, now time.Time) {
	at := now
	if m.At != nil {
		at = *m.At
	}
	attachments := m.Attachments
	if attachments == nil {
		attachments = []Attachment{}
	}
	b.Queue(`
		INSERT INTO messages (handoff_id, seq, message_id, role, text, at, received_at, draft_reply, attachments, body_sha256)
		VALUES ($1, $2, $3, $4, $5, $6, $7, NULLIF($8, ''), $9, $10)`,
		rowID, seq, m.MessageID, m.Role, m.Text, at, now, m.DraftReply, attachments, m.digest())
}

// Reply is an agent's reply as the thread holds it.
type Reply struct {
	MessageID string
	Seq       int
	InReplyTo *int
}

// AppendReply adds an agent's reply to b as the thread's next message after t, answering the
// customer's latest message, if any; asWritten is its text as submitted by an agent who could not
// see the contact's values ("": one who could; Message.AsWritten), savedID the saved reply it
// started from (0: none).
func AppendReply(b *pgx.Batch, rowID int64, t Thread, authorID int64, text, asWritten string, savedID int64, now time.Time) Reply {
	r := Reply{MessageID: "reply_" + rand.Text(), Seq: t.Last + 1}
	if t.LastCustomer > 0 {
		r.InReplyTo = &t.LastCustomer
	}
	b.Queue(`
		INSERT INTO messages (handoff_id, seq, message_id, role, text, at, received_at, author_id, in_reply_to, saved_reply_id, as_written)
		VALUES ($1, $2, $3, 'agent', $4, $5, $5, $6, $7, NULLIF($8, 0), NULLIF($9, ''))`,
		rowID, r.Seq, r.MessageID, text, now, authorID, r.InReplyTo, savedID, asWritten)
	return r
}

// Read returns the thread of rowID after seq after, in order.
func Read(ctx context.Context, db querier, rowID int64, after int) ([]Message, error) {
	rows, err := db.Query(ctx, `
		SELECT m.seq, m.message_id, m.role, m.text, m.at, coalesce(u.display_name, ''), m.author_id,
			coalesce(m.draft_reply, ''), m.attachments, m.in_reply_to, m.saved_reply_id, coalesce(m.as_written, '')
		FROM messages m LEFT JOIN users u ON u.id = m.author_id
		WHERE m.handoff_id = $1 AND m.seq > $2 ORDER BY m.seq LIMIT $3`, rowID, after, MaxMessages*2)
	return collect(rows, err)
}

func collect(rows pgx.Rows, err error) ([]Message, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Message, error) {
		var m Message
		err := row.Scan(&m.Seq, &m.MessageID, &m.Role, &m.Text, &m.At, &m.Author, &m.AuthorID, &m.DraftReply, &m.Attachments, &m.InReplyTo, &m.SavedReplyID, &m.AsWritten)
		return m, err
	})
}

// ContextMessages bounds the thread an agent's reply keeps as the conversation it answered: a
// trainer's prompt carries the recent exchange (evals.PromptTurns turns), and a record that held
// the whole thread at every reply would grow with the square of the thread.
const ContextMessages = 50

// Turn is what an agent's reply answers, read under the package's row lock before the reply is
// appended: the eval record of the reply keeps it (SPEC §3, "every reply is an eval pair for its
// turn").
type Turn struct {
	// Before is the thread up to the customer message the reply answers, that message last (its
	// last ContextMessages messages; none when the customer has not written since the handoff).
	// Drafts are not in it: a draft is no part of what the customer saw.
	Before []Message
	// Draft is the bot's draft of this turn: the latest draft_reply of a customer message since
	// the previous reply ("" for none).
	Draft string
	// FirstAnswer: no agent has replied in the thread yet, so the package's own draft_reply is
	// the draft of this turn when no customer message brought a fresher one.
	FirstAnswer bool
}

// TurnOf reads the turn the next reply on the locked package rowID answers; t is the thread's
// State read in the same transaction.
func TurnOf(ctx context.Context, tx pgx.Tx, rowID int64, t Thread) (Turn, error) {
	var turn Turn
	var previous int
	err := tx.QueryRow(ctx, `
		WITH previous AS (SELECT coalesce(max(seq), 0) AS seq FROM messages WHERE handoff_id = $1 AND role = 'agent')
		SELECT previous.seq, coalesce((SELECT m.draft_reply FROM messages m
			WHERE m.handoff_id = $1 AND m.role = 'user' AND m.draft_reply IS NOT NULL AND m.seq > previous.seq
			ORDER BY m.seq DESC LIMIT 1), '')
		FROM previous`, rowID).Scan(&previous, &turn.Draft)
	if err != nil {
		return Turn{}, err
	}
	turn.FirstAnswer = previous == 0
	if t.LastCustomer == 0 {
		return turn, nil
	}
	rows, err := tx.Query(ctx, `
		SELECT * FROM (
			SELECT m.seq, m.message_id, m.role, m.text, m.at, coalesce(u.display_name, ''), m.author_id,
				'', m.attachments, m.in_reply_to, m.saved_reply_id, coalesce(m.as_written, '')
			FROM messages m LEFT JOIN users u ON u.id = m.author_id
			WHERE m.handoff_id = $1 AND m.seq <= $2 ORDER BY m.seq DESC LIMIT $3) last
		ORDER BY seq`, rowID, t.LastCustomer, ContextMessages)
	turn.Before, err = collect(rows, err)
	return turn, err
}

// MaskFor masks the thread for a viewer: the contact's values and the queue's PII entity values
// in every text a message carries, as the package's own free text is masked.
func MaskFor(msgs []Message, p handoff.Package, v handoff.Visibility) []Message {
	if v.PII {
		return msgs
	}
	mask := p.NoteMaskFor(v)
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		m.Text, m.DraftReply = mask(m.Text), mask(m.DraftReply)
		if len(m.Attachments) > 0 {
			as := make([]Attachment, len(m.Attachments))
			for j, a := range m.Attachments {
				a.Name, a.URL = mask(a.Name), mask(a.URL)
				as[j] = a
			}
			m.Attachments = as
		}
		out[i] = m
	}
	return out
}

// CheckLimits refuses a bot's message the thread t has no room for, saying when to try again.
func (t Thread) CheckLimits() (retryAfter time.Duration, err error) {
	switch {
	case t.FromBot >= MaxMessages:
		return 0, fmt.Errorf("the thread holds %d messages from the bot, the most a package takes: hand off again with a new package", MaxMessages)
	case t.FromBotLastMinute >= PerMinute:
		return 10 * time.Second, fmt.Errorf("the thread took %d messages in the last minute, the most it takes: send the rest in a moment", PerMinute)
	}
	return 0, nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// ReadMarking returns the whole thread of rowID, in order, and how many of its last messages the
// desk received at or after at: what a batch of events stamped at or after at added to the thread,
// for the live desk's frame, which carries those alone, and the rest it needs to read them by
// (the turn a draft belongs to), in one read.
func ReadMarking(ctx context.Context, db querier, rowID int64, at time.Time) (msgs []Message, added int, err error) {
	rows, err := db.Query(ctx, `
		SELECT m.seq, m.message_id, m.role, m.text, m.at, coalesce(u.display_name, ''), m.author_id,
			coalesce(m.draft_reply, ''), m.attachments, m.in_reply_to, m.saved_reply_id, coalesce(m.as_written, ''), m.received_at >= $2
		FROM messages m LEFT JOIN users u ON u.id = m.author_id
		WHERE m.handoff_id = $1 ORDER BY m.seq LIMIT $3`, rowID, at, MaxMessages*2)
	if err != nil {
		return nil, 0, err
	}
	first, i := -1, 0
	msgs, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Message, error) {
		var m Message
		var isNew bool
		err := row.Scan(&m.Seq, &m.MessageID, &m.Role, &m.Text, &m.At, &m.Author, &m.AuthorID, &m.DraftReply, &m.Attachments, &m.InReplyTo,
			&m.SavedReplyID, &m.AsWritten, &isNew)
		if isNew && first < 0 {
			first = i
		}
		i++
		return m, err
	})
	if err != nil || first < 0 {
		return msgs, 0, err
	}
	// From the first new one on: a reply stamped before it waited for the row lock may follow it.
	return msgs, len(msgs) - first, nil
}

// Waiting is a customer waiting for the desk's answer: the customer wrote Unread messages since
// the last agent reply (or since the handoff, when no agent replied yet), the first at Since.
type Waiting struct {
	Since  time.Time
	Unread int
}

// WaitingOf says, for each of rowIDs whose customer waits, since when and how many messages.
// The customer's time is when the desk received the message, not the time the bot stamped on it:
// the desk cannot answer a message before it has it.
func WaitingOf(ctx context.Context, db querier, rowIDs []int64) (map[int64]Waiting, error) {
	rows, err := db.Query(ctx, waitingSQL(`= ANY($1)`), rowIDs)
	if err != nil {
		return nil, err
	}
	return collectWaiting(rows)
}

// QueueWaitingOf adds to b the read of WaitingOf into waiting, so that a page reads it in the
// round trip of its last reads.
func QueueWaitingOf(b *pgx.Batch, rowIDs []int64, waiting *map[int64]Waiting) {
	queueWaiting(b, `= ANY($1)`, rowIDs, waiting)
}

// QueueWaitingIn adds to b the read of WaitingOf for the rows that rowsSQL selects, given arg as
// its $1, into waiting: a page reads the waiting of the packages its user holds
// (board.HeldIDsSQL) in the round trip that reads them, not after it.
func QueueWaitingIn(b *pgx.Batch, rowsSQL string, arg any, waiting *map[int64]Waiting) {
	queueWaiting(b, `IN (`+rowsSQL+`)`, arg, waiting)
}

func queueWaiting(b *pgx.Batch, rows string, arg any, waiting *map[int64]Waiting) {
	b.Queue(waitingSQL(rows), arg).Query(func(rows pgx.Rows) error {
		var err error
		*waiting, err = collectWaiting(rows)
		return err
	})
}

// waitingSQL is WaitingOf's query for the packages whose row id is rows (a predicate on it).
func waitingSQL(rows string) string {
	return `
		SELECT m.handoff_id, min(m.received_at), count(*)
		FROM messages m
		WHERE m.handoff_id ` + rows + ` AND m.role = 'user' AND m.seq > coalesce(
			(SELECT max(r.seq) FROM messages r WHERE r.handoff_id = m.handoff_id AND r.role = 'agent'), 0)
		GROUP BY m.handoff_id`
}

func collectWaiting(rows pgx.Rows) (map[int64]Waiting, error) {
	out := map[int64]Waiting{}
	var id int64
	var w Waiting
	_, err := pgx.ForEachRow(rows, []any{&id, &w.Since, &w.Unread}, func() error {
		out[id] = w
		return nil
	})
	return out, err
}

// WaitedPastSQL is SQL for whether the customer of the package row waited longer than sla for an
// answer until until (the package's close, or now): a message of theirs after the agent's last
// reply (or, before any, since the handoff) arrived more than sla before it. It is the clock My
// work counts down from Waiting.Since, and /packages' sla_breached counts it too, so that the two
// agree on a customer left waiting after the accept.
func WaitedPastSQL(row, until, sla string) string {
	return `EXISTS (SELECT 1 FROM messages m WHERE m.handoff_id = ` + row + ` AND m.role = 'user' AND m.received_at < ` + until + ` - ` + sla + `
		AND m.seq > coalesce((SELECT max(r.seq) FROM messages r WHERE r.handoff_id = ` + row + ` AND r.role = 'agent'), 0))`
}

// TailSQL is SQL for a JSON object saying where the thread of the package row ends: last_seq, its
// last message's seq (0: none yet), and last_reply, the agent's last reply {seq, text} (left out:
// none), what a bot that takes the conversation back resumes from. A close writes it in its own
// statement, which sees the thread as it is under the close's lock.
func TailSQL(row string) string {
	return `jsonb_build_object('last_seq', coalesce((SELECT max(m.seq) FROM messages m WHERE m.handoff_id = ` + row + `), 0)) ||
		coalesce((SELECT jsonb_build_object('last_reply', jsonb_build_object('seq', m.seq, 'text', m.text)) FROM messages m
			WHERE m.handoff_id = ` + row + ` AND m.role = 'agent' ORDER BY m.seq DESC LIMIT 1), '{}')`
}
