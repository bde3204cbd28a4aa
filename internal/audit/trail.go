package audit

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
)

// Filter narrows the trail. The zero Filter is every event.
type Filter struct {
	Package string      // a package's handoff_id
	Actor   string      // the email of the user who acted
	Kind    events.Kind // one kind of event
	Queue   string      // a queue's name
	Since   time.Time   // at or after; zero: from the first
	Until   time.Time   // before; zero: to the last
	// HidePresence leaves out presence changes and changes of who has a package open: a roster's
	// every break and reconnect and a package page's every opening is a row, naming nobody, and
	// they would bury the trail's history.
	HidePresence bool
}

// FilterParams are the query parameters ParseFilter reads.
func FilterParams() []string {
	return []string{"package", "actor", "kind", "queue", "since", "until", "presence"}
}

// ShowPresence is the value of the parameter presence that lists presence changes, which the
// trail otherwise leaves out.
const ShowPresence = "show"

// ParseFilter reads a Filter from query parameters. A parameter it does not know (besides those
// in also, which the caller reads), one given twice or one it cannot read is a BadRequest naming
// it: a misspelt filter must never show or export more than was asked.
func ParseFilter(q url.Values, also ...string) (Filter, error) {
	for name, values := range q {
		if slices.Contains(also, name) {
			continue
		}
		if !slices.Contains(FilterParams(), name) {
			return Filter{}, desk.BadParam(name, "unknown parameter %q; the audit reads %s", name, strings.Join(FilterParams(), ", "))
		}
		if len(values) > 1 {
			return Filter{}, desk.BadParam(name, "parameter %s is given %d times; give it once", name, len(values))
		}
	}
	f := Filter{Package: q.Get("package"), Actor: q.Get("actor"), Kind: events.Kind(q.Get("kind")), Queue: q.Get("queue")}
	switch p := q.Get("presence"); p {
	case "":
		// Asking for the kind is asking for them.
		f.HidePresence = f.Kind != events.Presence
	case ShowPresence:
	default:
		return Filter{}, desk.BadParam("presence", "presence %q: give %s to list presence changes, or leave it out", p, ShowPresence)
	}
	if f.Kind != "" && !slices.Contains(events.Kinds(), f.Kind) {
		names := make([]string, 0, len(events.Kinds()))
		for _, k := range events.Kinds() {
			names = append(names, string(k))
		}
		return Filter{}, desk.BadParam("kind", "kind %q is not one of %s", f.Kind, strings.Join(names, ", "))
	}
	var err error
	if f.Actor != "" {
		if f.Actor, err = auth.NormalizeEmail(f.Actor); err != nil {
			return Filter{}, desk.BadParam("actor", "actor: %s", desk.ErrorMessage(err))
		}
	}
	if f.Since, f.Until, err = desk.ParseSpan(q); err != nil {
		return Filter{}, err
	}
	return f, nil
}

// Query is f as query parameters, for links to the next page and to the exports.
func (f Filter) Query() url.Values {
	q := url.Values{}
	for k, v := range map[string]string{"package": f.Package, "actor": f.Actor, "kind": string(f.Kind), "queue": f.Queue} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !f.Since.IsZero() {
		q.Set("since", timeParam(f.Since))
	}
	if !f.Until.IsZero() {
		q.Set("until", timeParam(f.Until))
	}
	if !f.HidePresence && f.Kind != events.Presence {
		q.Set("presence", ShowPresence)
	}
	return q
}

// timeParam writes a filter's time as a person would: a date when it is one.
func timeParam(t time.Time) string {
	if t.Equal(t.UTC().Truncate(24 * time.Hour)) {
		return t.UTC().Format(time.DateOnly)
	}
	return t.Format(time.RFC3339Nano)
}

// Cursor is where a page of the trail ends, newest first: the next page starts below it. Keyset
// paging: no OFFSET, no COUNT, the same cost for page 1 and page 500.
type Cursor struct {
	At  time.Time
	Seq int64
}

// String encodes the cursor for a URL.
func (c Cursor) String() string { return fmt.Sprintf("%d.%d", c.At.UnixMicro(), c.Seq) }

// ParseCursor reads a cursor from a URL.
func ParseCursor(s string) (Cursor, error) {
	at, seq, ok := strings.Cut(s, ".")
	micros, err1 := strconv.ParseInt(at, 10, 64)
	n, err2 := strconv.ParseInt(seq, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return Cursor{}, desk.BadParam("after", "after %q is not a cursor this desk made", s)
	}
	return Cursor{At: time.UnixMicro(micros), Seq: n}, nil
}

// Entry is one event as a reader of the trail may see it.
type Entry struct {
	Seq     int64
	At      time.Time
	Kind    events.Kind
	Actor   string // a user's email, "bot:" and an API key's name, or "" for the desk itself
	Package string // the package's handoff_id, if the event is about one
	Queue   string
	Subject string // whose access changed, for the kinds that change it
	// Detail is the log's account, its text masked by the package's queue's rule for the reader.
	Detail map[string]any
	// HandoffID is the package's row id, and Unmasked the detail's keys whose text named the
	// package's customer and was shown to the reader unmasked: the record of PII reads needs both.
	HandoffID int64
	Unmasked  []string
}

// Check refuses, with a BadRequest naming it, a filter for a package, actor or queue the desk does
// not know, rather than answer with an empty trail that reads as "nothing happened". It returns the
// package's row id when f names one.
func (f Filter) Check(ctx context.Context, db Querier) (handoffID int64, err error) {
	if f.Package == "" && f.Actor == "" && f.Queue == "" {
		return 0, nil
	}
	var pkg, actor, queue *int64
	err = db.QueryRow(ctx, `SELECT (SELECT id FROM handoffs WHERE handoff_id = $1),
		(SELECT id FROM users WHERE email = $2), (SELECT id FROM queues WHERE name = $3)`,
		f.Package, f.Actor, f.Queue).Scan(&pkg, &actor, &queue)
	switch {
	case err != nil:
		return 0, err
	case f.Package != "" && pkg == nil:
		return 0, desk.BadParam("package", "package %q does not exist", f.Package)
	case f.Actor != "" && actor == nil:
		return 0, desk.BadParam("actor", "actor %q: no user has this email", f.Actor)
	case f.Queue != "" && queue == nil:
		return 0, desk.BadParam("queue", "queue %q does not exist", f.Queue)
	}
	if pkg != nil {
		handoffID = *pkg
	}
	return handoffID, nil
}

// PageSize is how many events a page of the trail shows.
const PageSize = 50

// Page reads a page of the trail f selects, newest first, below after if given, as reader may see it;
// it returns the cursor of the next page (nil at the end).
func Page(ctx context.Context, db Querier, reader auth.User, f Filter, after *Cursor) ([]Entry, *Cursor, error) {
	sql, args := trailQuery(f, after, PageSize+1)
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, nil, err
	}
	var entries []Entry
	err = each(rows, reader, func(e Entry) error {
		entries = append(entries, e)
		return nil
	})
	if err != nil || len(entries) <= PageSize {
		return entries, nil, err
	}
	entries = entries[:PageSize]
	last := entries[len(entries)-1]
	return entries, &Cursor{At: last.At, Seq: last.Seq}, nil
}

// Each streams every event f selects, newest first, as reader may see it, to fn: rows are read from
// one query as fn takes them, so memory stays flat however long the trail. fn's error stops it.
func Each(ctx context.Context, db Querier, reader auth.User, f Filter, fn func(Entry) error) error {
	sql, args := trailQuery(f, nil, 0)
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	return each(rows, reader, fn)
}

// trailQuery selects f's events below after, newest first, at most limit (0: all). Each filter is
// a comparison with one value, looked up by name in a subquery, so the planner walks the index of
// migration 00018 that leads with it (events_handoff_idx for a package) and stops at the limit.
func trailQuery(f Filter, after *Cursor, limit int) (string, []any) {
	var where []string
	var args []any
	cond := func(format string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(format, len(args)))
	}
	if f.Package != "" {
		cond("e.handoff_id = (SELECT id FROM handoffs WHERE handoff_id = $%d)", f.Package)
	}
	if f.Actor != "" {
		cond("e.actor_user = (SELECT id FROM users WHERE email = $%d)", f.Actor)
	}
	if f.Kind != "" {
		cond("e.kind = $%d", string(f.Kind))
	}
	if f.HidePresence && f.Kind == "" {
		cond("e.kind <> ALL($%d::text[])", []string{string(events.Presence), string(events.Viewing)})
	}
	if f.Queue != "" {
		cond("e.queue_id = (SELECT id FROM queues WHERE name = $%d)", f.Queue)
	}
	if !f.Since.IsZero() {
		cond("e.at >= $%d", f.Since)
	}
	if !f.Until.IsZero() {
		cond("e.at < $%d", f.Until)
	}
	if after != nil {
		args = append(args, after.At, after.Seq)
		where = append(where, fmt.Sprintf("(e.at, e.seq) < ($%d, $%d)", len(args)-1, len(args)))
	}
	sql := `
		SELECT e.seq, e.at, e.kind, coalesce(au.email, 'bot:' || k.name, ''), coalesce(h.handoff_id, ''),
			coalesce(q.name, ''), coalesce(su.email, ''), e.detail, coalesce(e.handoff_id, 0),
			coalesce(hq.pii_min_role, 'agent'), coalesce(hq.pii_entity_keys, '{}'), coalesce(hq.withhold_transcript, false),
			h.package->'contact', h.package->'structured_entities', coalesce(au.id, 0), e.actor_saw_contact
		FROM events e
			LEFT JOIN handoffs h ON h.id = e.handoff_id
			LEFT JOIN queues hq ON hq.id = h.queue_id
			LEFT JOIN queues q ON q.id = e.queue_id
			LEFT JOIN users au ON au.id = e.actor_user
			LEFT JOIN api_keys k ON k.id = e.actor_bot
			LEFT JOIN users su ON su.id = e.subject_user`
	if len(where) > 0 {
		sql += "\n\t\tWHERE " + strings.Join(where, " AND ")
	}
	sql += "\n\t\tORDER BY e.at DESC, e.seq DESC"
	if limit > 0 {
		args = append(args, limit)
		sql += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	return sql, args
}

// each scans the trail's rows and masks each for reader.
func each(rows pgx.Rows, reader auth.User, fn func(Entry) error) error {
	defer rows.Close()
	for rows.Next() {
		var (
			e                 Entry
			detail            []byte
			rule              handoff.PIIRule
			contact, entities []byte
			actorID           int64
			actorSawContact   bool
		)
		err := rows.Scan(&e.Seq, &e.At, &e.Kind, &e.Actor, &e.Package, &e.Queue, &e.Subject, &detail, &e.HandoffID,
			&rule.MinRole, &rule.EntityKeys, &rule.WithholdTranscript, &contact, &entities, &actorID, &actorSawContact)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(detail, &e.Detail); err != nil {
			return fmt.Errorf("audit: the detail of event %d: %w", e.Seq, err)
		}
		if e.HandoffID != 0 {
			by := handoff.Writer{Viewer: actorID != 0 && actorID == reader.ID, SawContact: actorSawContact}
			if err := e.mask(reader.Role, rule, by, contact, entities); err != nil {
				return err
			}
		}
		if err := fn(e); err != nil {
			return err
		}
	}
	return rows.Err()
}

// mask masks the detail's text, written by, by the package's queue's rule for role, as notes on the
// package page are (handoff.WrittenMaskFor), and notes which of it named the customer and was shown
// unmasked.
func (e *Entry) mask(role auth.Role, rule handoff.PIIRule, by handoff.Writer, contact, entities []byte) error {
	var p handoff.Package
	if contact != nil {
		if err := json.Unmarshal(contact, &p.Contact); err != nil {
			return fmt.Errorf("audit: the contact of %s: %w", e.Package, err)
		}
	}
	if entities != nil {
		if err := json.Unmarshal(entities, &p.StructuredEntities); err != nil {
			return fmt.Errorf("audit: the entities of %s: %w", e.Package, err)
		}
	}
	v := handoff.VisibilityFor(role, rule)
	written := p.WrittenMaskFor(v)
	text := func(s string) string { return written(s, by) }
	masked := p.NoteMaskFor(handoff.Visibility{PIIEntityKeys: rule.EntityKeys})
	for k, val := range e.Detail {
		e.Detail[k] = maskValue(val, text)
		if v.PII && !equalJSON(maskValue(val, masked), val) {
			e.Unmasked = append(e.Unmasked, "detail:"+k)
		}
	}
	slices.Sort(e.Unmasked)
	return nil
}

// maskValue masks every text in a detail's value, however deep: a kind added later may nest its
// notes in a list or an object.
func maskValue(val any, text func(string) string) any {
	switch v := val.(type) {
	case string:
		return text(v)
	case []any:
		out := make([]any, len(v))
		for i, item := range v {
			out[i] = maskValue(item, text)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, item := range v {
			out[k] = maskValue(item, text)
		}
		return out
	}
	return val
}

func equalJSON(a, b any) bool {
	x, errX := json.Marshal(a)
	y, errY := json.Marshal(b)
	return errX == nil && errY == nil && string(x) == string(y)
}
