package evals

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
)

// Kind is what a record is of.
type Kind string

const (
	KindReply       Kind = "reply"
	KindReturnToBot Kind = "return_to_bot"
	KindReject      Kind = "reject"
	KindResolve     Kind = "resolve"
)

// Tags are why an agent changed the bot's draft; the evals table's check holds the same list.
func Tags() []string {
	return []string{"tone", "factual_error", "policy", "missing_info", "too_long", "other"}
}

// MaxReplyChars caps a reply at what the package schema allows a bot's draft_reply, so that any
// reply could have been a draft.
const MaxReplyChars = 10000

// MaxEditing bounds the time spent editing a reply, which the browser claims: a tab left open over
// a weekend says nothing about the effort, and the column is an integer of milliseconds.
const MaxEditing = 24 * time.Hour

// Reply is what an agent sends: the final text, why they changed the draft, and how long they
// spent on it by the browser's account.
type Reply struct {
	Text    string
	Tags    []string
	Editing time.Duration
}

// ParseReply reads a reply from the form's fields, refusing what the desk would not send and
// naming the field at fault. editingMS is the browser's milliseconds from the editor's first
// focus to send; absent, the time is unknown and recorded as 0, and past MaxEditing it is
// recorded as MaxEditing.
func ParseReply(text string, tags []string, editingMS string) (Reply, error) {
	invalid := func(field, format string, args ...any) error {
		return &desk.Error{Code: desk.Invalid, Details: map[string]string{"field": field}, Message: fmt.Sprintf(format, args...)}
	}
	if strings.TrimSpace(text) == "" {
		return Reply{}, invalid("text", "the reply's text is empty")
	}
	if n := utf8.RuneCountInString(text); n > MaxReplyChars {
		return Reply{}, invalid("text", "the reply's text is %d characters; at most %d are allowed", n, MaxReplyChars)
	}
	for _, t := range tags {
		if !slices.Contains(Tags(), t) {
			return Reply{}, invalid("tags", "tag %q is not one of %s", t, strings.Join(Tags(), ", "))
		}
	}
	slices.Sort(tags)
	r := Reply{Text: text, Tags: slices.Compact(tags)}
	if editingMS != "" {
		ms, err := strconv.ParseInt(editingMS, 10, 64)
		if err != nil || ms < 0 {
			return Reply{}, invalid("editing_ms", "editing_ms %q is not a number of milliseconds", editingMS)
		}
		r.Editing = min(time.Duration(ms)*time.Millisecond, MaxEditing)
	}
	if r.Tags == nil {
		r.Tags = []string{}
	}
	return r, nil
}

// Sent is a reply as it is recorded: on a package (its row id) in a queue, by an editor, at a
// time, against the bot's draft of its turn ("" when there was none), answering the customer
// message InReplyTo (nil: the package itself) after the thread Before.
type Sent struct {
	HandoffID, QueueID, EditorID int64
	At                           time.Time
	Draft                        string
	InReplyTo                    *int
	Before                       []conversation.Message
	// SavedReplyID is the saved reply the agent started from, whose text is then Draft (0: none).
	SavedReplyID int64
	Reply
}

// ThreadMessage is a message of the thread as a reply's record keeps it: what the customer, the
// bot and the agents said before the reply, without the bot's drafts.
type ThreadMessage struct {
	Seq  int               `json:"seq"`
	Role conversation.Role `json:"role"`
	Text string            `json:"text"`
	At   time.Time         `json:"at"`
}

func threadOf(msgs []conversation.Message) []ThreadMessage {
	if len(msgs) == 0 {
		return nil
	}
	out := make([]ThreadMessage, len(msgs))
	for i, m := range msgs {
		out[i] = ThreadMessage{Seq: m.Seq, Role: m.Role, Text: m.Text, At: m.At.UTC()}
	}
	return out
}

// Outcome is an action that labels a package: a return to the bot with its reason code and note,
// a rejection with its reason (as Note), a resolution with its code and note.
type Outcome struct {
	Kind                         Kind
	HandoffID, QueueID, EditorID int64
	At                           time.Time
	Code, Note                   string
	// Refund is, on a resolution as refunded, what was paid back against what was asked.
	Refund *handoff.RefundOutcome
	// HandBack keeps, on a return or a resolve, the package's hand_back as the action wrote it
	// earlier in its transaction.
	HandBack bool
}

// needless are the return reasons that say the escalation should not have happened.
var needless = []string{"resolved_by_policy", "wrong_escalation"}

// EscalationNeeded reports whether a return to the bot with this reason says the bot was right to
// hand the conversation over.
func EscalationNeeded(reasonCode string) bool { return !slices.Contains(needless, reasonCode) }

// insertSQL writes one record, reading the package's source fields from its row in the same
// statement, so a record costs its action no round trip of its own. $1 kind, $2 the package's
// row, $3 queue, $4 editor, $5 at, then a reply's fields ($6–$14, $19–$20, $22) or an outcome's
// ($15–$18, $21: whether it keeps the package's hand-back).
const insertSQL = `
	INSERT INTO evals (kind, handoff_id, queue_id, editor_id, at, source_agent, source_run_id, trigger, locale,
		draft, final, word_diff, unified_diff, edit_distance_chars, edit_distance_words, accepted_as_is, tags, editing_ms,
		code, note, escalation_needed, refund, in_reply_to, thread, hand_back, saved_reply_id)
	SELECT $1, h.id, $3, $4, $5, h.source_agent, p.source_run_id, p.trigger, p.locale,
		$6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, CASE WHEN $21 THEN h.hand_back END, $22
	FROM handoffs h, json_to_record(h.package) AS p(source_run_id text, trigger text, locale text)
	WHERE h.id = $2`

// QueueReply adds the record of a sent reply to a batch the caller sends inside the reply's
// transaction.
func QueueReply(b *pgx.Batch, s Sent) error {
	e := Compare(s.Draft, s.Text)
	words, err := json.Marshal(e.Words)
	if err != nil {
		return err
	}
	var savedReply *int64
	if s.SavedReplyID != 0 {
		savedReply = &s.SavedReplyID
	}
	b.Queue(insertSQL, KindReply, s.HandoffID, s.QueueID, s.EditorID, s.At,
		s.Draft, s.Text, string(words), e.Unified, e.CharDistance, e.WordDistance, s.Draft == s.Text, s.Tags,
		s.Editing.Milliseconds(), nil, nil, nil, nil, s.InReplyTo, threadOf(s.Before), false, savedReply)
	return nil
}

// QueueOutcome adds the record of an outcome to a batch the caller sends inside the action's
// transaction: it commits, or rolls back, with the action.
func QueueOutcome(b *pgx.Batch, o Outcome) {
	var code, note *string
	if o.Code != "" {
		code = &o.Code
	}
	if o.Note != "" {
		note = &o.Note
	}
	var needed *bool
	if o.Kind == KindReturnToBot {
		v := EscalationNeeded(o.Code)
		needed = &v
	}
	b.Queue(insertSQL, o.Kind, o.HandoffID, o.QueueID, o.EditorID, o.At,
		nil, nil, nil, nil, nil, nil, nil, nil, nil, code, note, needed, o.Refund, nil, nil, o.HandBack, nil)
}

// SentReply is a reply as the package page lists it.
type SentReply struct {
	ID     int64
	Editor string // the editor's display name
	At     time.Time
	Final  string
	// AsWritten is the reply as an agent who could not see the contact's values submitted it,
	// tokens and all (conversation.Message.AsWritten); "" for one who could.
	AsWritten    string
	Tags         []string
	AcceptedAsIs bool
	FromScratch  bool
	Words        []Segment
}

// Replies lists the replies sent on a package (its row id), oldest first. It reads the editors'
// names from users, whose owner is auth, as board's joins do, and each reply as submitted from the
// thread's message of the same moment (conversation owns messages; the reply's transaction wrote
// both at one time).
func Replies(ctx context.Context, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, handoffID int64) ([]SentReply, error) {
	rows, err := db.Query(ctx, `
		SELECT e.id, u.display_name, e.at, e.final, coalesce(m.as_written, ''), e.tags, e.accepted_as_is, e.draft = '', e.word_diff
		FROM evals e JOIN users u ON u.id = e.editor_id
			LEFT JOIN messages m ON m.handoff_id = e.handoff_id AND m.role = 'agent' AND m.at = e.at AND m.author_id = e.editor_id
		WHERE e.handoff_id = $1 AND e.kind = 'reply' ORDER BY e.at, e.id`, handoffID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (SentReply, error) {
		var r SentReply
		err := row.Scan(&r.ID, &r.Editor, &r.At, &r.Final, &r.AsWritten, &r.Tags, &r.AcceptedAsIs, &r.FromScratch, &r.Words)
		return r, err
	})
}
