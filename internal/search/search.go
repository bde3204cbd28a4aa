// Package search finds packages for the desk's /packages page and its CSV export: by filters
// (queue, status, trigger, bot, outcome, repeat contact, SLA, time of arrival) and by a search box
// that matches a package's id, its contact's id, name, email or phone, and the words of its
// problem statement, next step, entities and notes.
//
// What it reads is package_search (migrations/00030), one row per package kept by a trigger at
// intake, and the notes' word index (00031); it writes nothing.
//
// Search must not become an oracle: a viewer finds a package only by what they may see of it. An
// agent searches only the queues they work. The contact's name, email and phone are matched only
// for viewers whose role sees the package's queue's PII; for the others, a package found by its
// words is kept only if the words are still there once the package and its notes are masked for
// them (handoff.MaskFor), since free text and PII entities can name the customer.
package search

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/csat"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/handoff"
)

// Filter is what a search asks for. The zero Filter is every package the viewer may see.
type Filter struct {
	Q           string // the search box
	Queue       string
	Status      handoff.Status
	Trigger     handoff.Trigger
	SourceAgent string
	// Outcome is a resolution code or a return-to-bot reason (the packages' one outcome column).
	Outcome     string
	Repeat      *bool // a repeat contact as the dashboard counts one
	SLABreached *bool // waited past its queue's SLA before an agent accepted it, or for an answer (slaBreachedSQL)
	// CSAT is a leg the customer gave their verdict on (internal/csat): human or bot.
	CSAT string
	// Since and Until bound the package's arrival (created_at), as the dashboard's windows do.
	Since time.Time
	Until time.Time
	// Agent is the email of the desk user who holds the package, or held it last (its assignee).
	Agent string
	// Accepted: an accept stands (accepted_at is set; a rejection or a transfer undoes it).
	// Rejected: an agent rejected it at least once. Open: it is not closed yet.
	Accepted, Rejected, Open *bool
	// Record selects the packages on which something was done, as the desk recorded it: a reply or
	// an outcome (the eval records) or a refund approval's decision. RecordBy (an email), Tag and
	// RecordSince/RecordUntil (when it was done) narrow the same record. Any of them alone means
	// RecordAny.
	Record                   Record
	RecordBy, Tag            string
	RecordSince, RecordUntil time.Time
}

// Record is a kind of thing done to a package that /packages can select by.
type Record string

const (
	RecordAny     Record = "any"     // any eval record: a reply, a return to the bot, a rejection, a resolution
	RecordReply   Record = "reply"   // a reply sent to the customer
	RecordDraft   Record = "draft"   // a reply to a package that carried the bot's draft
	RecordAsIs    Record = "as_is"   // a reply that was the bot's draft unchanged
	RecordEdited  Record = "edited"  // a reply to a draft that changed it
	RecordScratch Record = "scratch" // a reply to a package without a draft
	RecordReturn  Record = "return_to_bot"
	RecordReject  Record = "reject"
	RecordResolve Record = "resolve"
	// RecordDecision is a refund approval granted or denied; RecordBy is then who decided it.
	RecordDecision Record = "decision"
)

// Records are the values of the record filter.
func Records() []Record {
	return []Record{RecordAny, RecordReply, RecordDraft, RecordAsIs, RecordEdited, RecordScratch, RecordReturn, RecordReject,
		RecordResolve, RecordDecision}
}

// replies reports whether r selects replies, which a tag narrows.
func (r Record) replies() bool {
	return r == RecordReply || r == RecordDraft || r == RecordAsIs || r == RecordEdited || r == RecordScratch
}

// Noun is what n of the records r selects are called: "1 reply", "3 decisions".
func (r Record) Noun(n int) string {
	one, many := "record", "records"
	switch {
	case r.replies():
		one, many = "reply", "replies"
	case r == RecordReturn:
		one, many = "return to the bot", "returns to the bot"
	case r == RecordReject:
		one, many = "rejection", "rejections"
	case r == RecordResolve:
		one, many = "resolution", "resolutions"
	case r == RecordDecision:
		one, many = "decision", "decisions"
	}
	if n == 1 {
		return one
	}
	return many
}

// Params are the query parameters ParseFilter reads.
func Params() []string {
	return []string{"q", "queue", "status", "trigger", "source_agent", "outcome", "repeat", "sla_breached", "since", "until",
		"agent", "accepted", "rejected", "open", "record", "record_by", "tag", "record_since", "record_until", "csat"}
}

// MaxQuery bounds the search box: a longer text is no search a person types.
const MaxQuery = 200

// MaxWords bounds the words of the search box: each is one more index lookup and one more
// condition per package, and past a few they narrow nothing a person means.
const MaxWords = 10

// ParseFilter reads a Filter from query parameters. A parameter it does not know (besides those in
// also, which the caller reads), one given twice or one it cannot read is a BadRequest naming it:
// a misspelt filter must never list or export more than was asked.
func ParseFilter(q url.Values, also ...string) (Filter, error) {
	for name, values := range q {
		if slices.Contains(also, name) {
			continue
		}
		if !slices.Contains(Params(), name) {
			return Filter{}, desk.BadParam(name, "unknown parameter %q; search reads %s", name, strings.Join(Params(), ", "))
		}
		if len(values) > 1 {
			return Filter{}, desk.BadParam(name, "parameter %s is given %d times; give it once", name, len(values))
		}
	}
	f := Filter{Q: strings.TrimSpace(q.Get("q")), Queue: q.Get("queue"), Status: handoff.Status(q.Get("status")),
		Trigger: handoff.Trigger(q.Get("trigger")), SourceAgent: q.Get("source_agent"), Outcome: q.Get("outcome"),
		Agent: strings.TrimSpace(q.Get("agent")), Record: Record(q.Get("record")), RecordBy: strings.TrimSpace(q.Get("record_by")),
		Tag: q.Get("tag"), CSAT: q.Get("csat")}
	if n := utf8.RuneCountInString(f.Q); n > MaxQuery {
		return Filter{}, desk.BadParam("q", "the search is %d characters; at most %d are read", n, MaxQuery)
	}
	if n := len(Words(f.Q)); n > MaxWords {
		return Filter{}, desk.BadParam("q", "the search has %d words; at most %d are read: keep the ones that tell the package apart", n, MaxWords)
	}
	if f.Status != "" && !slices.Contains(handoff.Statuses(), f.Status) {
		return Filter{}, desk.BadParam("status", "status %q is not one of %s", f.Status, joined(handoff.Statuses()))
	}
	if f.Trigger != "" && !slices.Contains(handoff.Triggers(), f.Trigger) {
		return Filter{}, desk.BadParam("trigger", "trigger %q is not one of %s", f.Trigger, joined(handoff.Triggers()))
	}
	if outcomes := Outcomes(); f.Outcome != "" && !slices.Contains(outcomes, f.Outcome) {
		return Filter{}, desk.BadParam("outcome", "outcome %q is not one of %s", f.Outcome, strings.Join(outcomes, ", "))
	}
	if legs := (csat.Leg("")).AllowedValues(); f.CSAT != "" && !slices.Contains(legs, f.CSAT) {
		return Filter{}, desk.BadParam("csat", "csat %q is not one of %s", f.CSAT, strings.Join(legs, ", "))
	}
	if f.Record != "" && !slices.Contains(Records(), f.Record) {
		return Filter{}, desk.BadParam("record", "record %q is not one of %s", f.Record, joined(Records()))
	}
	if f.Tag != "" && !slices.Contains(evals.Tags(), f.Tag) {
		return Filter{}, desk.BadParam("tag", "tag %q is not one of %s", f.Tag, strings.Join(evals.Tags(), ", "))
	}
	for _, p := range []struct {
		name string
		to   **bool
	}{{"repeat", &f.Repeat}, {"sla_breached", &f.SLABreached}, {"accepted", &f.Accepted}, {"rejected", &f.Rejected}, {"open", &f.Open}} {
		if v := q.Get(p.name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return Filter{}, desk.BadParam(p.name, "%s %q is neither true nor false", p.name, v)
			}
			*p.to = &b
		}
	}
	var err error
	if f.Since, f.Until, err = desk.ParseSpan(q); err != nil {
		return Filter{}, err
	}
	if f.RecordSince, f.RecordUntil, err = desk.ParseSpanOf(q, "record_since", "record_until"); err != nil {
		return Filter{}, err
	}
	if f.Record == "" && (f.RecordBy != "" || !f.RecordSince.IsZero() || !f.RecordUntil.IsZero()) {
		f.Record = RecordAny
	}
	if f.Tag != "" {
		if f.Record == "" {
			f.Record = RecordReply
		}
		if !f.Record.replies() {
			return Filter{}, desk.BadParam("tag", "a tag is given to replies; record %s is no reply", f.Record)
		}
	}
	return f, nil
}

// Outcomes are the values of the outcome filter: every resolution code and return reason, and
// the outcomes the desk itself gives (expired, canceled).
func Outcomes() []string {
	return slices.Concat(handoff.ResolutionCodes(), handoff.ReturnReasons(), []string{"expired", "canceled"})
}

func joined[T ~string](values []T) string {
	s := make([]string, len(values))
	for i, v := range values {
		s[i] = string(v)
	}
	return strings.Join(s, ", ")
}

// Query is f as query parameters, for the next page's link and the export's.
func (f Filter) Query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"q": f.Q, "queue": f.Queue, "status": string(f.Status), "trigger": string(f.Trigger),
		"source_agent": f.SourceAgent, "outcome": f.Outcome, "agent": f.Agent, "record": string(f.Record), "record_by": f.RecordBy,
		"tag": f.Tag, "csat": f.CSAT} {
		if v != "" {
			q.Set(k, v)
		}
	}
	for k, v := range map[string]*bool{"repeat": f.Repeat, "sla_breached": f.SLABreached, "accepted": f.Accepted, "rejected": f.Rejected,
		"open": f.Open} {
		if v != nil {
			q.Set(k, strconv.FormatBool(*v))
		}
	}
	for k, t := range map[string]time.Time{"since": f.Since, "until": f.Until, "record_since": f.RecordSince, "record_until": f.RecordUntil} {
		if !t.IsZero() {
			q.Set(k, t.Format(time.RFC3339Nano))
		}
	}
	return q
}

// ParseCursor reads the "after" parameter: the row id of the last package of the page before.
// Keyset paging, newest first: no OFFSET, the same cost for page 1 and page 500.
func ParseCursor(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, desk.BadParam("after", "after %q is not a cursor this desk made", s)
	}
	return id, nil
}

// Result is one package found, as its viewer may see it: the contact and the problem statement
// are masked by its queue's rule for the viewer's role.
type Result struct {
	ID               int64
	PublicID         string
	Queue            string
	Status           handoff.Status
	Trigger          string
	SourceAgent      string
	Outcome          string
	Repeat           bool
	SLABreached      bool
	CreatedAt        time.Time
	Assignee         string
	Contact          string // the display name, masked for the viewer
	ProblemStatement string
	// Unmasked are the personal fields the result shows the viewer unmasked, for the record of
	// PII reads.
	Unmasked []string
}

// Searcher runs searches over a pool.
type Searcher struct {
	db *pgxpool.Pool
	// trigram says whether migration 00030 could build the trigram indexes (pg_trgm was there):
	// without them a substring match would read every package, so it is not tried. Read once.
	mu      sync.Mutex
	checked bool
	trigram bool
}

// New returns a Searcher over db.
func New(db *pgxpool.Pool) *Searcher { return &Searcher{db: db} }

// Substrings reports whether search matches any part of an id, a name, an email or a phone (with
// pg_trgm), or only whole words and their beginnings (without).
func (s *Searcher) Substrings(ctx context.Context) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.checked {
		if err := s.db.QueryRow(ctx, `SELECT to_regclass('package_search_contact_trgm_idx') IS NOT NULL`).Scan(&s.trigram); err != nil {
			return false, err
		}
		s.checked = true
	}
	return s.trigram, nil
}

// PageSize is how many packages a page lists.
const PageSize = 50

// slaBreachedSQL is the SLA filter's rule, over handoffs h and queues q at time @now: the package
// waited longer than its queue's SLA from arrival to its accept, or, never accepted, to its close
// or until now; or its customer waited longer than it for an answer, until the close or now
// (conversation.WaitedPastSQL), the two clocks My work counts down. The dashboard's queue table
// shows the same SLA against the oldest wait.
func slaBreachedSQL() string {
	return `(coalesce(h.accepted_at, h.closed_at, @now) - h.created_at > q.sla OR ` +
		conversation.WaitedPastSQL("h.id", "coalesce(h.closed_at, @now)", "q.sla") + `)`
}

// Page returns up to limit packages the filter selects that user may find, newest first, after
// the row id after (0: from the newest), and the cursor of the next page (0 at the end).
//
// A search box holding exactly the id of a package, or of a contact, the viewer may find is a
// look-up: it lists those packages alone, not the others whose words begin the same way.
func (s *Searcher) Page(ctx context.Context, user auth.User, f Filter, after int64, limit int) ([]Result, int64, error) {
	st, err := s.prepare(ctx, user, f, true)
	if err != nil {
		return nil, 0, err
	}
	if f.Q != "" {
		exact, err := st.rows(ctx, s.db, 0, 1)
		if err != nil {
			return nil, 0, err
		}
		if len(exact) == 0 {
			if st, err = s.prepare(ctx, user, f, false); err != nil {
				return nil, 0, err
			}
		}
	}
	// The rows are read a page's worth at a time, and checked, until a row past the page is kept
	// or none is left: the page's cursor is its last row shown, and a next page is offered only
	// when a row after it will be shown. Reading stops at nothing the viewer cannot see, so that
	// neither the link nor the cursor says that hidden rows matched (the time they take to read
	// still does; the reads pool's statement timeout bounds it).
	// Past the first batch, each is twice the last (up to maxBatch): many hidden rows cost a few
	// round trips, not one per page's worth.
	const maxBatch = 1000
	var out []Result
	for cursor, n := after, limit+1; len(out) <= limit; n = min(2*n, max(maxBatch, limit+1)) {
		rows, err := st.batch(ctx, s.db, cursor, n)
		if err != nil {
			return nil, 0, err
		}
		if len(rows) == 0 {
			break
		}
		kept, err := st.check(ctx, s.db, rows)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, kept...)
		if len(rows) < n {
			break
		}
		cursor = rows[len(rows)-1].ID
	}
	if len(out) > limit {
		return out[:limit], out[limit-1].ID, nil
	}
	return out, 0, nil
}

// batch reads the next n rows after the cursor, before the masked check: the walk's when it finds
// them all among the newest packages after the cursor, the indexes' otherwise. Fewer than n means
// none is left.
func (st *statement) batch(ctx context.Context, db *pgxpool.Pool, after int64, n int) ([]found, error) {
	if st.walkSQL != "" {
		rows, err := st.read(ctx, db, st.walkSQL, after, n)
		if err != nil || len(rows) == n {
			return rows, err
		}
	}
	return st.rows(ctx, db, after, n)
}

// EachAfter calls fn with every package the filter selects that user may find after the row id
// after (0: from the newest), newest first, reading page by page so that memory stays flat however
// many match.
func (s *Searcher) EachAfter(ctx context.Context, user auth.User, f Filter, after int64, fn func(Result) error) error {
	const exportPage = 500
	for {
		rows, next, err := s.Page(ctx, user, f, after, exportPage)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := fn(r); err != nil {
				return err
			}
		}
		if next == 0 {
			return nil
		}
		after = next
	}
}

// statement is one search, built once and read in batches.
type statement struct {
	sql   string
	args  pgx.NamedArgs
	words []string // the search box split by search_words' rule, lower-case
	q     string   // the search box, lower-case
	role  auth.Role
	user  int64 // the viewer's id
	// walkSQL reads the newest walkBudget packages after the cursor and matches each in turn;
	// "" when the search box is empty or an exact id.
	walkSQL string
	// seesContacts: some queue in the search's scope shows the viewer its contacts; masksSome:
	// some queue masks them for the viewer, whose matches are then checked again.
	seesContacts, masksSome bool
	// where are the filters' conditions over h and q; record is the FROM and WHERE of the records
	// the record filter selects ("" without one), for Count.
	where  []string
	record string
}

// prepare builds the statement for user's search, refusing a queue filter naming a queue they
// may not search.
// With exact, the search box matches ids only, whole.
func (s *Searcher) prepare(ctx context.Context, user auth.User, f Filter, exact bool) (*statement, error) {
	supervisor := user.Role.AtLeast(auth.RoleSupervisor)
	var seeing []string // the queues' PII roles at or below the user's: those queues' contacts they see
	for _, r := range []auth.Role{auth.RoleAgent, auth.RoleSupervisor, auth.RoleAdmin} {
		if user.Role.AtLeast(r) {
			seeing = append(seeing, string(r))
		}
	}
	st := &statement{role: user.Role, user: user.ID, args: pgx.NamedArgs{"user": user.ID, "supervisor": supervisor, "seeing": seeing, "now": time.Now()}}
	where := []string{`(@supervisor OR EXISTS (SELECT 1 FROM queue_members m WHERE m.queue_id = h.queue_id AND m.user_id = @user))`}
	if f.Queue != "" {
		var queueID int64
		err := s.db.QueryRow(ctx, `
			SELECT q.id FROM queues q WHERE q.name = $1
				AND ($2 OR EXISTS (SELECT 1 FROM queue_members m WHERE m.queue_id = q.id AND m.user_id = $3))`,
			f.Queue, supervisor, user.ID).Scan(&queueID)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, desk.BadParam("queue", "no queue you may search is named %q", f.Queue)
		}
		if err != nil {
			return nil, err
		}
		st.args["queue"] = queueID
		where = append(where, `h.queue_id = @queue`)
	}
	for name, v := range map[string]string{"status": string(f.Status), "trigger": string(f.Trigger), "source_agent": f.SourceAgent,
		"outcome": f.Outcome} {
		if v != "" {
			st.args[name] = v
			where = append(where, fmt.Sprintf("h.%s = @%s", name, name))
		}
	}
	if f.Repeat != nil {
		st.args["repeat"] = *f.Repeat
		where = append(where, `h.repeat_contact = @repeat`)
	}
	if f.SLABreached != nil {
		st.args["breached"] = *f.SLABreached
		where = append(where, slaBreachedSQL()+` = @breached`)
	}
	if f.CSAT != "" {
		st.args["csat"] = f.CSAT
		where = append(where, csat.GivenSQL("h.id", "@csat"))
	}
	if !f.Since.IsZero() {
		st.args["since"] = f.Since
		where = append(where, `h.created_at >= @since`)
	}
	if !f.Until.IsZero() {
		st.args["until"] = f.Until
		where = append(where, `h.created_at < @until`)
	}
	for _, b := range []struct {
		name, is string
		v        *bool
	}{{"accepted", `h.accepted_at IS NOT NULL`, f.Accepted}, {"rejected", `h.rejections > 0`, f.Rejected}, {"open", `h.closed_at IS NULL`, f.Open}} {
		if b.v != nil {
			st.args[b.name] = *b.v
			where = append(where, `(`+b.is+`) = @`+b.name)
		}
	}
	if f.Agent != "" {
		id, err := s.userID(ctx, "agent", f.Agent)
		if err != nil {
			return nil, err
		}
		st.args["agent"] = id
		where = append(where, `h.assignee_id = @agent`)
	}
	if f.Record != "" {
		record, err := s.recordSQL(ctx, f, st.args)
		if err != nil {
			return nil, err
		}
		st.record = record
		where = append(where, `EXISTS (SELECT 1 `+record+`)`)
	}
	columns := `
		SELECT h.id, h.handoff_id, q.name, h.status, coalesce(h.trigger, ''), h.source_agent, coalesce(h.outcome, ''),
			h.repeat_contact, ` + slaBreachedSQL() + `, h.created_at, coalesce(u.display_name, ''),
			q.pii_min_role, q.pii_entity_keys, q.withhold_transcript`
	st.where = where
	hits := ""
	if f.Q != "" {
		if err := s.db.QueryRow(ctx, `
			SELECT coalesce(bool_or(q.pii_min_role = ANY ($1)), false), coalesce(bool_or(NOT q.pii_min_role = ANY ($1)), false)
			FROM queues q WHERE ($2 OR EXISTS (SELECT 1 FROM queue_members m WHERE m.queue_id = q.id AND m.user_id = $3))
				AND ($4::bigint IS NULL OR q.id = $4)`, seeing, supervisor, user.ID, st.args["queue"]).Scan(&st.seesContacts, &st.masksSome); err != nil {
			return nil, err
		}
		trigram, err := s.Substrings(ctx)
		if err != nil {
			return nil, err
		}
		var each string
		hits, each = st.match(f.Q, trigram, exact)
		if !exact {
			st.walkSQL = columns + ` FROM (SELECT * FROM handoffs WHERE id < @after ORDER BY id DESC LIMIT ` + strconv.Itoa(walkBudget) + `) h` +
				searchJoins + ` JOIN package_search ps ON ps.handoff_id = h.id
				WHERE ` + strings.Join(append(slices.Clone(where), each), " AND ") + ` ORDER BY h.id DESC LIMIT @limit`
		}
		// The matches drive the statement: left to weigh a semi-join, the planner walks every
		// package by id in the hope of a match early on, which the walk above already did.
		st.sql = hits + `, found AS (SELECT id, bool_or(open) AS open FROM hits GROUP BY id)` + columns +
			` FROM found JOIN handoffs h ON h.id = found.id` + searchJoins + `
			WHERE h.id < @after AND (found.open OR q.pii_min_role = ANY (@seeing)) AND ` + strings.Join(where, " AND ") + `
			ORDER BY h.id DESC LIMIT @limit`
		return st, nil
	}
	st.sql = columns + ` FROM handoffs h` + searchJoins + `
		WHERE h.id < @after AND ` + strings.Join(where, " AND ") + `
		ORDER BY h.id DESC LIMIT @limit`
	return st, nil
}

// userID is the desk user with email, named by the parameter param, or 0 (no user's id) when no
// desk user has it: an email nobody has selects nothing, as one whose user did nothing would, so
// that the filters are no directory of who works at the desk.
func (s *Searcher) userID(ctx context.Context, param, email string) (int64, error) {
	normal, err := auth.NormalizeEmail(email)
	if err != nil {
		return 0, desk.BadParam(param, "%s: %s", param, desk.ErrorMessage(err))
	}
	var id int64
	err = s.db.QueryRow(ctx, `SELECT id FROM users WHERE email = $1`, normal).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return id, err
}

// recordSQL is the records of package h the filter's record parameters select, as the FROM and
// WHERE of a SELECT over evals e (or approvals, also as e), with its arguments set in args.
func (s *Searcher) recordSQL(ctx context.Context, f Filter, args pgx.NamedArgs) (string, error) {
	table, at, by := `evals e`, `e.at`, `e.editor_id`
	where := []string{`e.handoff_id = h.id`}
	switch f.Record {
	case RecordReply:
		where = append(where, `e.kind = 'reply'`)
	case RecordDraft:
		where = append(where, `e.kind = 'reply' AND e.draft <> ''`)
	case RecordAsIs:
		where = append(where, `e.kind = 'reply' AND e.draft <> '' AND e.accepted_as_is`)
	case RecordEdited:
		where = append(where, `e.kind = 'reply' AND e.draft <> '' AND NOT e.accepted_as_is`)
	case RecordScratch:
		where = append(where, `e.kind = 'reply' AND e.draft = ''`)
	case RecordReturn, RecordReject, RecordResolve:
		args["record_kind"] = string(f.Record)
		where = append(where, `e.kind = @record_kind`)
	case RecordDecision:
		table, at, by = `approvals e`, `e.decided_at`, `e.decided_by`
		where = append(where, `e.decided_by IS NOT NULL`)
	}
	if f.RecordBy != "" {
		id, err := s.userID(ctx, "record_by", f.RecordBy)
		if err != nil {
			return "", err
		}
		args["record_by"] = id
		where = append(where, by+` = @record_by`)
	}
	if f.Tag != "" {
		args["tag"] = f.Tag
		where = append(where, `@tag = ANY (e.tags)`)
	}
	if !f.RecordSince.IsZero() {
		args["record_since"] = f.RecordSince
		where = append(where, at+` >= @record_since`)
	}
	if !f.RecordUntil.IsZero() {
		args["record_until"] = f.RecordUntil
		where = append(where, at+` < @record_until`)
	}
	return `FROM ` + table + ` WHERE ` + strings.Join(where, " AND "), nil
}

// Counted is how many packages a search without a search box selects, and how many of the records
// its record filter selects they hold (0 without one).
type Counted struct {
	Packages, Records int
}

// Count counts the packages the filter selects that user may find, and their records the filter
// selects: the numbers a dashboard figure that links here shows. The search box is not counted
// (its matches are checked against what the viewer may see one page at a time): f.Q must be "".
func (s *Searcher) Count(ctx context.Context, user auth.User, f Filter) (Counted, error) {
	if f.Q != "" {
		return Counted{}, fmt.Errorf("search: Count with a search box")
	}
	st, err := s.prepare(ctx, user, f, false)
	if err != nil {
		return Counted{}, err
	}
	records := `0`
	if st.record != "" {
		records = `(SELECT count(*) ` + st.record + `)`
	}
	// The queues the viewer may search, named: a count over a period then reads each queue's
	// stretch of handoffs_figures_idx (queue_id, created_at), as the dashboard does, instead of
	// every package.
	var ids []int64
	if err := s.db.QueryRow(ctx, `
		SELECT coalesce(array_agg(q.id), '{}') FROM queues q
		WHERE @supervisor OR EXISTS (SELECT 1 FROM queue_members m WHERE m.queue_id = q.id AND m.user_id = @user)`, st.args).
		Scan(&ids); err != nil {
		return Counted{}, err
	}
	st.args["searchable"] = ids
	var c Counted
	err = s.db.QueryRow(ctx, `SELECT count(*), coalesce(sum(`+records+`), 0) FROM handoffs h`+searchJoins+`
		WHERE h.queue_id = ANY (@searchable) AND `+strings.Join(st.where, " AND "), st.args).Scan(&c.Packages, &c.Records)
	return c, err
}

// searchJoins are a package's queue, whose rules the statements read, and its holder.
const searchJoins = ` JOIN queues q ON q.id = h.queue_id LEFT JOIN users u ON u.id = h.assignee_id`

// walkBudget is how many of the newest packages a search reads one by one before it asks the
// indexes instead. A word found in one package in a hundred fills a page within it, where the
// indexes would gather every match (tens of thousands at a million packages) to sort them; a rare
// word costs this walk and then the indexes, which find its few matches at once.
const walkBudget = 5000

// match sets the search box's arguments and returns the CTE of the packages it matches, each
// marked open (matched by what every viewer of the package may see, before masking) or not (by
// the contact's name, email or phone), each part reading its own index; and the same match as a
// predicate over one package h, its package_search row ps and its queue q, for the walk. The
// contact is matched only when some queue of the search shows it to the viewer.
func (st *statement) match(q string, trigram, exact bool) (hits, each string) {
	st.q = strings.ToLower(q)
	st.words = queryWords(q)
	st.args["q"] = q
	parts := []string{`SELECT id, true AS open FROM handoffs WHERE handoff_id = @q OR contact_id = @q`}
	ors := []string{`h.handoff_id = @q`, `h.contact_id = @q`}
	if exact {
		return "WITH hits AS MATERIALIZED (" + parts[0] + ")", ""
	}
	var contact []string
	if len(st.words) > 0 {
		terms := make([]string, len(st.words))
		for i, w := range st.words {
			terms[i] = "'" + w + "':*" // a word of letters and digits needs no quoting beyond this
		}
		st.args["terms"] = strings.Join(terms, " & ")
		const notes = `to_tsvector('simple', search_words(body)) @@ to_tsquery('simple', @terms)`
		parts = append(parts,
			`SELECT handoff_id, true FROM package_search WHERE words @@ to_tsquery('simple', @terms)`,
			`SELECT handoff_id, true FROM handoff_notes WHERE `+notes)
		ors = append(ors, `ps.words @@ to_tsquery('simple', @terms)`,
			`EXISTS (SELECT 1 FROM handoff_notes n WHERE n.handoff_id = h.id AND `+strings.Replace(notes, "body", "n.body", 1)+`)`)
		// One token with punctuation (an email, a phone number) is found whole by the trigrams
		// below; as words, its "com" or "555" would have the index gather most contacts first.
		if st.seesContacts && (!trigram || !oneToken(q)) {
			parts = append(parts, `SELECT handoff_id, false FROM package_search WHERE contact_words @@ to_tsquery('simple', @terms)`)
			contact = append(contact, `ps.contact_words @@ to_tsquery('simple', @terms)`)
		}
	}
	// A trigram index narrows a substring of three characters or more; a shorter one would read it whole.
	if trigram && utf8.RuneCountInString(q) >= 3 {
		st.args["like"] = "%" + strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(st.q) + "%"
		parts = append(parts, `SELECT handoff_id, true FROM package_search WHERE ids LIKE @like`)
		ors = append(ors, `ps.ids LIKE @like`)
		if st.seesContacts {
			parts = append(parts, `SELECT handoff_id, false FROM package_search WHERE contact LIKE @like`)
			contact = append(contact, `ps.contact LIKE @like`)
		}
	}
	if len(contact) > 0 {
		ors = append(ors, `(q.pii_min_role = ANY (@seeing) AND (`+strings.Join(contact, " OR ")+`))`)
	}
	return "WITH hits AS MATERIALIZED (" + strings.Join(parts, "\nUNION ALL ") + ")", "(" + strings.Join(ors, " OR ") + ")"
}

// oneToken reports whether q is one token of three characters or more made of several words:
// "dana.w@example.org", "+1-415-555-0134", "acct_9912".
func oneToken(q string) bool {
	return !strings.ContainsFunc(q, unicode.IsSpace) && utf8.RuneCountInString(q) >= 3 && len(Words(q)) > 1
}

// queryWords are the words of the search box a package's words must begin. A one-letter word
// begins most packages' words (the "1" of a phone number) and narrows nothing but the speed: it is
// left out unless it is all there is.
func queryWords(q string) []string {
	words := Words(q)
	long := slices.DeleteFunc(slices.Clone(words), func(w string) bool { return utf8.RuneCountInString(w) < 2 })
	if len(long) == 0 {
		return words
	}
	return long
}

// Words splits text by the rule of the database's search_words (migrations/00030): runs of
// letters and digits, lower-cased.
func Words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
}

// searched is the part of a stored package search and its results read.
type searched struct {
	ProblemStatement    string                         `json:"problem_statement"`
	RecommendedNextStep string                         `json:"recommended_next_step"`
	Contact             handoff.Contact                `json:"contact"`
	StructuredEntities  map[string]handoff.EntityValue `json:"structured_entities"`
	PrivacyFlags        map[string]bool                `json:"privacy_flags"`
}

// found is a row read, before the masked check.
type found struct {
	Result
	vis handoff.Visibility
	pkg handoff.Package
}

// rows reads up to n rows after the cursor, without their packages.
func (st *statement) rows(ctx context.Context, db *pgxpool.Pool, after int64, n int) ([]found, error) {
	return st.read(ctx, db, st.sql, after, n)
}

// read runs sql, the statement or its walk, for up to n rows after the cursor.
func (st *statement) read(ctx context.Context, db *pgxpool.Pool, sql string, after int64, n int) ([]found, error) {
	if after == 0 {
		after = 1<<63 - 1
	}
	st.args["after"], st.args["limit"] = after, n
	rows, err := db.Query(ctx, sql, st.args)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (found, error) {
		var f found
		var rule handoff.PIIRule
		err := row.Scan(&f.ID, &f.PublicID, &f.Queue, &f.Status, &f.Trigger, &f.SourceAgent, &f.Outcome, &f.Repeat, &f.SLABreached,
			&f.CreatedAt, &f.Assignee, &rule.MinRole, &rule.EntityKeys, &rule.WithholdTranscript)
		f.vis = handoff.VisibilityFor(st.role, rule)
		return f, err
	})
}

// check reads the rows' packages and keeps the rows the viewer may find, masked for them.
func (st *statement) check(ctx context.Context, db *pgxpool.Pool, all []found) ([]Result, error) {
	ids := make([]int64, len(all))
	for i, f := range all {
		ids[i] = f.ID
	}
	pkgs, err := db.Query(ctx, `SELECT id, package FROM handoffs WHERE id = ANY ($1)`, ids)
	if err != nil {
		return nil, err
	}
	byID := map[int64]handoff.Package{}
	var id int64
	var raw []byte
	if _, err := pgx.ForEachRow(pkgs, []any{&id, &raw}, func() error {
		var p searched
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("stored package %d: %w", id, err)
		}
		byID[id] = handoff.Package{ProblemStatement: p.ProblemStatement, RecommendedNextStep: p.RecommendedNextStep,
			Contact: p.Contact, StructuredEntities: p.StructuredEntities, PrivacyFlags: p.PrivacyFlags}
		return nil
	}); err != nil {
		return nil, err
	}
	for i := range all {
		all[i].pkg = byID[all[i].ID]
		all[i].pkg.HandoffID = all[i].PublicID
	}
	notes, err := st.maskedNotes(ctx, db, all)
	if err != nil {
		return nil, err
	}
	var out []Result
	for _, f := range all {
		masked := f.pkg.MaskFor(f.vis)
		if !f.vis.PII && st.q != "" && !st.visible(masked, notes[f.ID]) {
			continue
		}
		r := f.Result
		r.Contact, r.ProblemStatement = masked.Contact.DisplayName, masked.ProblemStatement
		r.Unmasked = f.vis.Unmasked(handoff.Package{Contact: handoff.Contact{DisplayName: f.pkg.Contact.DisplayName}})
		out = append(out, r)
	}
	return out, nil
}

// maskedNotes reads the notes of the rows the viewer sees masked, masked for them as the package
// page shows them (handoff.WrittenMaskFor), when the search box is used: only they are checked
// again. A note by the viewer, or by a writer who could not see the contact when they wrote it, is
// found by its words as written, whether or not they name the contact: a right guess and a wrong
// one match alike.
func (st *statement) maskedNotes(ctx context.Context, db *pgxpool.Pool, all []found) (map[int64][]string, error) {
	byID := map[int64]found{}
	var ids []int64
	for _, f := range all {
		if !f.vis.PII && st.q != "" {
			ids = append(ids, f.ID)
			byID[f.ID] = f
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := db.Query(ctx, `
		SELECT n.handoff_id, n.body, n.author_id, n.author_saw_contact FROM handoff_notes n
		WHERE n.handoff_id = ANY ($1) ORDER BY n.id`, ids)
	if err != nil {
		return nil, err
	}
	notes := map[int64][]string{}
	masks := map[int64]func(string, handoff.Writer) string{}
	var id, author int64
	var body string
	var saw bool
	_, err = pgx.ForEachRow(rows, []any{&id, &body, &author, &saw}, func() error {
		f := byID[id]
		mask, ok := masks[id]
		if !ok {
			mask = f.pkg.WrittenMaskFor(f.vis)
			masks[id] = mask
		}
		by := handoff.Writer{Viewer: author == st.user, SawContact: saw}
		notes[id] = append(notes[id], mask(body, by))
		return nil
	})
	return notes, err
}

// visible reports whether the search box matches what a viewer who sees p masked may see of it:
// its id or its contact's id, whole or in part, or every word of the box beginning a word of its
// masked text or of one of its masked notes. It never looks at the contact, which they see masked.
func (st *statement) visible(p handoff.Package, notes []string) bool {
	ids := strings.ToLower(p.HandoffID + " " + p.Contact.ID)
	if strings.Contains(ids, st.q) {
		return true
	}
	if len(st.words) == 0 {
		return false
	}
	texts := []string{p.ProblemStatement, p.RecommendedNextStep}
	for k, v := range p.StructuredEntities {
		b, err := json.Marshal(v)
		if err != nil {
			continue
		}
		texts = append(texts, k, string(b))
	}
	if allBegin(st.words, Words(strings.Join(texts, " "))) {
		return true
	}
	for _, n := range notes {
		if allBegin(st.words, Words(n)) {
			return true
		}
	}
	return false
}

// allBegin reports whether every query word begins some word of text, as a tsquery of prefixes
// joined by & matches.
func allBegin(query, text []string) bool {
	for _, q := range query {
		if !slices.ContainsFunc(text, func(w string) bool { return strings.HasPrefix(w, q) }) {
			return false
		}
	}
	return true
}
