package evals

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
)

// Format is how an export writes its lines: the desk's own records, or one of the shapes
// fine-tuning tools read. docs/evals.md shows each.
type Format string

const (
	FormatRecords       Format = "records"
	FormatOpenAISFT     Format = "openai-sft"
	FormatOpenAIDPO     Format = "openai-dpo"
	FormatTRLPreference Format = "trl-preference"
	FormatKTO           Format = "kto"
)

// Formats lists every format, the default first.
func Formats() []Format {
	return []Format{FormatRecords, FormatOpenAISFT, FormatOpenAIDPO, FormatTRLPreference, FormatKTO}
}

// Kinds lists every kind of record.
func Kinds() []Kind { return []Kind{KindReply, KindReturnToBot, KindReject, KindResolve} }

// Schema names the version of the desk's own record, format=records.
const Schema = "handoff-desk.eval/1"

// Filter is what an export selects and how it writes it. The zero Filter exports every record in
// the desk's own format.
type Filter struct {
	Format      Format
	Queue       string // a queue's name
	SourceAgent string
	Kind        Kind
	Since       time.Time // at or after; zero: from the first
	Until       time.Time // before; zero: to the last
	Redact      bool      // placeholders for the customer's details, see handoff.RedactFor
	// How the record's package ended (Ended): its status now, a least score on the agents' leg
	// (1–5; 0: any, verdict or not), and whether it was reopened or its customer came back within
	// 7 days (nil: either way). A team trains on the replies that ended well with them.
	Ended        handoff.Status
	CSATMin      int
	Reopened     *bool
	RepeatWithin *bool
}

// FilterParams are the names ParseFilter reads, which the CLI's flags share.
func FilterParams() []string {
	return []string{"format", "queue", "source_agent", "kind", "since", "until", "redact", "ended", "csat_min", "reopened", "repeat_within_7d"}
}

// ParseFilter reads a Filter from query parameters, refusing any it does not know or cannot read
// with a BadRequest that names it, so that a misspelt filter never exports more than was asked.
func ParseFilter(q url.Values) (Filter, error) {
	for name, values := range q {
		if !slices.Contains(FilterParams(), name) {
			return Filter{}, desk.BadParam(name, "unknown parameter %q; the export reads %s", name, strings.Join(FilterParams(), ", "))
		}
		if len(values) > 1 {
			return Filter{}, desk.BadParam(name, "parameter %s is given %d times; give it once", name, len(values))
		}
	}
	f := Filter{Format: FormatRecords, Queue: q.Get("queue"), SourceAgent: q.Get("source_agent"), Kind: Kind(q.Get("kind"))}
	if v := q.Get("format"); v != "" {
		f.Format = Format(v)
		if !slices.Contains(Formats(), f.Format) {
			return Filter{}, desk.BadParam("format", "format %q is not one of %s", v, joinOf(Formats()))
		}
	}
	if f.Kind != "" && !slices.Contains(Kinds(), f.Kind) {
		return Filter{}, desk.BadParam("kind", "kind %q is not one of %s", f.Kind, joinOf(Kinds()))
	}
	if f.Format != FormatRecords && f.Kind != "" && f.Kind != KindReply {
		return Filter{}, desk.BadParam("kind", "format %s exports replies only; kind %q cannot be one", f.Format, f.Kind)
	}
	var err error
	if f.Since, f.Until, err = desk.ParseSpan(q); err != nil {
		return Filter{}, err
	}
	if v := q.Get("redact"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return Filter{}, desk.BadParam("redact", "redact %q is neither true nor false", v)
		}
		f.Redact = b
	}
	if v := q.Get("ended"); v != "" {
		if f.Ended = handoff.Status(v); !slices.Contains(handoff.Statuses(), f.Ended) {
			return Filter{}, desk.BadParam("ended", "ended %q is not one of %s", v, joinOf(handoff.Statuses()))
		}
	}
	if v := q.Get("csat_min"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 5 {
			return Filter{}, desk.BadParam("csat_min", "csat_min %q is not a score from 1 to 5", v)
		}
		f.CSATMin = n
	}
	for name, to := range map[string]**bool{"reopened": &f.Reopened, "repeat_within_7d": &f.RepeatWithin} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Filter{}, desk.BadParam(name, "%s %q is neither true nor false", name, v)
			}
			*to = &b
		}
	}
	return f, nil
}

func joinOf[T ~string](values []T) string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// Querier is what an export reads with: a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Export writes the records f selects, oldest first, one JSON object per line, to w, as role may
// see them: each record's package and texts are redacted with placeholders (handoff.RedactFor)
// when f asks or when the queue's rule hides the customer from role, and shown whole otherwise.
// It returns how many lines it wrote.
//
// Rows stream from one query through a fixed buffer, so memory stays flat however many records
// match. An unknown queue is refused before anything is written; an error after that leaves the
// lines written so far in w.
//
// seen, if not nil, is told of each package whose personal data the lines show role unmasked (its
// row id and the fields, handoff.Visibility.Unmasked), before the lines are written: the caller
// records the reads. A redacted export shows none.
func Export(ctx context.Context, db Querier, role auth.Role, f Filter, w io.Writer, seen func(handoffID int64, fields []string)) (int, error) {
	if f.Format == "" {
		f.Format = FormatRecords
	}
	if f.Queue != "" {
		var exists bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM queues WHERE name = $1)`, f.Queue).Scan(&exists); err != nil {
			return 0, err
		}
		if !exists {
			return 0, desk.BadParam("queue", "queue %q does not exist", f.Queue)
		}
	}
	sql, args := exportQuery(f)
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	// One goroutine reads rows in batches, workers turn each batch into lines, and this one writes
	// the batches in the order they were read: decoding and masking, the export's cost, spread
	// over the cores, while at most a few batches are in memory at once.
	workers := min(runtime.GOMAXPROCS(0), maxWorkers)
	g, gctx := errgroup.WithContext(ctx)
	todo, inOrder := make(chan *batch, workers), make(chan *batch, workers)
	g.Go(func() error {
		defer rows.Close()
		defer close(todo)
		defer close(inOrder)
		for {
			b := &batch{rows: make([]row, 0, batchRows), out: make(chan batchLines, 1)}
			for len(b.rows) < batchRows && rows.Next() {
				b.rows = append(b.rows, row{})
				if err := rows.Scan(b.rows[len(b.rows)-1].dest()...); err != nil {
					return err
				}
			}
			if len(b.rows) == 0 {
				return rows.Err()
			}
			for _, ch := range []chan *batch{todo, inOrder} {
				select {
				case ch <- b:
				case <-gctx.Done():
					return gctx.Err()
				}
			}
		}
	})
	for range workers {
		g.Go(func() error {
			for b := range todo {
				b.out <- render(role, f, b.rows)
			}
			return nil
		})
	}
	lines := 0
	g.Go(func() error {
		bw := bufio.NewWriterSize(w, 64<<10)
		for b := range inOrder {
			var out batchLines
			select {
			case out = <-b.out:
			case <-gctx.Done():
				return gctx.Err()
			}
			if out.err != nil {
				return out.err
			}
			if seen != nil {
				for _, u := range out.unmasked {
					seen(u.id, u.fields)
				}
			}
			if _, err := bw.Write(out.text); err != nil {
				return err
			}
			lines += out.lines
		}
		return bw.Flush()
	})
	err = g.Wait()
	return lines, err
}

// maxWorkers bounds the goroutines rendering lines; batchRows is how many rows they take at a time,
// enough to make the hand-overs cheap and few enough to keep memory small.
const (
	maxWorkers = 4
	batchRows  = 128
)

// batch is rows read in one go, and the channel their lines come back on.
type batch struct {
	rows []row
	out  chan batchLines
}

type batchLines struct {
	text     []byte
	lines    int
	unmasked []unmasked
	err      error
}

// unmasked is a package whose personal data lines show unmasked.
type unmasked struct {
	id     int64
	fields []string
}

// render writes rs as lines, masked for role, in f's format.
func render(role auth.Role, f Filter, rs []row) batchLines {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Placeholders such as <EMAIL_1> stay readable, and greppable, in the lines.
	enc.SetEscapeHTML(false)
	x := exporter{role: role, f: f, enc: enc}
	for i := range rs {
		if err := x.write(&rs[i]); err != nil {
			return batchLines{err: err}
		}
	}
	return batchLines{text: buf.Bytes(), lines: x.lines, unmasked: x.unmasked}
}

// exportQuery selects the records f asks for, in the order of evals_at_idx, so the rows stream
// from the index without a sort.
func exportQuery(f Filter) (string, []any) {
	var where []string
	var args []any
	cond := func(sql string, arg any) {
		args = append(args, arg)
		where = append(where, fmt.Sprintf(sql, len(args)))
	}
	if f.Queue != "" {
		cond("q.name = $%d", f.Queue)
	}
	if f.SourceAgent != "" {
		cond("e.source_agent = $%d", f.SourceAgent)
	}
	if !f.Since.IsZero() {
		cond("e.at >= $%d", f.Since)
	}
	if !f.Until.IsZero() {
		cond("e.at < $%d", f.Until)
	}
	if f.Ended != "" {
		cond("h.status = $%d", string(f.Ended))
	}
	if f.CSATMin > 0 {
		cond("csat_human.score >= $%d", f.CSATMin)
	}
	if f.Reopened != nil {
		cond(reopenedSQL+" = $%d", *f.Reopened)
	}
	if f.RepeatWithin != nil {
		cond(repeatWithinSQL+" = $%d", *f.RepeatWithin)
	}
	switch {
	case f.Format == FormatOpenAIDPO || f.Format == FormatTRLPreference:
		// A preference needs two different answers to the same prompt.
		where = append(where, "e.kind = 'reply'", "e.draft <> ''", "NOT e.accepted_as_is")
	case f.Format != FormatRecords:
		where = append(where, "e.kind = 'reply'")
	case f.Kind != "":
		cond("e.kind = $%d", string(f.Kind))
	}
	sql := `
		SELECT h.id, e.kind, h.handoff_id, e.source_agent, e.source_run_id, q.name, e.trigger, coalesce(e.locale, ''), e.at,
			e.draft, e.final, e.word_diff, e.unified_diff, e.edit_distance_chars, e.edit_distance_words, e.accepted_as_is,
			e.tags, e.editing_ms, e.code, e.note, e.escalation_needed, e.refund, q.pii_min_role, q.pii_entity_keys, q.withhold_transcript, h.package,
			e.in_reply_to, e.thread, e.hand_back, h.status, ` + reopenedSQL + `, ` + repeatWithinSQL + `,
			csat_human.score, csat_human.comment, csat_bot.score, csat_bot.comment, e.saved_reply_id, sr.title
		FROM evals e JOIN handoffs h ON h.id = e.handoff_id JOIN queues q ON q.id = e.queue_id
			LEFT JOIN csat csat_human ON csat_human.handoff_id = h.id AND csat_human.leg = 'human'
			LEFT JOIN csat csat_bot ON csat_bot.handoff_id = h.id AND csat_bot.leg = 'bot'
			LEFT JOIN saved_replies sr ON sr.id = e.saved_reply_id`
	if len(where) > 0 {
		sql += "\n\t\tWHERE " + strings.Join(where, " AND ")
	}
	return sql + "\n\t\tORDER BY e.at, e.id", args
}

// row is one record as the export reads it.
type row struct {
	rowID                                               int64
	kind                                                Kind
	handoffID, sourceAgent, sourceRunID, queue, trigger string
	locale                                              string
	at                                                  time.Time
	draft, final, unified                               *string
	words                                               []byte
	charDistance, wordDistance, editingMS               *int
	acceptedAsIs, escalationNeeded                      *bool
	tags                                                []string
	code, note                                          *string
	refund                                              *handoff.RefundOutcome
	piiMinRole                                          string
	piiKeys                                             []string
	withholdTranscript                                  bool
	pkg                                                 []byte
	inReplyTo                                           *int
	thread                                              []ThreadMessage
	handBack                                            *handoff.HandBack
	status                                              handoff.Status
	reopened, repeatWithin                              bool
	humanScore, botScore                                *int
	humanComment, botComment                            *string
	savedReplyID                                        *int64
	savedReplyTitle                                     *string
}

func (r *row) dest() []any {
	return []any{&r.rowID, &r.kind, &r.handoffID, &r.sourceAgent, &r.sourceRunID, &r.queue, &r.trigger, &r.locale, &r.at,
		&r.draft, &r.final, &r.words, &r.unified, &r.charDistance, &r.wordDistance, &r.acceptedAsIs,
		&r.tags, &r.editingMS, &r.code, &r.note, &r.escalationNeeded, &r.refund, &r.piiMinRole, &r.piiKeys, &r.withholdTranscript, &r.pkg,
		&r.inReplyTo, &r.thread, &r.handBack, &r.status, &r.reopened, &r.repeatWithin, &r.humanScore, &r.humanComment, &r.botScore, &r.botComment,
		&r.savedReplyID, &r.savedReplyTitle}
}

type exporter struct {
	role     auth.Role
	f        Filter
	enc      *json.Encoder
	lines    int
	unmasked []unmasked
}

func (x *exporter) encode(v any) error {
	x.lines++
	return x.enc.Encode(v)
}

// shown is a record's package and its texts as the exporter may see them, and the thread before
// the reply, which is the customer's words as the transcript is: redacted with it, and withheld
// with it.
type shown struct {
	pkg    handoff.Package
	text   func(string) string
	thread []ThreadMessage
	// hidden are the entity keys whose values the exporter may not see.
	hidden []string
}

func (x *exporter) show(r *row) (shown, error) {
	p, err := x.decode(r.pkg)
	if err != nil {
		return shown{}, fmt.Errorf("evals: the package of %s: %w", r.handoffID, err)
	}
	v := handoff.VisibilityFor(x.role, handoff.PIIRule{MinRole: r.piiMinRole, EntityKeys: r.piiKeys, WithholdTranscript: r.withholdTranscript})
	// Below the queue's PII role an export is redacted, not masked: a mask's bullets and initials
	// are no text a customer should get, and a model trained on them would learn to write them.
	if x.f.Redact || !v.PII {
		masked, red := p.RedactFor(v)
		var thread []ThreadMessage
		if !v.WithholdTranscript && len(r.thread) > 0 {
			thread = make([]ThreadMessage, len(r.thread))
			for i, m := range r.thread {
				m.Text = red.Text(m.Text)
				thread[i] = m
			}
		}
		return shown{masked, red.Text, thread, r.piiKeys}, nil
	}
	fields := v.Unmasked(p)
	if len(r.thread) > 0 && !slices.Contains(fields, handoff.FieldTranscript) {
		fields = append(fields, handoff.FieldTranscript)
	}
	if len(fields) > 0 {
		x.unmasked = append(x.unmasked, unmasked{r.rowID, fields})
	}
	return shown{p, func(text string) string { return text }, r.thread, nil}, nil
}

// decode reads a stored package with encoding/json/v2, which takes a third of the time v1 does,
// the largest cost of an export. The desk's own records mask replies and notes alone, which needs
// the contact and the entities: the rest of the package is skipped rather than built.
func (x *exporter) decode(raw []byte) (handoff.Package, error) {
	var p handoff.Package
	if x.f.Format != FormatRecords {
		return p, jsonv2.Unmarshal(raw, &p)
	}
	var parts struct {
		Contact            handoff.Contact                `json:"contact"`
		StructuredEntities map[string]handoff.EntityValue `json:"structured_entities"`
	}
	err := jsonv2.Unmarshal(raw, &parts)
	p.Contact, p.StructuredEntities = parts.Contact, parts.StructuredEntities
	return p, err
}

func (x *exporter) write(r *row) error {
	s, err := x.show(r)
	if err != nil {
		return err
	}
	if x.f.Format == FormatRecords {
		return x.encode(x.record(r, s))
	}
	draft, final := s.text(deref(r.draft)), s.text(deref(r.final))
	prompt := promptOf(s.pkg, s.thread, r.queue, r.sourceAgent)
	answer := func(text string) []Message { return []Message{{Role: "assistant", Content: text}} }
	switch x.f.Format {
	case FormatOpenAISFT:
		return x.encode(sftLine{Messages: append(prompt, answer(final)...)})
	case FormatOpenAIDPO:
		return x.encode(dpoLine{Input: dpoInput{Messages: prompt}, Preferred: answer(final), NonPreferred: answer(draft)})
	case FormatTRLPreference:
		return x.encode(preferenceLine{Prompt: prompt, Chosen: answer(final), Rejected: answer(draft)})
	case FormatKTO:
		if draft != "" && !*r.acceptedAsIs {
			if err := x.encode(ktoLine{Prompt: prompt, Completion: answer(draft), Label: false}); err != nil {
				return err
			}
		}
		return x.encode(ktoLine{Prompt: prompt, Completion: answer(final), Label: true})
	}
	return fmt.Errorf("evals: no writer for format %q", x.f.Format)
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// Record is a line of format=records: the desk's own record, documented field by field in
// docs/evals.md. Reply fields are present on replies only, outcome fields on outcomes only.
type Record struct {
	Schema      string    `json:"schema"`
	Kind        Kind      `json:"kind"`
	HandoffID   string    `json:"handoff_id"`
	SourceAgent string    `json:"source_agent"`
	SourceRunID string    `json:"source_run_id"`
	Queue       string    `json:"queue"`
	Trigger     string    `json:"trigger"`
	Locale      string    `json:"locale,omitempty"`
	At          time.Time `json:"at"`

	Draft             *string   `json:"draft,omitempty"`
	Final             *string   `json:"final,omitempty"`
	Diff              *string   `json:"diff,omitempty"`
	WordDiff          []Segment `json:"word_diff,omitempty"`
	EditDistanceChars *int      `json:"edit_distance_chars,omitempty"`
	EditDistanceWords *int      `json:"edit_distance_words,omitempty"`
	AcceptedAsIs      *bool     `json:"accepted_as_is,omitempty"`
	Tags              []string  `json:"tags,omitzero"`
	EditingMS         *int      `json:"editing_ms,omitempty"`

	Code             string `json:"code,omitempty"`
	Note             string `json:"note,omitempty"`
	EscalationNeeded *bool  `json:"escalation_needed,omitempty"`
	// Refund is, on a resolution as refunded, what was paid back against what was asked.
	Refund *handoff.RefundOutcome `json:"refund,omitempty"`

	// InReplyTo is, on a reply, the seq of the customer message it answered in the package's
	// thread (none: it answered the package), and Thread the thread up to that message, the
	// conversation after the package's transcript that the reply followed.
	InReplyTo *int            `json:"in_reply_to,omitempty"`
	Thread    []ThreadMessage `json:"thread,omitempty"`
	// SavedReply is, on a reply the agent started from a saved reply, which: the draft is its text.
	SavedReply *SavedReply `json:"saved_reply,omitempty"`
	// HandBack is, on a return or a resolve, what the agent handed the conversation back with.
	HandBack *handoff.HandBack `json:"hand_back,omitempty"`

	// Ended is how the record's package has ended so far, on every record of it.
	Ended Ended `json:"ended"`
}

// SavedReply names the saved reply of the queue a reply started from: its id, and its title in the
// admin console (kept when the saved reply is removed).
type SavedReply struct {
	ID    int64  `json:"id"`
	Title string `json:"title"`
}

// Ended is how a package ended, as the export reads it now: its status, whether a customer
// message reopened it after a resolve, whether its customer handed off again within 7 days of its
// close, and the customer's verdict on each leg.
type Ended struct {
	Status       handoff.Status `json:"status"`
	Reopened     bool           `json:"reopened"`
	RepeatWithin bool           `json:"repeat_within_7d"`
	CSATHuman    *Verdict       `json:"csat_human,omitempty"`
	CSATBot      *Verdict       `json:"csat_bot,omitempty"`
}

// Verdict is the customer's score of a leg, 1 to 5, and their comment.
type Verdict struct {
	Score   int    `json:"score"`
	Comment string `json:"comment,omitempty"`
}

// reopenedSQL holds when a customer message reopened the package h; repeatWithinSQL when its
// customer handed off again within 7 days of its close (the dashboard's repeat contact, seen
// from the package before).
const (
	reopenedSQL     = `EXISTS (SELECT 1 FROM events v WHERE v.handoff_id = h.id AND v.kind = 'reopened')`
	repeatWithinSQL = `(h.closed_at IS NOT NULL AND EXISTS (SELECT 1 FROM handoffs l WHERE l.contact_id = h.contact_id
		AND l.created_at > h.closed_at AND l.created_at <= h.closed_at + interval '7 days'))`
)

// verdictOf is a leg's verdict as the exporter may show its comment.
func verdictOf(score *int, comment *string, text func(string) string) *Verdict {
	if score == nil {
		return nil
	}
	return &Verdict{Score: *score, Comment: text(deref(comment))}
}

// handBackShown is a hand-back with its texts as the exporter may show them: a corrected value of
// an entity it may not see is masked whole, since it is no text of the package's to mask in.
func handBackShown(b *handoff.HandBack, s shown) *handoff.HandBack {
	if b == nil {
		return nil
	}
	out := *b
	out.Done, out.Instruction = s.text(b.Done), s.text(b.Instruction)
	if b.Corrected != nil {
		out.Corrected = map[string]string{}
		for k, v := range b.Corrected {
			out.Corrected[k] = s.text(v)
			if slices.Contains(s.hidden, k) {
				out.Corrected[k] = handoff.Masked
			}
		}
	}
	if b.LastReply != nil {
		out.LastReply = &handoff.LastReply{Seq: b.LastReply.Seq, Text: s.text(b.LastReply.Text)}
	}
	return &out
}

func (x *exporter) record(r *row, s shown) Record {
	rec := Record{Schema: Schema, Kind: r.kind, HandoffID: r.handoffID, SourceAgent: r.sourceAgent, SourceRunID: r.sourceRunID,
		Queue: r.queue, Trigger: r.trigger, Locale: r.locale, At: r.at.UTC(),
		Code: deref(r.code), Note: s.text(deref(r.note)), EscalationNeeded: r.escalationNeeded, Refund: r.refund,
		HandBack: handBackShown(r.handBack, s),
		Ended: Ended{Status: r.status, Reopened: r.reopened, RepeatWithin: r.repeatWithin,
			CSATHuman: verdictOf(r.humanScore, r.humanComment, s.text), CSATBot: verdictOf(r.botScore, r.botComment, s.text)}}
	if r.kind != KindReply {
		return rec
	}
	draft, final, diff := s.text(*r.draft), s.text(*r.final), s.text(*r.unified)
	rec.Draft, rec.Final, rec.Diff = &draft, &final, &diff
	rec.WordDiff = wordDiffShown(r.words, draft, final, s.text)
	rec.EditDistanceChars, rec.EditDistanceWords, rec.AcceptedAsIs, rec.EditingMS = r.charDistance, r.wordDistance, r.acceptedAsIs, r.editingMS
	rec.Tags = slices.Clone(r.tags)
	if rec.Tags == nil {
		rec.Tags = []string{}
	}
	rec.InReplyTo, rec.Thread = r.inReplyTo, s.thread
	if r.savedReplyID != nil {
		rec.SavedReply = &SavedReply{ID: *r.savedReplyID, Title: deref(r.savedReplyTitle)}
	}
	return rec
}

// wordDiffShown masks a stored word diff segment by segment. A mention that spans segments (a
// phone number written with spaces, half of it edited) escapes that; then the segments no longer
// give back the masked draft and final, and the diff is made again from them.
func wordDiffShown(stored []byte, draft, final string, text func(string) string) []Segment {
	var segs []Segment
	if err := jsonv2.Unmarshal(stored, &segs); err == nil {
		var before, after strings.Builder
		for i := range segs {
			segs[i].Text = text(segs[i].Text)
			if segs[i].Op != Insert {
				before.WriteString(segs[i].Text)
			}
			if segs[i].Op != Delete {
				after.WriteString(segs[i].Text)
			}
		}
		if before.String() == draft && after.String() == final {
			return segs
		}
	}
	return Compare(draft, final).Words
}

// Message is a chat message as OpenAI's and TRL's conversational formats write it.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type sftLine struct {
	Messages []Message `json:"messages"`
}

type dpoInput struct {
	Messages []Message `json:"messages"`
}

type dpoLine struct {
	Input        dpoInput  `json:"input"`
	Preferred    []Message `json:"preferred_output"`
	NonPreferred []Message `json:"non_preferred_output"`
}

type preferenceLine struct {
	Prompt   []Message `json:"prompt"`
	Chosen   []Message `json:"chosen"`
	Rejected []Message `json:"rejected"`
}

type ktoLine struct {
	Prompt     []Message `json:"prompt"`
	Completion []Message `json:"completion"`
	Label      bool      `json:"label"`
}

// PromptTurns is how many of the conversation's last turns a prompt carries: the recent
// exchange the reply answers, not the whole of a 200-turn chat.
const PromptTurns = 10

// promptOf is what the agent answered, as the trainers read a chat (see docs/evals.md): a system
// message, then turns that alternate between the customer (user) and the bot or the agents
// (assistant), the first and the last the customer's. The turns are the transcript's, then the
// thread's up to the customer message the reply answered, so a package of five turns gives five
// prompts, each ending on its own customer message. The system message names the queue and the
// bot and, when there is a conversation, carries the package (problem, entities, what the bot
// tried, next step) and the bot's last words to the customer, which the agent's reply follows.
// With no conversation (none sent, or withheld from the exporter) the package itself is the user
// turn. No draft is ever part of a prompt: a draft is the answer a pair compares, not the chat.
//
// The rules come from the readers: OpenAI's fine-tuning data checker (a string content in every
// message, known roles and keys), TRL's apply_chat_template (a prompt's last message is the
// user's, or TRL takes the reply for a continuation of the bot's), and the chat templates that
// refuse two turns of one role in a row.
func promptOf(p handoff.Package, thread []ThreadMessage, queue, sourceAgent string) []Message {
	framing := fmt.Sprintf("You are a support agent on the %s queue. The bot %s handed this conversation over to you.", queue, sourceAgent)
	turns, botLast := turnsOf(p.Transcript, thread)
	if len(turns) == 0 {
		return []Message{{Role: "system", Content: framing}, {Role: "user", Content: packageText(p)}}
	}
	sys := framing + "\n" + packageText(p)
	if botLast != "" {
		sys += "\nThe bot's last words to the customer: " + botLast
	}
	return append([]Message{{Role: "system", Content: sys}}, turns...)
}

// turnsOf is the conversation's turns between the customer and the bot or agents, the
// transcript's then the thread's, consecutive turns of one role merged into one, the last
// PromptTurns of them, starting and ending on the customer's; and what the bot said after the
// customer's last turn, its hand-over, which the agent's reply replaces. Tool and system turns
// are left out: raw tool output is no turn of the conversation, and OpenAI's format would want
// its tool call too. An agent's reply in the thread is the assistant's turn, as the reply being
// learnt is.
func turnsOf(transcript []handoff.Turn, thread []ThreadMessage) (turns []Message, botLast string) {
	add := func(role, content string) {
		if strings.TrimSpace(content) == "" {
			return
		}
		if n := len(turns); n > 0 && turns[n-1].Role == role {
			turns[n-1].Content += "\n\n" + content
			return
		}
		turns = append(turns, Message{Role: role, Content: content})
	}
	for _, t := range transcript {
		if t.Role == handoff.RoleUser || t.Role == handoff.RoleAssistant {
			add(string(t.Role), t.Content)
		}
	}
	for _, m := range thread {
		role := "assistant"
		if m.Role == conversation.User {
			role = "user"
		}
		add(role, m.Text)
	}
	if n := len(turns); n > 0 && turns[n-1].Role == "assistant" {
		botLast, turns = turns[n-1].Content, turns[:n-1]
	}
	turns = turns[max(0, len(turns)-PromptTurns):]
	if len(turns) > 0 && turns[0].Role == "assistant" {
		turns = turns[1:]
	}
	return turns, botLast
}

// packageText is the package as the agent read it: what the bot handed over.
func packageText(p handoff.Package) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Problem: %s", p.ProblemStatement)
	if len(p.StructuredEntities) > 0 {
		keys := make([]string, 0, len(p.StructuredEntities))
		for k := range p.StructuredEntities {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString("\nEntities:")
		for i, k := range keys {
			sep := " "
			if i > 0 {
				sep = "; "
			}
			fmt.Fprintf(&b, "%s%s: %s", sep, k, entityText(p.StructuredEntities[k]))
		}
	}
	if len(p.AttemptedActions) > 0 {
		b.WriteString("\nWhat the bot tried:")
		for i, a := range p.AttemptedActions {
			sep := " "
			if i > 0 {
				sep = "; "
			}
			outcome := ""
			if a.OK != nil {
				outcome = map[bool]string{true: " (ok)", false: " (failed)"}[*a.OK]
			}
			fmt.Fprintf(&b, "%s%s: %s%s", sep, a.Tool, a.Result, outcome)
		}
	}
	if p.RecommendedNextStep != "" {
		fmt.Fprintf(&b, "\nRecommended next step: %s", p.RecommendedNextStep)
	}
	return b.String()
}

func entityText(v handoff.EntityValue) string {
	switch v.Kind() {
	case handoff.EntityList:
		return strings.Join(v.List(), ", ")
	case handoff.EntityBool:
		return strconv.FormatBool(v.Bool())
	case handoff.EntityNumber:
		return string(v.Number())
	case handoff.EntityString:
		return v.Text()
	}
	return ""
}
