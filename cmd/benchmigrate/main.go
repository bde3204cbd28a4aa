// Command benchmigrate measures what an upgrade costs the desk's writers: a database at the
// previous release's schema holding many packages is upgraded by the real `web migrate` while
// bots post packages, agents claim them and people sign in, and the report gives the longest any
// write waited during the upgrade beside the longest before it, and how long the upgrade took.
//
// The writers are plain SQL shaped like the previous release's intake, claim and sign-in: during
// a rolling deploy, those are the instances writing while the new release migrates. A control
// run then builds one index on the packages the old way (plain CREATE INDEX in a transaction: the
// covering index of migration 00015), to show what the meter reads when an upgrade does hold
// writes. The
// database is dropped at exit.
package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/migrations"
)

const (
	// previousRelease is the schema production runs before this release: migration 00023.
	previousRelease = 23
	// target is the longest a write may wait while the desk upgrades.
	target = time.Second
	// seedChunk packages go in per INSERT, so that the seed reports progress and no statement
	// holds gigabytes of WAL.
	seedChunk = 50_000
	queues    = 20
	agents    = 50
)

func main() {
	loadtest.Main("benchmigrate", func(ctx context.Context) error { return run(ctx, os.Args, os.Getenv, os.Stdout) })
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	var adminURL string
	fs := loadtest.NewFlagSet("benchmigrate", getenv, &adminURL)
	packages := fs.Int("packages", 1_000_000, "packages stored before the upgrade (BENCH_PACKAGES in make bench-migrate)")
	web := fs.String("web", "bin/web", "the web binary whose `migrate` upgrades the database")
	from := fs.Int64("from", previousRelease, "the migration the database is at before the upgrade")
	baseline := fs.Duration("baseline", 15*time.Second, "how long the writers run before the upgrade")
	control := fs.Bool("control", true, "then build one index the old way, to show a stall the meter sees")
	if err := loadtest.ParseFlags(fs, args[1:]); err != nil {
		return err
	}
	if *packages < 1 {
		return errors.New("-packages: want at least 1")
	}
	loadtest.PrintHeader(out, loadtest.CommandLine(fs), "PostgreSQL, the writers and `web migrate`")
	server, _, err := loadtest.DescribeServer(ctx, adminURL, "synchronous_commit", "maintenance_work_mem")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "PostgreSQL: %s\n", server)

	cleanup := &loadtest.Cleanup{}
	defer func() {
		if err := cleanup.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "teardown: %v\n", err)
		}
	}()
	_, dbURL, err := cleanup.ScratchDatabase(ctx, adminURL, "bench_migrate_")
	if err != nil {
		return err
	}
	poolURL, err := loadtest.PoolURL(dbURL, 12)
	if err != nil {
		return err
	}
	db, err := pgxpool.New(ctx, poolURL.String())
	if err != nil {
		return err
	}
	cleanup.Add(func() error { db.Close(); return nil })

	start := time.Now()
	if err := previous(ctx, db, *from); err != nil {
		return err
	}
	ids, err := seed(ctx, db, *packages, out)
	if err != nil {
		return err
	}
	var size string
	if err := db.QueryRow(ctx, `SELECT pg_size_pretty(pg_total_relation_size('handoffs'))`).Scan(&size); err != nil {
		return err
	}
	fmt.Fprintf(out, "seeded:     %d packages at migration %d (handoffs %s, with its indexes) in %s\n",
		*packages, *from, size, time.Since(start).Round(time.Second))

	w := newWriters(db, ids)
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	done := w.start(loadCtx)

	fmt.Fprintf(out, "load:       %s before the upgrade; load average %s\n", *baseline, loadtest.LoadAverage())
	if err := loadtest.Sleep(ctx, *baseline); err != nil {
		return err
	}
	upStart := time.Now()
	log, migrateErr := migrate(ctx, *web, dbURL)
	upEnd := time.Now()
	if migrateErr != nil {
		return fmt.Errorf("web migrate: %w\n%s", migrateErr, log)
	}
	loadDuringUpgrade := loadtest.LoadAverage()
	if err := loadtest.Sleep(ctx, 2*time.Second); err != nil {
		return err
	}
	var ctlStart, ctlEnd time.Time
	if *control {
		ctlStart = time.Now()
		if _, err := db.Exec(ctx, `CREATE INDEX bench_old_way_idx ON handoffs (queue_id, created_at)
			INCLUDE (status, accepted_at, closed_at, rejections, outcome, trigger, source_agent, repeat_contact)`); err != nil {
			return err
		}
		ctlEnd = time.Now()
		if _, err := db.Exec(ctx, `DROP INDEX CONCURRENTLY bench_old_way_idx`); err != nil {
			return err
		}
		if err := loadtest.Sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	stopLoad()
	<-done

	var version int64
	if err := db.QueryRow(ctx, `SELECT max(version_id) FROM goose_db_version`).Scan(&version); err != nil {
		return err
	}
	retries := strings.Count(log, "migration could not take its lock")
	fmt.Fprintf(out, "upgrade:    `%s migrate` from %d to %d took %s (%d lock retries); load average %s\n\n",
		*web, *from, version, upEnd.Sub(upStart).Round(time.Millisecond), retries, loadDuringUpgrade)

	before := w.between(upStart.Add(-*baseline), upStart)
	during := w.between(upStart, upEnd)
	fmt.Fprintf(out, "%-34s %8s %10s %10s %10s\n", "writes", "count", "p50", "p99", "max")
	row := func(name string, r []sample) {
		lat := latencies(r)
		fmt.Fprintf(out, "%-34s %8d %10s %10s %10s\n", name, len(lat),
			loadtest.Millis(loadtest.Percentile(lat, 50)), loadtest.Millis(loadtest.Percentile(lat, 99)), loadtest.Millis(loadtest.Percentile(lat, 100)))
	}
	for _, kind := range kinds {
		row(kind+", before the upgrade", only(before, kind))
		row(kind+", during the upgrade", only(during, kind))
	}
	stall := loadtest.Percentile(latencies(during), 100)
	if *control {
		old := w.between(ctlStart, ctlEnd)
		row("all, during the old-way index", old)
		fmt.Fprintf(out, "\nold way:    00015's covering index on handoffs, plain CREATE INDEX, took %s; longest write %s\n",
			ctlEnd.Sub(ctlStart).Round(time.Millisecond), loadtest.Millis(loadtest.Percentile(latencies(old), 100)))
	}
	fmt.Fprintf(out, "\nlongest write stall during the upgrade: %s (before it: %s); target ≤ %s: %s\n",
		loadtest.Millis(stall), loadtest.Millis(loadtest.Percentile(latencies(before), 100)), target, loadtest.Verdict(stall <= target))
	if longest, ok := slowest(during); ok {
		fmt.Fprintf(out, "            the longest (%s) started %s into the upgrade, while %s ran\n", longest.kind,
			longest.start.Sub(upStart).Round(time.Millisecond), runningAt(log, upStart, longest.start, longest.start.Add(longest.latency)))
	}
	if n := w.errors.Count(); n > 0 {
		fmt.Fprintf(out, "write errors: %d, e.g. %q\n", n, w.errors.Samples())
	}
	fmt.Fprintf(out, "load average at the end: %s\n", loadtest.LoadAverage())
	return nil
}

// previous migrates the fresh database to the previous release's schema, as production has it.
func previous(ctx context.Context, db *pgxpool.Pool, version int64) error {
	sqlDB := stdlib.OpenDBFromPool(db)
	defer func() { _ = sqlDB.Close() }() // hands its connections back to the pool
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	if err != nil {
		return err
	}
	_, err = provider.UpTo(ctx, version)
	return err
}

// ids are the rows the writers refer to.
type ids struct {
	bot       int64
	queues    []int64
	agents    []int64
	addresses []string
}

// seed stores n packages shaped like real ones (a package of about 4 kB with its transcript, the mix of statuses of
// a desk that has run for two months, an event per package), a bot, queues, agents and their
// memberships, then analyzes the tables as autovacuum would have.
func seed(ctx context.Context, db *pgxpool.Pool, n int, out io.Writer) (ids, error) {
	var s ids
	if err := db.QueryRow(ctx, `INSERT INTO api_keys (name, key_prefix, key_hash, webhook_secret)
		VALUES ('bench-bot', 'hdk_bench', '\x01', 'secret') RETURNING id`).Scan(&s.bot); err != nil {
		return s, err
	}
	if err := collect(ctx, db, &s.queues, `INSERT INTO queues (name) SELECT 'bench_' || g FROM generate_series(1, $1) g RETURNING id`, queues); err != nil {
		return s, err
	}
	if err := collect(ctx, db, &s.agents, `INSERT INTO users (email, display_name, role, password_hash, capacity)
		SELECT 'Agent' || g || '@Example.com', 'Agent ' || g, 'agent', 'x', 1000000 FROM generate_series(1, $1) g RETURNING id`, agents); err != nil {
		return s, err
	}
	for i := range agents {
		s.addresses = append(s.addresses, fmt.Sprintf("Agent%d@Example.com", i+1))
	}
	if _, err := db.Exec(ctx, `INSERT INTO queue_members (queue_id, user_id) SELECT q, u FROM unnest($1::bigint[]) q, unnest($2::bigint[]) u`, s.queues, s.agents); err != nil {
		return s, err
	}
	for done := 0; done < n; done += seedChunk {
		if _, err := db.Exec(ctx, seedSQL, done, min(seedChunk, n-done), s.bot, s.queues, s.agents); err != nil {
			return s, fmt.Errorf("seeding packages: %w", err)
		}
		fmt.Fprintf(out, "\rseeding:    %d of %d packages", min(done+seedChunk, n), n)
	}
	fmt.Fprintln(out)
	if _, err := db.Exec(ctx, `INSERT INTO events (at, kind, queue_id, handoff_id, actor_bot) SELECT created_at, 'queued', queue_id, id, api_key_id FROM handoffs`); err != nil {
		return s, fmt.Errorf("seeding events: %w", err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO login_failures (email, at, address) SELECT 'Someone' || g || '@Example.com', now(), '192.0.2.' || g % 250 FROM generate_series(1, 2000) g`); err != nil {
		return s, err
	}
	_, err := db.Exec(ctx, `ANALYZE`)
	return s, err
}

func collect(ctx context.Context, db *pgxpool.Pool, into *[]int64, query string, n int) error {
	rows, err := db.Query(ctx, query, n)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return err
		}
		*into = append(*into, id)
	}
	return rows.Err()
}

// seedSQL writes packages $1+1 … $1+$2: most closed, those of the last hours queued or accepted.
const seedSQL = `
	WITH r AS (
		SELECT g, random() AS a, now() - random() * interval '60 days' AS created,
			($4::bigint[])[1 + (g % cardinality($4::bigint[]))] AS queue,
			($5::bigint[])[1 + (g % cardinality($5::bigint[]))] AS agent
		FROM generate_series($1::int + 1, $1::int + $2::int) g
	), s AS (
		SELECT r.*, CASE WHEN r.created > now() - interval '4 hours' THEN CASE WHEN r.a < 0.5 THEN 'queued' ELSE 'accepted' END
			WHEN r.a < 0.7 THEN 'resolved' WHEN r.a < 0.85 THEN 'returned_to_bot' ELSE 'expired' END AS status
		FROM r
	)
	INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package,
		body_sha256, assignee_id, created_at, enqueued_at, expires_at, accepted_at, closed_at, outcome, updated_at)
	SELECT 'ho_bench_' || g, $3, queue, status, g % 4, 'contact-' || (g % 300000), 'bot-' || (g % 5),
		json_build_object('schema_version', '1.0', 'handoff_id', 'ho_bench_' || g, 'trigger', 'low_confidence',
			'source_agent', 'bot-' || (g % 5), 'contact', json_build_object('id', 'contact-' || (g % 300000), 'email', 'c' || g || '@example.com'),
			'problem_statement', 'Customer asks about order ' || g || ' and a refund of its second item.',
			'transcript', (SELECT json_agg(json_build_object('role', CASE WHEN t % 2 = 0 THEN 'user' ELSE 'assistant' END,
				'text', 'Message ' || t || ' about order ' || g || ': the parcel arrived damaged and the customer would like the second item refunded to the card it was paid with.'))
				FROM generate_series(1, 40) t)),
		sha256(g::text::bytea), CASE WHEN status <> 'queued' AND status <> 'expired' THEN agent END,
		created, created, created + interval '1 day',
		CASE WHEN status IN ('accepted', 'resolved', 'returned_to_bot') THEN created + interval '2 minutes' END,
		CASE WHEN status IN ('resolved', 'returned_to_bot', 'expired') THEN created + interval '30 minutes' END,
		CASE status WHEN 'resolved' THEN 'solved' WHEN 'returned_to_bot' THEN 'out_of_scope' WHEN 'expired' THEN 'expired' END,
		created
	FROM s`

// kinds are the writes of the previous release the desk makes all day.
var kinds = []string{"intake", "claim", "sign-in"}

type sample struct {
	kind    string
	start   time.Time
	latency time.Duration
}

type writers struct {
	db     *pgxpool.Pool
	ids    ids
	mu     sync.Mutex
	done   []sample
	errors loadtest.ErrorLog
}

func newWriters(db *pgxpool.Pool, ids ids) *writers { return &writers{db: db, ids: ids} }

// start runs two bots posting, two agents claiming and one stream of sign-ins, each one write at
// a time with a short pause between, until ctx ends; the channel closes when they have stopped.
func (w *writers) start(ctx context.Context) <-chan struct{} {
	var wg sync.WaitGroup
	loop := func(kind string, write func(ctx context.Context, i int) error) {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				t := time.Now()
				err := write(ctx, i)
				if ctx.Err() != nil {
					return
				}
				if err != nil {
					w.errors.Add(fmt.Errorf("%s: %w", kind, err))
				}
				w.mu.Lock()
				w.done = append(w.done, sample{kind: kind, start: t, latency: time.Since(t)})
				w.mu.Unlock()
				_ = loadtest.Sleep(ctx, 10*time.Millisecond)
			}
		})
	}
	for b := range 2 {
		loop("intake", func(ctx context.Context, i int) error {
			q := w.ids.queues[(i+b)%len(w.ids.queues)]
			_, err := w.db.Exec(ctx, `WITH h AS (
				INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package, body_sha256, expires_at)
				VALUES ($1, $2, $3, 'queued', 1, $4, 'bot-1', json_build_object('schema_version', '1.0', 'handoff_id', $1::text), sha256($1::bytea), now() + interval '1 day')
				RETURNING id, queue_id)
				INSERT INTO events (kind, queue_id, handoff_id, actor_bot) SELECT 'queued', queue_id, id, $2 FROM h`,
				fmt.Sprintf("ho_load_%d_%d_%d", b, i, time.Now().UnixNano()), w.ids.bot, q, "contact-load-"+strconv.Itoa(i))
			return err
		})
	}
	for a := range 2 {
		loop("claim", func(ctx context.Context, i int) error {
			agent := w.ids.agents[a]
			q := w.ids.queues[(i+a)%len(w.ids.queues)]
			_, err := w.db.Exec(ctx, `WITH c AS (
				SELECT id FROM handoffs WHERE queue_id = $1 AND status = 'queued' ORDER BY priority_rank, enqueued_at, id LIMIT 1 FOR UPDATE SKIP LOCKED
			), u AS (
				UPDATE handoffs h SET status = 'accepted', assignee_id = $2, accepted_at = now(), updated_at = now() FROM c WHERE h.id = c.id RETURNING h.id, h.queue_id)
			INSERT INTO events (kind, queue_id, handoff_id, actor_user) SELECT 'accepted', queue_id, id, $2 FROM u`, q, agent)
			return err
		})
	}
	loop("sign-in", func(ctx context.Context, i int) error {
		// A failed attempt is counted, a good one stamps the user: the two writes of a sign-in.
		if i%2 == 0 {
			_, err := w.db.Exec(ctx, `INSERT INTO login_failures (email, address) VALUES ($1, '192.0.2.1')`, w.ids.addresses[i%len(w.ids.addresses)])
			return err
		}
		_, err := w.db.Exec(ctx, `UPDATE users SET last_login_at = now() WHERE id = $1`, w.ids.agents[i%len(w.ids.agents)])
		return err
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	return done
}

// between returns the writes that started in [from, to).
func (w *writers) between(from, to time.Time) []sample {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []sample
	for _, s := range w.done {
		if !s.start.Before(from) && s.start.Before(to) {
			out = append(out, s)
		}
	}
	return out
}

func only(samples []sample, kind string) []sample {
	return slices.DeleteFunc(slices.Clone(samples), func(s sample) bool { return s.kind != kind })
}

func latencies(samples []sample) []time.Duration {
	out := make([]time.Duration, len(samples))
	for i, s := range samples {
		out[i] = s.latency
	}
	slices.Sort(out)
	return out
}

// slowest is the write of samples that took longest.
func slowest(samples []sample) (sample, bool) {
	if len(samples) == 0 {
		return sample{}, false
	}
	return slices.MaxFunc(samples, func(a, b sample) int { return cmp.Compare(a.latency, b.latency) }), true
}

// appliedRe reads a "migration applied" line of the runner's log: the file and how long it ran.
var appliedRe = regexp.MustCompile(`msg="migration applied" source=(\S+) duration=(\S+)`)

// runningAt names the migrations that ran between from and to, for the report to say which one a
// stall came from. The runner logs the migrations once they are all applied, each with how long it
// ran, so each one's time is placed after the ones before it from start: within the runner's own
// few milliseconds between files (and, after a lock retry, less exactly).
func runningAt(log string, start, from, to time.Time) string {
	var names []string
	at := start
	for _, m := range appliedRe.FindAllStringSubmatch(log, -1) {
		took, err := time.ParseDuration(m[2])
		if err != nil {
			continue
		}
		if at.Before(to) && at.Add(took).After(from) {
			names = append(names, m[1])
		}
		at = at.Add(took)
	}
	if len(names) == 0 {
		return "no migration (between two files, or a lock retry's wait)"
	}
	return strings.Join(names, ", ")
}

// migrate runs the real binary's deploy step and returns what it logged.
func migrate(ctx context.Context, web, dbURL string) (string, error) {
	if _, err := os.Stat(web); err != nil {
		return "", fmt.Errorf("%w (make bench-migrate builds it; -web names another)", err)
	}
	var log bytes.Buffer
	cmd := exec.CommandContext(ctx, web, "migrate") //nolint:gosec // G204: the operator's own -web binary.
	cmd.Env = append(os.Environ(), "DATABASE_URL="+dbURL)
	cmd.Stdout, cmd.Stderr = &log, &log
	err := cmd.Run()
	return log.String(), err
}
