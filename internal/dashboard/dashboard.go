// Package dashboard is the supervisors' figures over a window of time: packages in, times to
// accept and to resolution, outcome rates, repeat contacts within 7 days and the drafts sent as
// is, each beside the previous window of the same length. docs/metrics.md defines every figure;
// this package is where those definitions are written in SQL. Like board, it reads across the
// tables of their owners (handoffs, evals, queues, approvals); it writes only its own rollup of
// them per queue and hour (rollup.go, refresh.go), which Read sums.
package dashboard

import (
	"context"
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
	// Replied packages got a reply from an agent; the times run from arrival to the first one.
	Replied            int
	ReplyP50, ReplyP90 *time.Duration
	// Drafts are the replies sent to the packages that carried a bot's draft; AsIs of them were
	// sent unchanged.
	Drafts, AsIs int
	// Decided refund approvals were granted or denied in the period; the times run from the
	// request to the decision.
	Decided                  int
	DecisionP50, DecisionP90 *time.Duration
}

// Bucket is one point of the window's charts: its packages in, those resolved and their median
// time to resolution.
type Bucket struct {
	From         time.Time
	In, Resolved int
	ResolveP50   *time.Duration
}

// QueueFigures is one queue's bar: its packages in, repeat contacts and drafts in the window.
type QueueFigures struct {
	Queue               string
	In, Repeats, Drafts int
}

// AgentFigures are one desk user's figures over the current window's packages: those whose
// accept stands with them (Handled: they hold them, or held them last), with their times to accept
// and, of those resolved, to resolution; the replies they sent to the window's packages, of them
// those to a bot's draft and those sent as is, and the median edit distance, in characters, of
// those to a draft. Durations and the median are nil when there was nothing to measure.
type AgentFigures struct {
	UserID                 int64
	Name, Email            string
	Handled, Resolved      int
	AcceptP50, AcceptP90   *time.Duration
	ResolveP50, ResolveP90 *time.Duration
	Replies, Drafts, AsIs  int
	EditP50                *float64
}

// Stats is the dashboard for one queue or all, over a window and the one before it.
type Stats struct {
	Window            Window
	Queue             string // "" for all queues
	Current, Previous Figures
	Series            []Bucket
	Queues            []QueueFigures
	// Agents are the current window's figures per agent, by name.
	Agents []AgentFigures
	// CSATQueues and CSATAgents are the customer's verdicts per queue and per agent, by name.
	CSATQueues, CSATAgents []CSAT
}

// Filter says what to read: a queue by name ("" for all) and a window ending at Now.
type Filter struct {
	Queue  string
	Window Window
	Now    time.Time
}

// Periods are the window ending at now, from the start of the bucket now is in (the hour for 24h,
// the UTC day for 7d and 30d) less the window's span, and the previous window of the span's
// length before it. Windows start where the rollup's rows do: the current window holds the span's
// whole buckets and the current one so far, to the end of now's second: the figures link to
// /packages with the same bounds, which read as whole seconds there ("until 12:00:01Z").
func (w Window) Periods(now time.Time) (current, previous Period) {
	end := now.Truncate(time.Second)
	if end.Before(now) {
		end = end.Add(time.Second)
	}
	current = Period{From: now.Truncate(w.Bucket).Add(-w.Span), To: end}
	previous = Period{From: current.From.Add(-w.Span), To: current.From}
	return current, previous
}

// exactUpTo is how many packages the two windows may hold for their percentiles to be read
// exactly, with percentile_cont over the packages' durations; past it they are estimated from the
// rollup's histograms (docs/metrics.md states the error). At 20,000 the exact read takes tens of
// milliseconds (make bench-dashboard).
var exactUpTo = 20_000

// Read computes the dashboard in one read-only snapshot, so that its figures agree with each
// other. An unknown queue is a BadRequest naming the parameter.
func Read(ctx context.Context, db DB, f Filter) (Stats, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return Stats{}, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`); err != nil {
		return Stats{}, err
	}
	q, err := queuesOf(ctx, tx, f.Queue)
	if err != nil {
		return Stats{}, err
	}
	cur, prev := f.Window.Periods(f.Now)
	s := Stats{Window: f.Window, Queue: f.Queue, Current: Figures{Period: cur}, Previous: Figures{Period: prev}}
	hs, err := readHours(ctx, tx, q, s.Previous.From, s.Current.To, f.Window.Bucket)
	if err != nil {
		return Stats{}, err
	}
	times := s.sum(hs, q)
	if s.Current.In+s.Previous.In <= exactUpTo {
		err = readExact(ctx, tx, q, &s)
	} else {
		s.estimate(times)
	}
	if err != nil {
		return Stats{}, err
	}
	if err := readDecisions(ctx, tx, q, f.Queue != "", &s); err != nil {
		return Stats{}, err
	}
	if err := readAgents(ctx, tx, &s); err != nil {
		return Stats{}, err
	}
	if err := readCSAT(ctx, tx, q, &s); err != nil {
		return Stats{}, err
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

// span is the packages of queues $1 created in [$2, $4); $3 splits them into the two periods.
const span = `h.queue_id = ANY($1) AND h.created_at >= $2 AND h.created_at < $4`

func seconds(ps []*float64, i int) *time.Duration {
	if i >= len(ps) || ps[i] == nil {
		return nil
	}
	d := time.Duration(*ps[i] * float64(time.Second)).Round(time.Millisecond)
	return &d
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
