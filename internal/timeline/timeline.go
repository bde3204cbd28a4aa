// Package timeline tells what happened to a package in words, from the event log: "Accepted by
// Alex", "Rang Bea Agent · 20 s, no answer", "Refund of 240.00 USD requested by Alex". The log is
// the one record (events); this package reads a package's rows with the names of the people and
// bots they name, and Words is the one mapping of a row to words.
//
// What a line says in Text names only the desk's people, its bots, its queues, codes in words and
// amounts: nothing a queue's PII rule covers. What a person wrote (a note, a reason) is kept apart
// in Note, for the caller to mask per viewer (handoff.Package.MaskNoteFor) before it shows it.
package timeline

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/events"
)

// Entry is one row of a package's log, with the names it refers to.
type Entry struct {
	Seq  int64
	At   time.Time
	Kind events.Kind
	// Actor is the display name of the person who made the change, Bot the bot that did, by the
	// name the package gives it (source_agent), as the package's page names it, or its key's name
	// where no package says; both empty for the desk itself (the sweeper).
	Actor, Bot string
	// ActorID is the person's user id, 0 for a bot or the desk; ActorSawContact whether they could
	// see the package's contact when they acted (true for a bot or the desk).
	ActorID         int64
	ActorSawContact bool
	// Subject is the display name of the person a ring named.
	Subject string
	Detail  map[string]any
	// Rang is, on an ended ring, how long it rang (Lines finds its start).
	Rang time.Duration
}

// Line is an entry in words.
type Line struct {
	Seq  int64
	At   time.Time
	Kind events.Kind
	Text string
	// Note is what a person wrote with the change, unmasked: the caller masks it per viewer.
	Note string
	// NoteBy is the user id of who wrote Note (0 for a bot), and NoteBySawContact whether they
	// could see the package's contact when they wrote it (true for a bot).
	NoteBy           int64
	NoteBySawContact bool
}

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Limit bounds the entries read for one package, newest kept: a package worked for weeks with
// notes every hour still loads in one page.
const Limit = 500

const entrySelect = `
	SELECT e.seq, e.at, e.kind, coalesce(au.display_name, ''), coalesce(au.id, 0), e.actor_saw_contact,
		coalesce(CASE WHEN e.actor_bot IS NOT NULL THEN p.source_agent END, k.name, ''),
		coalesce(su.display_name, ''), e.detail, e.handoff_id
	FROM events e
		LEFT JOIN users au ON au.id = e.actor_user
		LEFT JOIN api_keys k ON k.id = e.actor_bot
		LEFT JOIN handoffs p ON p.id = e.handoff_id
		LEFT JOIN users su ON su.id = e.subject_user`

// Read returns the package's entries, oldest first, at most Limit of the newest. Where a reply's
// webhook stands is not among them (the conversation shows it beside the reply), nor who had the
// package open (the page shows who has it now).
func Read(ctx context.Context, db Querier, handoffID int64) ([]Entry, error) {
	rows, err := db.Query(ctx, entrySelect+` WHERE e.handoff_id = $1 AND e.kind NOT IN ('reply_delivery', 'viewing') ORDER BY e.seq DESC LIMIT $2`, handoffID, Limit)
	if err != nil {
		return nil, err
	}
	pes, err := collect(rows)
	es := make([]Entry, len(pes))
	for i, pe := range slices.Backward(pes) {
		es[len(pes)-1-i] = pe.Entry
	}
	return es, err
}

// Latest returns the newest entry of each package in ids that has one, by package.
func Latest(ctx context.Context, db Querier, ids []int64) (map[int64]Entry, error) {
	rows, err := db.Query(ctx, `
		SELECT l.* FROM unnest($1::bigint[]) AS h(id), LATERAL (`+entrySelect+`
			WHERE e.handoff_id = h.id AND e.kind NOT IN ('reply_delivery', 'viewing') ORDER BY e.seq DESC LIMIT 1) l`, ids)
	if err != nil {
		return nil, err
	}
	pes, err := collect(rows)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]Entry, len(pes))
	for _, pe := range pes {
		out[pe.handoffID] = pe.Entry
	}
	return out, nil
}

type packageEntry struct {
	Entry
	handoffID int64
}

func collect(rows pgx.Rows) ([]packageEntry, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (packageEntry, error) {
		var pe packageEntry
		var detail []byte
		if err := row.Scan(&pe.Seq, &pe.At, &pe.Kind, &pe.Actor, &pe.ActorID, &pe.ActorSawContact, &pe.Bot, &pe.Subject, &detail,
			&pe.handoffID); err != nil {
			return packageEntry{}, err
		}
		if err := json.Unmarshal(detail, &pe.Detail); err != nil {
			return packageEntry{}, fmt.Errorf("timeline: the detail of event %d: %w", pe.Seq, err)
		}
		return pe, nil
	})
}

// Lines words a package's entries, newest first. A ring that ended shows once, as its end, with
// how long it rang; one still ringing shows as its start.
func Lines(es []Entry) []Line {
	started := map[string]time.Time{}
	var kept []Entry
	for _, e := range es {
		switch e.Kind {
		case events.Offered:
			started[e.Subject] = e.At
			continue
		case events.OfferEnded:
			if at, ok := started[e.Subject]; ok {
				e.Rang = e.At.Sub(at)
				delete(started, e.Subject)
			}
		}
		kept = append(kept, e)
	}
	// The rings still ringing come back in, where they started.
	for _, e := range es {
		if at, ok := started[e.Subject]; ok && e.Kind == events.Offered && e.At.Equal(at) {
			kept = append(kept, e)
		}
	}
	slices.SortFunc(kept, func(a, b Entry) int { return int(b.Seq - a.Seq) })
	out := make([]Line, len(kept))
	for i, e := range kept {
		out[i] = Words(e)
	}
	return out
}

// Words says what one entry means, in a sentence an agent reads at a glance.
func Words(e Entry) Line {
	l := Line{Seq: e.Seq, At: e.At, Kind: e.Kind, NoteBy: e.ActorID, NoteBySawContact: e.ActorSawContact}
	by := func(verb string) string {
		switch {
		case e.Actor != "":
			return verb + " by " + e.Actor
		case e.Bot != "":
			return verb + " by the bot " + e.Bot
		}
		return verb
	}
	text := func(k string) string { s, _ := e.Detail[k].(string); return s }
	// because adds a code's words, when the change gave one.
	because := func(s, code string) string {
		if code == "" {
			return s
		}
		return s + ": " + Spoken(code)
	}
	refund := "Refund"
	if amount := text("amount"); amount != "" {
		refund = "Refund of " + strings.TrimSpace(amount+" "+text("currency"))
	}
	switch e.Kind {
	case events.Queued:
		l.Text = by("Handed over")
		if q := text("queue"); q != "" {
			l.Text += " to " + q
		}
		if r := text("reason"); r != "" {
			l.Text += " (" + Spoken(r) + ")"
		}
	case events.Reserved:
		l.Text = by("Reserved")
	case events.Released:
		if text("reason") == "assignee_disabled" {
			l.Text = "Back in the queue: its holder's account was disabled"
		} else {
			l.Text = "Back in the queue: the reservation ran out"
		}
	case events.Accepted:
		l.Text = by("Accepted")
	case events.Rejected:
		l.Text = by("Rejected")
		if from := text("from_queue"); from != "" && from != text("queue") {
			l.Text += ", sent to " + text("queue")
		}
		if b, _ := e.Detail["needs_supervisor"].(bool); b {
			l.Text += "; it now waits for a supervisor"
		}
		l.Note = text("reason")
	case events.Transferred:
		l.Text = by("Transferred") + " from " + text("from_queue") + " to " + text("to_queue")
		if text("reason") == "queue_disabled" {
			l.Text = "Moved from " + text("from_queue") + " to " + text("to_queue") + ": " + text("from_queue") + " was disabled"
		}
		l.Note = text("note")
	case events.ReturnedToBot:
		l.Text = because(by("Returned to the bot"), text("reason"))
		l.Note = text("note")
	case events.Resolved:
		l.Text = because(by("Resolved"), text("outcome"))
		if text("amount") != "" {
			l.Text += " " + strings.TrimSpace(text("amount")+" "+text("currency"))
		}
		l.Note = text("note")
	case events.Expired:
		l.Text = "Expired: nobody took it in time"
	case events.Canceled:
		l.Text = by("Canceled") + ": the customer left"
	case events.Reply:
		l.Text = by("Reply sent")
	case events.Message:
		// The words are in the thread beside the timeline; the line says who spoke.
		l.Text = "The customer wrote again"
		if text("role") == "assistant" {
			l.Text = "The bot wrote to the customer"
		}
	case events.Reopened:
		l.Text = "Reopened: the customer wrote again after the resolve"
	case events.Noted:
		l.Text = by("Note")
		l.Note = text("note")
	case events.Reassigned:
		// A take-over moves the package to the one who moved it.
		l.Text = by("Reassigned") + " from " + cmp.Or(text("from"), "nobody") + " to " + cmp.Or(e.Subject, text("to"))
		if to := cmp.Or(e.Subject, text("to")); to != "" && to == e.Actor {
			l.Text = "Taken over by " + e.Actor + " from " + cmp.Or(text("from"), "nobody")
		}
	case events.Offered:
		l.Text = "Ringing " + ringee(e)
	case events.OfferEnded:
		l.Text = "Rang " + ringee(e)
		if e.Rang > 0 {
			l.Text += " · " + seconds(e.Rang)
		}
		if o, ok := ringOutcomes[text("outcome")]; ok {
			l.Text += ", " + o
		}
	case events.WarmTimeout:
		l.Text = "Warm transfer ended with nobody taking it"
		if r, ok := warmReasons[text("reason")]; ok {
			l.Text += ": " + r
		}
	case events.ApprovalRequested:
		l.Text = by(refund + " requested")
		l.Note = text("note")
	case events.ApprovalGranted:
		l.Text = by(refund + " approved")
		l.Note = text("note")
	case events.ApprovalDenied:
		l.Text = by(refund + " denied")
		l.Note = text("note")
	case events.ApprovalExpired:
		l.Text = refund + ": the approval expired, no supervisor decided in time"
	case events.ApprovalWithdrawn:
		l.Text = by(refund + ": approval request withdrawn")
	default:
		l.Text = by(capital(Spoken(string(e.Kind))))
	}
	return l
}

// ringee names the agent a ring named: the change names them (Subject); older rings' ends carry
// the name in their detail only.
func ringee(e Entry) string {
	if e.Subject != "" {
		return e.Subject
	}
	if s, _ := e.Detail["agent"].(string); s != "" {
		return s
	}
	return "an agent"
}

var ringOutcomes = map[string]string{
	"accepted":  "answered",
	"declined":  "declined",
	"timed_out": "no answer",
	"withdrawn": "went offline",
	"taken":     "taken from the queue meanwhile",
}

var warmReasons = map[string]string{
	"no_agent_online": "no agent was online",
	"all_declined":    "every agent declined or let it ring",
	"waited_too_long": "it waited too long",
}

// seconds says a ring's length in the desk's one notation of durations (views.FormatSpan, which
// this package does not import; TestOneDurationFormat holds them together): "20s", "2m 05s".
func seconds(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s >= 3600:
		return fmt.Sprintf("%dh %02dm", s/3600, s/60%60)
	case s%60 == 0:
		return fmt.Sprintf("%dm", s/60)
	}
	return fmt.Sprintf("%dm %02ds", s/60, s%60)
}

// Spoken says a code (a status, a reason, a resolution) in words: awaiting_approval is "awaiting
// approval". Codes are the API's; people read words.
func Spoken(code string) string { return strings.ReplaceAll(code, "_", " ") }

func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
