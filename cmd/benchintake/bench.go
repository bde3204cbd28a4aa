package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/instance"
	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/server"
)

// config is what one benchmark measures.
type config struct {
	adminURL    string // a database the tool can CREATE DATABASE from
	examplePath string // the package the bodies are built from
	duration    time.Duration
	runs        int
	concurrency []int
	sizes       []int
	modes       []string // the transfer modes intake is measured in, each beside the same baseline
	serverConns int      // pool_max_conns of the server's pool
	cpuProfile  string   // file for a CPU profile of the measurements, if set
}

// Each measurement starts with a warm-up of this fraction of its duration, not recorded, so that
// new connections (both pools are fresh at every baseline/intake switch) and cold caches are
// paid before the clock starts.
const warmupFraction = 10

const (
	baselineInsert = `INSERT INTO bench_raw (body) VALUES ($1)`
	intakePath     = "/api/v1/handoffs"
)

// sample is one measurement of one side.
type sample struct {
	ops      int
	window   time.Duration
	p50, p99 time.Duration
	cpu      cpuUse // during the window
}

func (s sample) rate() float64 { return float64(s.ops) / s.window.Seconds() }

// cpuPerOp is the CPU time of this process and of the PostgreSQL backends per operation;
// postgres is negative when unknown.
func (s sample) cpuPerOp() (self, postgres time.Duration) {
	if s.ops == 0 {
		return 0, -1
	}
	self, postgres = s.cpu.self/time.Duration(s.ops), s.cpu.postgres/time.Duration(s.ops)
	if !s.cpu.postgresKnown {
		postgres = -1
	}
	return self, postgres
}

// cell holds the runs of every side at one concurrency and body size.
type cell struct {
	concurrency, size int
	baseline          []sample
	baselineErrs      int
	modes             []modeRuns // in the order of config.modes
}

// modeRuns are the intake runs of one transfer mode in a cell, the nth beside the nth baseline.
type modeRuns struct {
	mode   string
	intake []sample
	errs   int
}

// result is everything the report prints.
type result struct {
	database     string // the bench database's name, dropped by the time measure returns
	cells        []cell
	errorSamples []string
	handoffs     int64 // rows left in handoffs and the webhook outbox at the end
	outbox       int64
	warm         int64 // warm packages, and warm_timeout webhooks, among them
	warmTimeouts int64
}

func (r result) errors() int {
	n := 0
	for _, c := range r.cells {
		n += c.baselineErrs
		for _, m := range c.modes {
			n += m.errs
		}
	}
	return n
}

// bench is the running set-up: a fresh database served by the real server in-process.
type bench struct {
	dbName string
	dbURL  string        // the bench database, for the baseline pool
	db     *pgxpool.Pool // the server's pool
	url    string        // the server's base URL
	auth   *auth.Service
	queues *queue.Service
	client *http.Client
	meter  *meter
	ids    atomic.Uint64 // makes every body a new package for a new contact
	runs   int           // intake runs so far, which names each run's queue
}

// measure sets up, runs every measurement and tears down, printing the set-up and one line per
// run to out. Errors of single operations are counted in the result, not returned.
func measure(ctx context.Context, cfg config, out io.Writer) (res result, err error) {
	// templates[size][mode]
	templates := make([][]template, len(cfg.sizes))
	for i, size := range cfg.sizes {
		for _, mode := range cfg.modes {
			t, err := newTemplate(cfg.examplePath, size, mode)
			if err != nil {
				return result{}, err
			}
			// A body the server would refuse should fail here, not after the first baseline run.
			if _, err := handoff.Decode(t.body(0)); err != nil {
				return result{}, fmt.Errorf("the %d-byte %s body is not a valid package: %w", size, mode, err)
			}
			templates[i] = append(templates[i], t)
		}
	}
	b, pgInfo, teardown, err := setUp(ctx, cfg, slices.Max(cfg.concurrency))
	if err != nil {
		return result{}, errors.Join(err, teardown())
	}
	defer func() { err = errors.Join(err, teardown()) }()
	res.database = b.dbName

	fmt.Fprintf(out, "PostgreSQL: %s\n", pgInfo)
	fmt.Fprintf(out, "database:   %s (fresh, migrated, dropped at exit)\n", loadtest.Redacted(b.dbURL))
	fmt.Fprintf(out, "server:     instance.Run in-process on %s (server, live hub, coalesced NOTIFY, webhook deliverer, sweeper), pool_max_conns=%d\n", b.url, cfg.serverConns)
	fmt.Fprintf(out, "queues:     a new queue and API key per intake run (%s, ...), default guards; every package has its own handoff_id and contact.id\n", queueName(1))
	fmt.Fprintf(out, "            (intake answers each package's position by counting the packages waiting ahead of it, so one queue\n")
	fmt.Fprintf(out, "            growing across runs would slow the later ones; each run's queue starts empty and ends ≈ ops/s × %s deep)\n", cfg.duration+cfg.duration/warmupFraction)
	for _, ts := range templates {
		t := ts[0]
		fmt.Fprintf(out, "body:       %d bytes exactly, every request (%s with its own ids, the run's queue as target_profile, %d transcript turns)\n", len(t.raw), filepath.Base(cfg.examplePath), t.turns)
	}
	fmt.Fprintf(out, "modes:      transfer_mode %s (the only byte that differs); nobody of the queues is online, so every warm package\n", strings.Join(cfg.modes, ", "))
	fmt.Fprintf(out, "            rings nobody: its bot hears warm_timeout no_agent_online and its 201 carries estimated_wait_seconds\n")
	fmt.Fprintf(out, "baseline:   %s, autocommit, one pgxpool connection per worker\n", baselineInsert)
	fmt.Fprintf(out, "intake:     POST %s, Authorization: Bearer, one shared http.Transport\n", intakePath)
	fmt.Fprintf(out, "each run:   %s warm-up (not recorded) + %s measured; order baseline, %s, baseline, ...\n", cfg.duration/warmupFraction, cfg.duration, strings.Join(cfg.modes, ", "))
	fmt.Fprintf(out, "load:       %s (1, 5, 15 min) at the start\n\n", loadtest.LoadAverage())

	stopProfile, err := loadtest.StartCPUProfile(cfg.cpuProfile)
	if err != nil {
		return result{}, err
	}
	defer func() { err = errors.Join(err, stopProfile()) }()

	errs := &loadtest.ErrorLog{}
	for _, n := range cfg.concurrency {
		for i, ts := range templates {
			c := cell{concurrency: n, size: cfg.sizes[i]}
			for _, mode := range cfg.modes {
				c.modes = append(c.modes, modeRuns{mode: mode})
			}
			for run := 1; run <= cfg.runs; run++ {
				base, baseErrs, err := b.baseline(ctx, cfg, n, ts[0], errs)
				if err != nil {
					return result{}, err
				}
				c.baseline = append(c.baseline, base)
				c.baselineErrs += baseErrs
				line := fmt.Sprintf("run %d/%d  bots=%-3d size=%-6d baseline %7.0f ops/s p50 %-8s p99 %-8s cpu/op %s",
					run, cfg.runs, n, c.size, base.rate(), loadtest.Millis(base.p50), loadtest.Millis(base.p99), cpuPerOp(base))
				for m, t := range ts {
					in, inErrs, err := b.intake(ctx, cfg, n, t, errs)
					if ctx.Err() != nil {
						return result{}, fmt.Errorf("interrupted: %w", ctx.Err())
					}
					if err != nil {
						return result{}, err
					}
					c.modes[m].intake = append(c.modes[m].intake, in)
					c.modes[m].errs += inErrs
					line += fmt.Sprintf(" | %s %6.0f ops/s p50 %-8s p99 %-8s cpu/op %s errors %d",
						c.modes[m].mode, in.rate(), loadtest.Millis(in.p50), loadtest.Millis(in.p99), cpuPerOp(in), inErrs)
				}
				fmt.Fprintln(out, line)
			}
			res.cells = append(res.cells, c)
		}
	}
	res.errorSamples = errs.Samples()
	err = b.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM handoffs), (SELECT count(*) FROM webhook_outbox),
		(SELECT count(*) FROM handoffs WHERE package->>'transfer_mode' = 'warm'),
		(SELECT count(*) FROM webhook_outbox WHERE event = 'warm_timeout')`).Scan(&res.handoffs, &res.outbox, &res.warm, &res.warmTimeouts)
	return res, err
}

// setUp creates and migrates a fresh database and serves it with the real server on loopback.
// teardown undoes whatever was done, even when setUp failed half-way, and never uses ctx: an
// interrupted run must still drop its database. The cleanups hold b itself, not a result a
// failed return sets to nil.
func setUp(ctx context.Context, cfg config, maxConcurrency int) (*bench, string, func() error, error) {
	cleanup := &loadtest.Cleanup{}
	teardown := cleanup.Run

	pgInfo, err := loadtest.DescribeDurability(ctx, cfg.adminURL)
	if err != nil {
		return nil, "", teardown, err
	}
	name, dbURL, err := cleanup.ScratchDatabase(ctx, cfg.adminURL, "bench_intake_")
	if err != nil {
		return nil, "", teardown, err
	}

	b := &bench{dbName: name, dbURL: dbURL}
	benchURL, err := loadtest.PoolURL(dbURL, cfg.serverConns)
	if err != nil {
		return nil, "", teardown, err
	}
	if b.db, err = postgres.Open(ctx, benchURL.String(), postgres.DefaultAcquireTimeout); err != nil {
		return nil, "", teardown, err
	}
	cleanup.Add(func() error { b.db.Close(); return nil })
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	if err := postgres.Migrate(ctx, b.db, logger); err != nil {
		return nil, "", teardown, err
	}
	if _, err := b.db.Exec(ctx, `CREATE TABLE bench_raw (id bigserial PRIMARY KEY, body jsonb NOT NULL)`); err != nil {
		return nil, "", teardown, err
	}
	meterConn, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return nil, "", teardown, err
	}
	b.meter = &meter{conn: meterConn}
	cleanup.Add(func() error { return meterConn.Close(context.Background()) })
	b.auth, b.queues = auth.NewService(b.db), queue.NewService(b.db)
	ln, serverURL, err := loadtest.Listen()
	if err != nil {
		return nil, "", teardown, err
	}
	b.url = serverURL
	// A whole desk instance, as `web serve` runs it: the intake's commits wake the live hub and
	// the coalesced NOTIFY, so their cost is in the figures.
	opts := instance.Options{Server: server.Config{Addr: ln.Addr().String(), BaseURL: b.url}, DatabaseURL: benchURL.String()}
	stopServer := loadtest.Serve(ctx, func(serveCtx context.Context) (err error) {
		// The label follows the server's goroutines, so a CPU profile can show the server side alone.
		pprof.Do(serveCtx, pprof.Labels("side", "server"), func(ctx context.Context) {
			err = instance.Run(ctx, opts, logger, b.db, ln)
		})
		return err
	})
	transport := &http.Transport{MaxIdleConnsPerHost: maxConcurrency, MaxIdleConns: maxConcurrency}
	b.client = &http.Client{Transport: transport, Timeout: 30 * time.Second}
	cleanup.Add(func() error {
		transport.CloseIdleConnections()
		return stopServer()
	})
	return b, pgInfo, teardown, nil
}

// baseline inserts the same bodies with n workers, each on its own connection. Its own pool is
// closed after the run and the server's is emptied before it, so the two never hold PostgreSQL
// connection slots at once.
func (b *bench) baseline(ctx context.Context, cfg config, n int, t template, errs *loadtest.ErrorLog) (sample, int, error) {
	if n < 1 || n > math.MaxInt32 {
		return sample{}, 0, fmt.Errorf("%d workers: a pool holds 1 to %d connections", n, math.MaxInt32)
	}
	b.db.Reset()
	poolCfg, err := pgxpool.ParseConfig(b.dbURL)
	if err != nil {
		return sample{}, 0, err
	}
	poolCfg.MaxConns = int32(n)
	pool, err := pgxpool.NewWithConfig(ctx, poolCfg)
	if err != nil {
		return sample{}, 0, err
	}
	defer pool.Close()
	before := errs.Count()
	s := drive(ctx, "baseline", n, cfg.duration, b.meter, errs, func() (func(context.Context) error, func()) {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			if ctx.Err() == nil {
				errs.Add(err)
			}
			return nil, nil
		}
		return func(ctx context.Context) error {
			_, err := conn.Exec(ctx, baselineInsert, t.body(b.ids.Add(1)))
			return err
		}, conn.Release
	})
	return s, errs.Count() - before, nil
}

// intake posts the bodies with n concurrent bots to a new queue and counts every answer other
// than 201 in errs.
func (b *bench) intake(ctx context.Context, cfg config, n int, t template, errs *loadtest.ErrorLog) (sample, int, error) {
	b.runs++
	name := queueName(b.runs)
	q, err := b.queues.Create(ctx, queue.New{Name: name})
	if err != nil {
		return sample{}, 0, err
	}
	key, err := b.auth.CreateAPIKey(ctx, auth.NewAPIKey{Name: name, QueueIDs: []int64{q.ID}})
	if err != nil {
		return sample{}, 0, err
	}
	t = t.inQueue(name)
	before := errs.Count()
	s := drive(ctx, "bots", n, cfg.duration, b.meter, errs, func() (func(context.Context) error, func()) {
		return func(ctx context.Context) error { return b.submit(ctx, key.Key, t.body(b.ids.Add(1))) }, func() {}
	})
	return s, errs.Count() - before, nil
}

// queueName names the queue of the nth intake run, as long as queuePlaceholder.
func queueName(n int) string { return fmt.Sprintf("bench_%04d", n) }

func (b *bench) submit(ctx context.Context, key string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+intakePath, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }() // the body has been read; a close error cannot change the answer
	// Read to the end so the connection goes back to the transport for the next request.
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("status %d: %.300s", resp.StatusCode, answer)
	}
	return nil
}

// drive runs n workers for a warm-up and then the measured window, and records the latency of
// each operation that completes inside the window and the CPU time the window cost. newWorker
// gives a worker its operation and what to release when it stops; a nil operation means the
// worker could not start (already counted in errs).
func drive(ctx context.Context, label string, n int, window time.Duration, m *meter, errs *loadtest.ErrorLog, newWorker func() (op func(context.Context) error, release func())) sample {
	start := time.Now().Add(window / warmupFraction)
	end := start.Add(window)
	latencies := make([][]time.Duration, n)
	var cpu cpuUse
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(time.Until(start))
		first := m.read(ctx)
		time.Sleep(time.Until(end))
		cpu = m.read(ctx).since(first)
	})
	for i := range n {
		wg.Go(func() {
			pprof.Do(ctx, pprof.Labels("side", label), func(ctx context.Context) {
				op, release := newWorker()
				if op == nil {
					return
				}
				defer release()
				for {
					t0 := time.Now()
					if !t0.Before(end) || ctx.Err() != nil {
						return
					}
					err := op(ctx)
					t1 := time.Now()
					switch {
					case err != nil && ctx.Err() == nil:
						errs.Add(err)
					case err == nil && !t1.Before(start) && t1.Before(end):
						latencies[i] = append(latencies[i], t1.Sub(t0))
					}
				}
			})
		})
	}
	wg.Wait()
	all := slices.Concat(latencies...)
	slices.Sort(all)
	return sample{ops: len(all), window: window, p50: loadtest.Percentile(all, float64(50)), p99: loadtest.Percentile(all, float64(99)), cpu: cpu}
}

// cpuPerOp shows a sample's CPU time per operation as "Go+PostgreSQL" microseconds.
func cpuPerOp(s sample) string {
	self, postgres := s.cpuPerOp()
	return us(self) + "+" + us(postgres)
}

// us shows a duration in whole microseconds, or "?" for a negative (unknown) one.
func us(d time.Duration) string {
	if d < 0 {
		return "?"
	}
	return strconv.FormatInt(d.Microseconds(), 10) + "µs"
}
