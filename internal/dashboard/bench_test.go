package dashboard

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
)

// benchPackages is how many packages make bench-dashboard's desk (BENCH_PACKAGES to change).
const benchPackages = 1_000_000

// seedSQL stores n packages over the 60 days before $2, spread the way a desk sees them: eight
// queues of unequal size, six triggers and five bots each more common than the next, 70% of
// packages from half a million one-off contacts and 30% from 30,000 who keep coming back (about
// one package a week each), and outcomes by share: resolved, returned to the bot with a reason,
// expired, canceled; the last four hours are still open. $1 the queue ids, $3 the key, $4 n, $5
// the number of packages stored before.
const seedSQL = `
	WITH r AS (
		SELECT g, random() AS a, random() AS b, random() AS c, random() AS d, random() AS e, random() AS f,
			$2::timestamptz - random() * interval '60 days' AS created
		FROM generate_series($5::int + 1, $5::int + $4::int) g
	), s AS (
		SELECT r.*,
			CASE WHEN r.created > $2::timestamptz - interval '4 hours' THEN CASE WHEN r.a < 0.5 THEN 'queued' ELSE 'accepted' END
				WHEN r.a < 0.64 THEN 'resolved' WHEN r.a < 0.82 THEN 'returned_to_bot' WHEN r.a < 0.91 THEN 'expired'
				ELSE 'canceled' END AS status,
			(ARRAY['policy_boundary', 'low_confidence', 'tool_failure', 'user_request', 'sla_sentiment',
				'capability_mismatch'])[1 + floor(pow(r.e, 1.8) * 6)::int] AS trigger,
			'bot-' || floor(pow(r.f, 2) * 5)::int AS source,
			CASE WHEN r.d < 0.3 THEN 'loyal-' || floor(r.d / 0.3 * 30000)::int ELSE 'once-' || floor(random() * 500000)::int END AS contact,
			$1::bigint[] AS queues
		FROM r
	), t AS (
		SELECT s.*,
			CASE WHEN s.status IN ('resolved', 'returned_to_bot', 'accepted')
				THEN least(s.created + (-ln(1 - s.b) * 120) * interval '1 second', $2::timestamptz) END AS accepted
		FROM s
	)
	INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package,
		body_sha256, expires_at, created_at, enqueued_at, accepted_at, closed_at, outcome, rejections, updated_at)
	SELECT 'ho_bench_' || t.g, $3, t.queues[1 + floor(pow(t.c, 1.5) * cardinality(t.queues))::int], t.status,
		floor(random() * 4)::int, t.contact, t.source,
		json_build_object('schema_version', '1.0', 'handoff_id', 'ho_bench_' || t.g, 'trigger', t.trigger,
			'source_agent', t.source, 'contact', json_build_object('id', t.contact),
			'problem_statement', 'Customer asks about order ' || t.g || ' and a refund of its second item.'),
		'\x00', t.created + interval '1 day', t.created, t.created, t.accepted,
		CASE t.status
			WHEN 'resolved' THEN least(t.accepted + (-ln(1 - random()) * 1500) * interval '1 second', $2::timestamptz)
			WHEN 'returned_to_bot' THEN least(t.accepted + (-ln(1 - random()) * 600) * interval '1 second', $2::timestamptz)
			WHEN 'expired' THEN t.created + interval '4 hours'
			WHEN 'canceled' THEN t.created + (random() * 600) * interval '1 second' END,
		CASE t.status
			WHEN 'resolved' THEN (ARRAY['solved', 'refunded', 'workaround', 'no_fault_found', 'customer_unreachable'])[1 + floor(random() * 5)::int]
			WHEN 'returned_to_bot' THEN (ARRAY['resolved_by_policy', 'wrong_escalation', 'needs_more_info', 'out_of_scope', 'duplicate'])[1 + floor(random() * 5)::int]
			WHEN 'expired' THEN 'expired' WHEN 'canceled' THEN 'canceled' END,
		CASE WHEN random() < 0.08 THEN 1 ELSE 0 END, t.created
	FROM t`

// eventsSQL writes each package's log: queued, accepted when it was, and how it closed.
const eventsSQL = `
	INSERT INTO events (xid, at, kind, queue_id, handoff_id)
	SELECT '0'::xid8, e.at, e.kind, h.queue_id, h.id
	FROM handoffs h, LATERAL (VALUES (h.created_at, 'queued'), (h.accepted_at, 'accepted'),
		(h.closed_at, CASE WHEN h.closed_at IS NOT NULL THEN h.status END)) AS e(at, kind)
	WHERE e.at IS NOT NULL`

// benchAgents is how many agents hold the seeded packages.
const benchAgents = 40

// assignSQL gives each accepted package a holder among the agents $1, some far busier than others.
const assignSQL = `
	UPDATE handoffs SET assignee_id = ($1::bigint[])[1 + floor(pow(random(), 1.5) * cardinality($1::bigint[]))::int]
	WHERE accepted_at IS NOT NULL`

// repliesSQL writes a reply record, by the package's holder, for 40% of the accepted packages, a
// minute after the accept, 55% of them the draft as is.
const repliesSQL = `
	INSERT INTO evals (kind, handoff_id, queue_id, editor_id, at, source_agent, source_run_id, trigger,
		draft, final, word_diff, unified_diff, edit_distance_chars, edit_distance_words, accepted_as_is, tags, editing_ms)
	SELECT 'reply', h.id, h.queue_id, h.assignee_id, h.accepted_at + interval '1 minute', h.source_agent, 'run', h.trigger,
		'Your refund is on its way.', CASE WHEN h.as_is THEN 'Your refund is on its way.' ELSE 'Your refund is on its way, sorry for the wait.' END,
		'[]', '', CASE WHEN h.as_is THEN 0 ELSE 20 END, CASE WHEN h.as_is THEN 0 ELSE 4 END, h.as_is, '{}', 0
	FROM (SELECT *, random() < 0.55 AS as_is FROM handoffs WHERE accepted_at IS NOT NULL AND random() < 0.4) h`

// BenchmarkDashboard is make bench-dashboard: it seeds a desk of a million packages with their
// events and replies, builds the rollup and times a refresh after an hour's activity, then times,
// for all queues and for the busiest queue over each window, the direct reads, the rollup's and
// the whole Read as the page runs it, beside a count(*) of the same rows as the baseline.
func BenchmarkDashboard(b *testing.B) {
	ctx := context.Background()
	db := pgtest.New(b)
	n := benchPackages
	if v := os.Getenv("BENCH_PACKAGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	now := time.Now().Truncate(time.Second)
	started := time.Now()
	desk := seedBench(b, db, n, now)
	b.Logf("seeded %d packages with their events and replies in %s", n, time.Since(started).Round(time.Second))
	started = time.Now()
	built, err := Rebuild(ctx, db)
	if err != nil {
		b.Fatal(err)
	}
	fmt.Printf("rollup built: %d hours in %s\n", built.Hours, time.Since(started).Round(time.Millisecond))
	refreshCost(b, db, now)

	reads := []struct {
		name string
		read func(context.Context, pgx.Tx, queues, *Stats) error
	}{
		{"direct: outcomes+percentiles", readOutcomes}, {"direct: mix", readMix},
		{"direct: drafts", readDrafts}, {"direct: series", readSeries},
		{"rollup: hours summed", func(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
			hs, err := readHours(ctx, tx, q, s.Previous.From, s.Current.To, s.Window.Bucket)
			if err == nil {
				s.Queues = nil
				s.estimate(s.sum(hs, q))
			}
			return err
		}},
		{"Read (rollup, as served)", nil},
		{"baseline count(*)", func(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
			rows, err := tx.Query(ctx, `SELECT h.created_at >= $3, count(*) FROM handoffs h WHERE `+span+` GROUP BY 1`,
				q.ids, s.Previous.From, s.Current.From, s.Current.To)
			if err != nil {
				return err
			}
			var current bool
			var n int
			_, err = pgx.ForEachRow(rows, []any{&current, &n}, func() error {
				s.pick(current).In = n
				return nil
			})
			return err
		}},
	}
	const runs = 25
	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	var table strings.Builder
	table.WriteString("query\tqueues\twindow\trows\tp50 ms\tp95 ms\tp50 ÷ count(*) p50\t\n")
	for _, w := range Windows() {
		for _, scope := range []string{"", desk.names[desk.order[0]]} {
			f := Filter{Queue: scope, Window: w, Now: now}
			label := scope
			if label == "" {
				label = "all"
			}
			var base time.Duration
			var rows int // in both windows, as the baseline counts them
			// The baseline first, so that each query's row can give its ratio to it.
			for _, r := range slices.Concat(reads[len(reads)-1:], reads[:len(reads)-1]) {
				var ds []time.Duration
				for range runs {
					var d time.Duration
					var s Stats
					var err error
					if r.read != nil {
						d, s, err = timeRead(ctx, db, f, r.read)
					} else {
						start := time.Now()
						_, err = Read(ctx, db, f)
						d = time.Since(start)
					}
					if err != nil {
						b.Fatalf("%s: %v", r.name, err)
					}
					ds = append(ds, d)
					if base == 0 {
						rows = s.Current.In + s.Previous.In
					}
				}
				slices.Sort(ds)
				p50, p95 := ds[len(ds)/2], ds[len(ds)*95/100]
				if base == 0 {
					base = p50
				}
				fmt.Fprintf(&table, "%s\t%s\t%s\t%d\t%.1f\t%.1f\t×%.1f\t\n", r.name, label, w.Name, rows, ms(p50), ms(p95),
					float64(p50)/float64(base))
			}
		}
	}
	if _, err := out.Write([]byte(table.String())); err != nil {
		b.Fatal(err)
	}
	if err := out.Flush(); err != nil {
		b.Fatal(err)
	}
	compareWithoutIndex(b, db, now)
}

// refreshCost times the job's run after an hour of a busy desk's activity, simulated in the log:
// a change to every package that arrived in the last five hours (new packages, accepts and closes
// land there) and to one in a hundred of the week's (a late return or reopen), each an events row
// of its own transaction's xid, as actions write them. Median of five.
func refreshCost(b *testing.B, db *pgxpool.Pool, now time.Time) {
	b.Helper()
	ctx := context.Background()
	var ds []time.Duration
	var hours, changed int
	for range 5 {
		tag, err := db.Exec(ctx, `
			INSERT INTO events (at, kind, queue_id, handoff_id)
			SELECT $1, 'accepted', h.queue_id, h.id FROM handoffs h
			WHERE h.created_at >= $1::timestamptz - interval '5 hours'
				OR (h.created_at >= $1::timestamptz - interval '7 days' AND random() < 0.01)`, now)
		if err != nil {
			b.Fatal(err)
		}
		changed = int(tag.RowsAffected())
		start := time.Now()
		r, err := Refresh(ctx, db)
		if err != nil || !r.Ran {
			b.Fatalf("refresh: %+v, %v", r, err)
		}
		ds = append(ds, time.Since(start))
		hours = r.Hours
	}
	slices.Sort(ds)
	fmt.Printf("refresh after an hour's activity (%d changes over %d hours): median %.0f ms, min %.0f, max %.0f (5 runs)\n",
		changed, hours, ms(ds[2]), ms(ds[0]), ms(ds[4]))
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// timeRead runs one read as Read runs it: in a read-only snapshot with Read's work_mem.
func timeRead(ctx context.Context, db *pgxpool.Pool, f Filter, read func(context.Context, pgx.Tx, queues, *Stats) error) (time.Duration, Stats, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return 0, Stats{}, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`); err != nil {
		return 0, Stats{}, err
	}
	if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '64MB'`); err != nil {
		return 0, Stats{}, err
	}
	q, err := queuesOf(ctx, tx, f.Queue)
	if err != nil {
		return 0, Stats{}, err
	}
	cur, prev := f.Window.Periods(f.Now)
	s := Stats{Window: f.Window, Current: Figures{Period: cur}, Previous: Figures{Period: prev}}
	for _, id := range q.order { // the bars the drafts fill in
		s.Queues = append(s.Queues, QueueFigures{Queue: q.names[id]})
	}
	start := time.Now()
	err = read(ctx, tx, q, &s)
	return time.Since(start), s, err
}

// seedBench makes the queues, the key and the agents, stores n packages and returns the queues,
// the busiest first.
func seedBench(b testing.TB, db *pgxpool.Pool, n int, now time.Time) queues {
	b.Helper()
	ctx := context.Background()
	qs := queue.NewService(db)
	var ids []int64
	q := queues{names: map[int64]string{}}
	for _, name := range []string{"billing", "orders", "refunds", "fraud", "shipping", "accounts", "returns", "vip"} {
		created, err := qs.Create(ctx, queue.New{Name: name})
		if err != nil {
			b.Fatal(err)
		}
		ids = append(ids, created.ID)
		q.names[created.ID] = name
	}
	q.ids, q.order = ids, ids
	as := auth.NewService(db)
	// The desk's agents: each accepted package is held by one of them, who sent its replies.
	var agents []int64
	for i := range benchAgents {
		agent, err := as.CreateUser(ctx, auth.NewUser{Email: fmt.Sprintf("bench%d@example.com", i), DisplayName: fmt.Sprintf("Bench %d", i),
			Role: auth.RoleAgent, Password: "long-enough-password"})
		if err != nil {
			b.Fatal(err)
		}
		agents = append(agents, agent.ID)
	}
	key, err := as.CreateAPIKey(ctx, auth.NewAPIKey{Name: "bench", QueueIDs: ids})
	if err != nil {
		b.Fatal(err)
	}
	// In chunks: one statement over a million rows would hold all its random draws in one sort.
	const chunk = 250_000
	for done := 0; done < n; done += chunk {
		if _, err := db.Exec(ctx, seedSQL, ids, now, key.ID, min(chunk, n-done), done); err != nil {
			b.Fatal(err)
		}
	}
	// Intake decides repeat contacts as packages arrive; the seed decides them afterwards, as
	// migration 00015 does for the packages stored before it.
	if _, err := db.Exec(ctx, `
		UPDATE handoffs h SET repeat_contact = true
		WHERE EXISTS (SELECT 1 FROM handoffs r WHERE r.contact_id = h.contact_id AND r.status IN ('resolved', 'returned_to_bot')
			AND r.closed_at < h.created_at AND r.closed_at >= h.created_at - interval '7 days')`); err != nil {
		b.Fatal(err)
	}
	for _, step := range []struct {
		sql  string
		args []any
	}{{assignSQL, []any{agents}}, {eventsSQL, nil}, {repliesSQL, nil}} {
		if _, err := db.Exec(ctx, step.sql, step.args...); err != nil {
			b.Fatal(err)
		}
	}
	// Index-only scans need the visibility map, which autovacuum keeps on a live desk.
	for _, t := range []string{"handoffs", "events", "evals"} {
		if _, err := db.Exec(ctx, `VACUUM (ANALYZE) `+t); err != nil {
			b.Fatal(err)
		}
	}
	return q
}

// compareWithoutIndex measures what handoffs_figures_idx buys and costs: the 30-day read of all
// queues without it (the planner falls back to the heap), and the time to insert 20,000 packages
// with and without it. Both run in transactions that roll back.
func compareWithoutIndex(b *testing.B, db *pgxpool.Pool, now time.Time) {
	b.Helper()
	ctx := context.Background()
	var key int64
	var ids []int64
	if err := db.QueryRow(ctx, `SELECT (SELECT id FROM api_keys LIMIT 1), (SELECT array_agg(id ORDER BY id) FROM queues)`).Scan(&key, &ids); err != nil {
		b.Fatal(err)
	}
	insert := func(drop bool) time.Duration {
		tx, err := db.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		if drop {
			if _, err := tx.Exec(ctx, `DROP INDEX handoffs_figures_idx`); err != nil {
				b.Fatal(err)
			}
		}
		start := time.Now()
		if _, err := tx.Exec(ctx, seedSQL, ids, now, key, 20_000, 1<<30-20_000); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	var with, without []time.Duration
	for range 5 {
		with = append(with, insert(false))
		without = append(without, insert(true))
	}
	slices.Sort(with)
	slices.Sort(without)
	fmt.Printf("insert 20,000 packages: median %.0f ms with handoffs_figures_idx, %.0f ms without (×%.2f)\n",
		ms(with[2]), ms(without[2]), float64(with[2])/float64(without[2]))

	w := Windows()[2]
	tx, err := db.Begin(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `DROP INDEX handoffs_figures_idx`); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '64MB'`); err != nil {
		b.Fatal(err)
	}
	q, err := queuesOf(ctx, tx, "")
	if err != nil {
		b.Fatal(err)
	}
	var ds []time.Duration
	for range 3 {
		cur, prev := w.Periods(now)
		s := Stats{Window: w, Current: Figures{Period: cur}, Previous: Figures{Period: prev}}
		start := time.Now()
		if err := readOutcomes(ctx, tx, q, &s); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(start))
	}
	slices.Sort(ds)
	fmt.Printf("outcomes+percentiles, all queues, 30d, without handoffs_figures_idx: median %.0f ms\n", ms(ds[1]))
}
