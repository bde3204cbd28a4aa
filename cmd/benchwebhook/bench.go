package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/webhook"
)

// config is what one benchmark measures.
type config struct {
	adminURL     string // a database the tool can CREATE DATABASE from
	endpoints    int
	slow         int           // endpoints besides, whose bots answer only after slowDelay
	slowDelay    time.Duration // how long a slow bot takes to answer
	events       int           // rows for the endpoints that answer at once
	writers      int
	rate         float64 // rows per second in the steady run
	runs         int
	maxInFlight  int // 0: the deliverer's default
	deliverConns int
	cpuProfile   string // file for a CPU profile of the measurements, if set
}

// drainTimeout bounds every wait for the outbox to empty, so that a deliverer that cannot keep
// up still ends the run.
const drainTimeout = 3 * time.Minute

// sample is one run of the three measurements.
type sample struct {
	insertRate    float64       // rows/s the writers stored with no deliverer running: the baseline
	drainRate     float64       // rows/s the deliverer delivered and recorded, from that backlog
	steadyRate    float64       // rows/s the writers reached in the steady run (at most cfg.rate)
	steadyBacklog int64         // rows pending when the steady writers stopped
	steadyClear   time.Duration // from then until none was pending
}

// result is everything the report prints.
type result struct {
	database string // dropped by the time measure returns
	runs     []sample
	failures []string
}

// bench is the running set-up: a fresh database, one key per endpoint, one bot per endpoint.
type bench struct {
	dbName    string
	dbURL     string
	writers   *pgxpool.Pool
	deliverDB *pgxpool.Pool
	keys      []int64 // the endpoints' keys, those that answer at once first
	fastKeys  []int64 // the keys of the endpoints that answer at once
	bots      []*bot  // theirs
	total     int     // rows written per measurement, events of them to fastKeys
	logger    *slog.Logger
}

// measure sets up, runs every measurement and tears down, printing the set-up and one line per
// run to out.
func measure(ctx context.Context, cfg config, out io.Writer) (res result, err error) {
	b, pgInfo, teardown, err := setUp(ctx, cfg)
	if err != nil {
		return result{}, errors.Join(err, teardown())
	}
	defer func() { err = errors.Join(err, teardown()) }()
	res.database = b.dbName
	maxInFlight := cfg.maxInFlight
	if maxInFlight == 0 {
		maxInFlight = webhook.DefaultMaxInFlight
	}

	fmt.Fprintf(out, "PostgreSQL: %s\n", pgInfo)
	fmt.Fprintf(out, "database:   %s (fresh, migrated, dropped at exit)\n", loadtest.Redacted(b.dbURL))
	fmt.Fprintf(out, "bots:       %d, each an API key whose webhook URL is an HTTP server of its own on 127.0.0.1 answering 204 at once\n", cfg.endpoints)
	if cfg.slow > 0 {
		fmt.Fprintf(out, "            and %d more answering 204 only after %s, with as many rows each, interleaved; every figure below counts\n", cfg.slow, cfg.slowDelay)
		fmt.Fprintf(out, "            the rows of the bots that answer at once only (%d rows written per measurement in all)\n", b.total)
	}
	fmt.Fprintf(out, "deliverer:  webhook.Deliverer.Run in-process, MaxInFlight=%d per endpoint, its own pool of pool_max_conns=%d\n", maxInFlight, cfg.deliverConns)
	fmt.Fprintf(out, "baseline:   %d rows through webhook.Queue, one autocommit INSERT each, by %d writers on their own connections, no deliverer\n", cfg.events, cfg.writers)
	fmt.Fprintf(out, "drain:      the deliverer starts on the baseline's %d rows; until none is pending\n", cfg.events)
	fmt.Fprintf(out, "steady:     the deliverer runs while the writers write %d rows at %.0f/s; the backlog when they stop, and until it is gone\n\n", cfg.events, cfg.rate)

	stopProfile, err := loadtest.StartCPUProfile(cfg.cpuProfile)
	if err != nil {
		return result{}, err
	}
	defer func() { err = errors.Join(err, stopProfile()) }()
	for run := 1; run <= cfg.runs; run++ {
		s, failures, err := b.run(ctx, cfg)
		if ctx.Err() != nil {
			return result{}, fmt.Errorf("interrupted: %w", ctx.Err())
		}
		if err != nil {
			return result{}, err
		}
		res.runs = append(res.runs, s)
		res.failures = append(res.failures, failures...)
		fmt.Fprintf(out, "run %d/%d  baseline %6.0f rows/s | drain %6.0f rows/s (%.2f of baseline) | steady at %.0f/s: backlog %d when writing stopped, gone %s later\n",
			run, cfg.runs, s.insertRate, s.drainRate, s.drainRate/s.insertRate, s.steadyRate, s.steadyBacklog, loadtest.Millis(s.steadyClear))
	}
	return res, nil
}

// run measures the three sides once, on an empty outbox each.
func (b *bench) run(ctx context.Context, cfg config) (s sample, failures []string, err error) {
	if err := b.reset(ctx); err != nil {
		return s, nil, err
	}
	took, err := b.write(ctx, cfg, 0, func() {})
	if err != nil {
		return s, nil, err
	}
	s.insertRate = float64(b.total) / took.Seconds()

	_, stop := b.deliver(cfg)
	start := time.Now()
	err = b.drained(ctx)
	took = time.Since(start)
	stop()
	if err != nil {
		return s, nil, err
	}
	s.drainRate = float64(cfg.events) / took.Seconds()
	failures = append(failures, b.check(ctx, cfg, "drain")...)

	if err := b.reset(ctx); err != nil {
		return s, nil, err
	}
	d, stop := b.deliver(cfg)
	defer stop()
	took, err = b.write(ctx, cfg, cfg.rate, d.Wake)
	if err != nil {
		return s, nil, err
	}
	s.steadyRate = float64(b.total) / took.Seconds()
	if s.steadyBacklog, err = b.pending(ctx); err != nil {
		return s, nil, err
	}
	start = time.Now()
	if err := b.drained(ctx); err != nil {
		return s, nil, err
	}
	s.steadyClear = time.Since(start)
	return s, append(failures, b.check(ctx, cfg, "steady")...), nil
}

// reset empties the outbox and the bots' records.
func (b *bench) reset(ctx context.Context) error {
	for _, bot := range b.bots {
		bot.reset()
	}
	_, err := b.writers.Exec(ctx, `TRUNCATE webhook_outbox`)
	return err
}

// write stores b.total outbox rows through webhook.Queue, one statement and commit each, round
// robin over the endpoints' keys, by cfg.writers writers; at rate rows/s in all, or as fast as
// they can when rate is 0. After each commit it calls wake, as intake and the actions wake their
// instance's deliverer.
func (b *bench) write(ctx context.Context, cfg config, rate float64, wake func()) (time.Duration, error) {
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	for range cfg.writers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.total) || ctx.Err() != nil {
					return
				}
				if rate > 0 {
					time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
				}
				batch := &pgx.Batch{}
				err := webhook.Queue(batch, webhook.Event{
					HandoffID: "ho_" + strconv.FormatInt(i, 10), APIKeyID: b.keys[i%int64(len(b.keys))],
					Event: "queued", Status: "queued", Queue: "bench", OccurredAt: time.Now(),
				})
				if err == nil {
					err = b.writers.SendBatch(ctx, batch).Close()
				}
				wake()
				if err != nil {
					mu.Lock()
					firstErr = cmpErr(firstErr, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return time.Since(start), firstErr
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return fmt.Errorf("write outbox rows: %w", err)
}

// deliver starts a deliverer, as `web serve` runs one, and returns it with what stops it.
func (b *bench) deliver(cfg config) (d *webhook.Deliverer, stop func()) {
	d = webhook.NewDeliverer(b.deliverDB, b.logger, webhook.Options{AllowPrivate: true, MaxInFlight: cfg.maxInFlight})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		_ = d.Run(ctx) // Run returns nil when its context ends
		close(done)
	}()
	return d, func() {
		cancel()
		<-done
	}
}

// pending counts the rows of the endpoints that answer at once still pending.
func (b *bench) pending(ctx context.Context) (int64, error) {
	var n int64
	err := b.writers.QueryRow(ctx, `SELECT count(*) FROM webhook_outbox WHERE state = 'pending' AND api_key_id = ANY($1)`,
		b.fastKeys).Scan(&n)
	return n, err
}

// drained waits until no row of the endpoints that answer at once is pending.
func (b *bench) drained(ctx context.Context) error {
	deadline := time.Now().Add(drainTimeout)
	for {
		n, err := b.pending(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d outbox rows still pending after %s", n, drainTimeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// check holds a measurement to at-least-once, and, with one deliverer and no lease running out,
// to once: every row delivered, every event received by its bot exactly once.
func (b *bench) check(ctx context.Context, cfg config, side string) []string {
	var failures []string
	var delivered int64
	if err := b.writers.QueryRow(ctx, `SELECT count(*) FROM webhook_outbox WHERE state = 'delivered' AND api_key_id = ANY($1)`,
		b.fastKeys).Scan(&delivered); err != nil {
		return []string{fmt.Sprintf("%s: counting delivered rows: %v", side, err)}
	}
	if delivered != int64(cfg.events) {
		failures = append(failures, fmt.Sprintf("%s: %d of %d rows delivered", side, delivered, cfg.events))
	}
	distinct, requests := 0, 0
	for _, bot := range b.bots {
		d, r := bot.counts()
		distinct, requests = distinct+d, requests+r
	}
	if distinct != cfg.events || requests != distinct {
		failures = append(failures, fmt.Sprintf("%s: the bots received %d requests for %d distinct events, want %d each once", side, requests, distinct, cfg.events))
	}
	return failures
}

// setUp creates and migrates a fresh database with one queue, starts one bot per endpoint and
// gives each an API key. teardown undoes whatever was done, even when setUp failed half-way, and
// never uses ctx: an interrupted run must still drop its database.
func setUp(ctx context.Context, cfg config) (b *bench, pgInfo string, teardown func() error, err error) {
	cleanup := &loadtest.Cleanup{}
	teardown = cleanup.Run

	if pgInfo, err = loadtest.DescribeDurability(ctx, cfg.adminURL); err != nil {
		return nil, "", teardown, err
	}
	name, dbURL, err := cleanup.ScratchDatabase(ctx, cfg.adminURL, "bench_webhook_")
	if err != nil {
		return nil, "", teardown, err
	}
	b = &bench{dbName: name, dbURL: dbURL, logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}

	open := func(conns int) (*pgxpool.Pool, error) {
		poolURL, err := loadtest.PoolURL(dbURL, conns)
		if err != nil {
			return nil, err
		}
		pool, err := postgres.Open(ctx, poolURL.String(), postgres.DefaultAcquireTimeout)
		if err != nil {
			return nil, err
		}
		cleanup.Add(func() error { pool.Close(); return nil })
		return pool, nil
	}
	// The writers' pool also counts the pending rows; the deliverer's is its own, as in a desk.
	if b.writers, err = open(cfg.writers + 1); err != nil {
		return nil, "", teardown, err
	}
	if b.deliverDB, err = open(cfg.deliverConns); err != nil {
		return nil, "", teardown, err
	}
	if err := postgres.Migrate(ctx, b.writers, b.logger); err != nil {
		return nil, "", teardown, err
	}
	q, err := queue.NewService(b.writers).Create(ctx, queue.New{Name: "bench"})
	if err != nil {
		return nil, "", teardown, err
	}
	for i := range cfg.endpoints + cfg.slow {
		bot := &bot{}
		if i >= cfg.endpoints {
			bot.delay = cfg.slowDelay
		}
		ln, botURL, err := loadtest.Listen()
		if err != nil {
			return nil, "", teardown, err
		}
		srv := &http.Server{Handler: bot, ReadHeaderTimeout: 5 * time.Second}
		go func() { _ = srv.Serve(ln) }() // Serve returns ErrServerClosed when the teardown closes it
		cleanup.Add(srv.Close)
		key, err := auth.NewService(b.writers).CreateAPIKey(ctx, auth.NewAPIKey{
			Name: fmt.Sprintf("bench-bot-%d", i), QueueIDs: []int64{q.ID}, WebhookURL: botURL + "/hooks", AllowPrivateWebhook: true,
		})
		if err != nil {
			return nil, "", teardown, err
		}
		b.keys = append(b.keys, key.ID)
		if i < cfg.endpoints {
			b.fastKeys, b.bots = append(b.fastKeys, key.ID), append(b.bots, bot)
		}
	}
	// As many rows for each slow endpoint as for each fast one, interleaved with theirs, so that
	// a claim in due order meets them all along.
	for fast := 0; fast < cfg.events; b.total++ {
		if b.total%len(b.keys) < cfg.endpoints {
			fast++
		}
	}
	return b, pgInfo, teardown, nil
}

// bot answers every webhook after its delay (none for most) and counts what it received, by event
// id.
type bot struct {
	delay time.Duration
	mu    sync.Mutex
	seen  map[string]int
}

func (b *bot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body) // the body's content does not matter here; its arrival does
	if b.delay > 0 {
		select {
		case <-time.After(b.delay):
		case <-r.Context().Done():
		}
	}
	b.mu.Lock()
	if b.seen == nil {
		b.seen = map[string]int{}
	}
	b.seen[r.Header.Get("X-Handoff-Event-Id")]++
	b.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func (b *bot) reset() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seen = nil
}

// counts returns how many distinct events the bot received, and in how many requests.
func (b *bot) counts() (distinct, requests int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range b.seen {
		requests += n
	}
	return len(b.seen), requests
}
