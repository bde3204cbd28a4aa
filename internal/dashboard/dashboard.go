// Package dashboard is the supervisors' figures over a window of time: packages in, times to
// accept and to resolution, outcome rates, repeat contacts within 7 days and the drafts sent as
// is, each beside the previous window of the same length. docs/metrics.md defines every figure;
// this package is where those definitions are written in SQL. Like board, it reads across the
// tables of their owners (handoffs, evals, queues) and writes nothing.
package dashboard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/desk"
)

// DB is what the reads need: a pool, a connection or a transaction.
type DB interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
	Begin(context.Context) (pgx.Tx, error)
}

// Window is a span of time the dashboard looks back over, and the buckets its sparklines have.
type Window struct {
	Name   string
	Span   time.Duration
	Bucket time.Duration
}

// Windows are the spans a supervisor may choose; DefaultWindow is the one shown first.
func Windows() []Window {
	return []Window{
		{Name: "24h", Span: 24 * time.Hour, Bucket: time.Hour},
		{Name: "7d", Span: 7 * 24 * time.Hour, Bucket: 24 * time.Hour},
		{Name: "30d", Span: 30 * 24 * time.Hour, Bucket: 24 * time.Hour},
	}
}

// DefaultWindow is the window of a dashboard asked for without one.
const DefaultWindow = "7d"

// ParseWindow reads the window query parameter; "" is DefaultWindow.
func ParseWindow(name string) (Window, error) {
	if name == "" {
		name = DefaultWindow
	}
	var names []string
	for _, w := range Windows() {
		if w.Name == name {
			return w, nil
		}
		names = append(names, w.Name)
	}
	return Window{}, desk.Errorf(desk.BadRequest, "window %q is not one of %s", name, strings.Join(names, ", "))
}

// Period is a half-open span of time [From, To): a package created exactly at From belongs to it,
// one created exactly at To to the next.
type Period struct{ From, To time.Time }

// Count is how many packages had a value (a trigger, a source agent, a return reason).
type Count struct {
	Value string
	N     int
}

// Figures are one period's numbers over the packages created in it (the drafts: over the
// replies sent in it). Durations are nil when there was nothing to measure.
type Figures struct {
	Period
	In        int
	ByTrigger []Count
	BySource  []Count
	// Accepted packages have an accept standing; Resolved ones were resolved.
	Accepted, Resolved     int
	AcceptP50, AcceptP90   *time.Duration
	ResolveP50, ResolveP90 *time.Duration
	// Rejected packages were rejected by an agent at least once.
	Rejected   int
	Returned   int
	ReturnedBy []Count
	Expired    int
	Canceled   int
	// Repeats are repeat contacts: packages whose contact had another package resolved or
	// returned to the bot within the 7 days before this one arrived (intake decides it).
	Repeats int
	// Drafts are replies sent to a package with a bot's draft; AsIs of them were sent unchanged.
	Drafts, AsIs int
}

// Bucket is one point of the window's sparklines.
type Bucket struct {
	From       time.Time
	In         int
	ResolveP50 *time.Duration
}

// QueueFigures is one queue's bar: its packages in, repeat contacts and drafts in the window.
type QueueFigures struct {
	Queue               string
	In, Repeats, Drafts int
}

// Stats is the dashboard for one queue or all, over a window and the one before it.
type Stats struct {
	Window            Window
	Queue             string // "" for all queues
	Current, Previous Figures
	Series            []Bucket
	Queues            []QueueFigures
}

// Filter says what to read: a queue by name ("" for all) and a window ending at Now.
type Filter struct {
	Queue  string
	Window Window
	Now    time.Time
}

// Periods are the window ending at now and the one of the same length before it.
func (w Window) Periods(now time.Time) (current, previous Period) {
	current = Period{From: now.Add(-w.Span), To: now}
	previous = Period{From: now.Add(-2 * w.Span), To: current.From}
	return current, previous
}

// Read computes the dashboard in one read-only snapshot, so that its figures agree with each
// other. An unknown queue is a BadRequest naming the parameter.
func Read(ctx context.Context, db DB, f Filter) (Stats, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return Stats{}, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	// The percentiles sort each period's durations: up to half a million of them for all queues
	// over 30 days, which spills to disk at the default 4 MB.
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`); err != nil {
		return Stats{}, err
	}
	if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '64MB'`); err != nil {
		return Stats{}, err
	}
	q, err := queuesOf(ctx, tx, f.Queue)
	if err != nil {
		return Stats{}, err
	}
	cur, prev := f.Window.Periods(f.Now)
	s := Stats{Window: f.Window, Queue: f.Queue, Current: Figures{Period: cur}, Previous: Figures{Period: prev}}
	for _, read := range []func(context.Context, pgx.Tx, queues, *Stats) error{readOutcomes, readMix, readDrafts, readSeries} {
		if err := read(ctx, tx, q, &s); err != nil {
			return Stats{}, err
		}
	}
	return s, tx.Commit(ctx)
}

// queues are the ids and names the figures cover, in name order.
type queues struct {
	ids   []int64
	names map[int64]string
	order []int64
}

func queuesOf(ctx context.Context, tx pgx.Tx, name string) (queues, error) {
	rows, err := tx.Query(ctx, `SELECT id, name FROM queues WHERE $1 = '' OR name = $1 ORDER BY name`, name)
	if err != nil {
		return queues{}, err
	}
	q := queues{names: map[int64]string{}}
	var id int64
	var n string
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		q.ids = append(q.ids, id)
		q.order = append(q.order, id)
		q.names[id] = n
		return nil
	}); err != nil {
		return queues{}, err
	}
	if name != "" && len(q.ids) == 0 {
		return queues{}, desk.Errorf(desk.BadRequest, "queue %q is not a queue of this desk", name)
	}
	return q, nil
}

// pick returns the figures of the current period or the previous one.
func (s *Stats) pick(current bool) *Figures {
	if current {
		return &s.Current
	}
	return &s.Previous
}

// Every query reads the packages created in [previous.From, current.To) through
// handoffs_dashboard_idx, and splits them by period with "created_at >= current.From".
const span = `h.queue_id = ANY($1) AND h.created_at >= $2 AND h.created_at < $4`

// readOutcomes counts the outcomes and takes the percentiles. percentile_cont interpolates
// between the two middle durations, as a median of times is usually read; docs/metrics.md says
// why not percentile_disc.
func readOutcomes(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
	rows, err := tx.Query(ctx, `
		SELECT h.created_at >= $3,
			count(*),
			count(*) FILTER (WHERE h.accepted_at IS NOT NULL),
			percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY extract(epoch FROM h.accepted_at - h.created_at))
				FILTER (WHERE h.accepted_at IS NOT NULL),
			count(*) FILTER (WHERE h.status = 'resolved'),
			percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY extract(epoch FROM h.closed_at - h.created_at))
				FILTER (WHERE h.status = 'resolved'),
			count(*) FILTER (WHERE h.rejections > 0),
			count(*) FILTER (WHERE h.status = 'returned_to_bot'),
			count(*) FILTER (WHERE h.status = 'expired'),
			count(*) FILTER (WHERE h.status = 'canceled'),
			count(*) FILTER (WHERE h.repeat_contact)
		FROM handoffs h WHERE `+span+`
		GROUP BY 1`, q.ids, s.Previous.From, s.Current.From, s.Current.To)
	if err != nil {
		return err
	}
	var current bool
	var in, accepted, resolved, rejected, returned, expired, canceled, repeats int
	var accept, resolve []*float64
	_, err = pgx.ForEachRow(rows, []any{&current, &in, &accepted, &accept, &resolved, &resolve, &rejected, &returned, &expired, &canceled, &repeats}, func() error {
		f := s.pick(current)
		f.In, f.Accepted, f.Resolved, f.Rejected, f.Returned, f.Expired, f.Canceled = in, accepted, resolved, rejected, returned, expired, canceled
		f.Repeats = repeats
		f.AcceptP50, f.AcceptP90 = seconds(accept, 0), seconds(accept, 1)
		f.ResolveP50, f.ResolveP90 = seconds(resolve, 0), seconds(resolve, 1)
		return nil
	})
	return err
}

func seconds(ps []*float64, i int) *time.Duration {
	if i >= len(ps) || ps[i] == nil {
		return nil
	}
	d := time.Duration(*ps[i] * float64(time.Second)).Round(time.Millisecond)
	return &d
}

// readMix counts packages in by trigger, by source agent, by queue (with its repeat contacts), and
// returns by reason, in one scan.
func readMix(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
	rows, err := tx.Query(ctx, `
		SELECT h.created_at >= $3 AS cur, GROUPING(h.trigger), GROUPING(h.source_agent), GROUPING(h.queue_id),
			coalesce(h.trigger, ''), coalesce(h.source_agent, ''), coalesce(h.queue_id, 0), coalesce(h.outcome, ''), count(*),
			count(*) FILTER (WHERE h.repeat_contact)
		FROM handoffs h WHERE `+span+`
		GROUP BY GROUPING SETS ((cur, h.trigger), (cur, h.source_agent), (cur, h.queue_id),
			(cur, h.status, h.outcome))
		HAVING GROUPING(h.status) = 1 OR h.status = 'returned_to_bot'`, q.ids, s.Previous.From, s.Current.From, s.Current.To)
	if err != nil {
		return err
	}
	in, repeats := map[int64]int{}, map[int64]int{}
	var current bool
	var noTrigger, noSource, noQueue int
	var trigger, source, outcome string
	var queueID int64
	var n, r int
	if _, err := pgx.ForEachRow(rows, []any{&current, &noTrigger, &noSource, &noQueue, &trigger, &source, &queueID, &outcome, &n, &r}, func() error {
		f := s.pick(current)
		switch {
		case noTrigger == 0:
			f.ByTrigger = append(f.ByTrigger, Count{trigger, n})
		case noSource == 0:
			f.BySource = append(f.BySource, Count{source, n})
		case noQueue == 0:
			if current {
				in[queueID], repeats[queueID] = n, r
			}
		default:
			f.ReturnedBy = append(f.ReturnedBy, Count{outcome, n})
		}
		return nil
	}); err != nil {
		return err
	}
	for _, f := range []*Figures{&s.Current, &s.Previous} {
		for _, cs := range [][]Count{f.ByTrigger, f.BySource, f.ReturnedBy} {
			sortCounts(cs)
		}
	}
	for _, id := range q.order {
		s.Queues = append(s.Queues, QueueFigures{Queue: q.names[id], In: in[id], Repeats: repeats[id]})
	}
	return nil
}

// sortCounts puts the largest first, ties by name, so the page does not reshuffle on a reload.
func sortCounts(cs []Count) {
	slices.SortFunc(cs, func(a, b Count) int {
		if a.N != b.N {
			return b.N - a.N
		}
		return strings.Compare(a.Value, b.Value)
	})
}

// readDrafts counts the replies sent in each period to a package that carried a bot's draft, and
// those sent unchanged. A reply belongs to the period it was sent in and to the queue the package
// was in then.
func readDrafts(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
	rows, err := tx.Query(ctx, `
		SELECT e.at >= $3, e.queue_id, count(*), count(*) FILTER (WHERE e.accepted_as_is)
		FROM evals e
		WHERE e.kind = 'reply' AND e.draft <> '' AND e.queue_id = ANY($1) AND e.at >= $2 AND e.at < $4
		GROUP BY 1, 2`, q.ids, s.Previous.From, s.Current.From, s.Current.To)
	if err != nil {
		return err
	}
	byQueue := map[int64]int{}
	var current bool
	var queueID int64
	var drafts, asIs int
	if _, err := pgx.ForEachRow(rows, []any{&current, &queueID, &drafts, &asIs}, func() error {
		f := s.pick(current)
		f.Drafts += drafts
		f.AsIs += asIs
		if current {
			byQueue[queueID] = drafts
		}
		return nil
	}); err != nil {
		return err
	}
	for i, id := range q.order {
		s.Queues[i].Drafts = byQueue[id]
	}
	return nil
}

// readSeries cuts the current window into buckets from its start (not calendar days: every bucket
// is as long as the others and the last one ends now) with the packages in and the median time to
// resolution of each.
func readSeries(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
	n := int(s.Window.Span / s.Window.Bucket)
	s.Series = make([]Bucket, n)
	for i := range s.Series {
		s.Series[i].From = s.Current.From.Add(time.Duration(i) * s.Window.Bucket)
	}
	rows, err := tx.Query(ctx, `
		SELECT floor(extract(epoch FROM h.created_at - $2) / $4)::int, count(*),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM h.closed_at - h.created_at))
				FILTER (WHERE h.status = 'resolved')
		FROM handoffs h WHERE h.queue_id = ANY($1) AND h.created_at >= $2 AND h.created_at < $3
		GROUP BY 1`, q.ids, s.Current.From, s.Current.To, s.Window.Bucket.Seconds())
	if err != nil {
		return err
	}
	var i, in int
	var p50 *float64
	_, err = pgx.ForEachRow(rows, []any{&i, &in, &p50}, func() error {
		if i < 0 || i >= n {
			return fmt.Errorf("bucket %d outside the window's %d", i, n)
		}
		s.Series[i].In = in
		s.Series[i].ResolveP50 = seconds([]*float64{p50}, 0)
		return nil
	})
	return err
}
