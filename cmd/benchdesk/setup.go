package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
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
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/server"
)

// The queues of the run, one per scenario, so that no scenario's leftovers weigh on another's.
const (
	queueLive   = "bench_live"
	queueFanout = "bench_fanout"
	queueRace   = "bench_race"
	queuePage   = "bench_page"
	queueFlood  = "bench_flood"
	password    = "bench-password-not-secret"
	setupConns  = 8 // the tool's own pool: set-up inserts and checks
)

// bench is the running set-up: a fresh database served by two whole desk instances in-process,
// the bare gorilla server, and the child holding the client sockets.
type bench struct {
	cfg     config
	dbName  string
	dbURL   string
	db      *pgxpool.Pool // the tool's own pool (set-up, checks, baselines' tables)
	auth    *auth.Service
	a, b    *deskInstance // A takes ingest, B holds the sockets
	bare    *bareServer
	farm    *farm
	client  *http.Client
	warns   *warnCounter
	logger  *slog.Logger
	key     string           // bearer API key for every bench queue
	sender  intake.Sender    // the same key, for direct intake
	queues  map[string]int64 // bench queue ids by name
	users   []auth.User      // agents, members of every bench queue
	session []string         // desk_session token of each user
	pkg     handoff.Package  // the example package, decoded once
	body    map[string]any   // the example package as JSON, for bodies sent over HTTP
	// autovacuumOff: the server runs without autovacuum, and the tool plays its part (vacuum.go).
	autovacuumOff bool
}

// deskInstance is one desk as `web serve` runs it (instance.Run) on its own pool and listener.
type deskInstance struct {
	name  string
	url   string
	db    *pgxpool.Pool
	trips *roundTrips // everything the instance sends on its pool: requests and background work
	stop  func() error
}

// setUp creates and migrates a fresh database, starts two instances on it, the bare server and
// the socket farm, and creates the agents, queues and key. teardown undoes whatever was done,
// even when setUp failed half-way, and never uses ctx: an interrupted run must still drop its
// database. The cleanups hold b itself, not a result a failed return sets to nil.
func setUp(ctx context.Context, cfg config, out io.Writer) (*bench, func() error, error) {
	cleanup := &loadtest.Cleanup{}
	teardown := cleanup.Run

	raw, err := os.ReadFile(cfg.examplePath)
	if err != nil {
		return nil, teardown, err
	}
	b := &bench{cfg: cfg, queues: map[string]int64{}}
	if b.pkg, err = handoff.Decode(raw); err != nil {
		return nil, teardown, fmt.Errorf("%s: %w", cfg.examplePath, err)
	}
	if err := json.Unmarshal(raw, &b.body); err != nil {
		return nil, teardown, err
	}
	// The pull desk, as measured before warm packages rang agents: cmd/benchwarm measures rings.
	b.pkg.TransferMode, b.body["transfer_mode"] = handoff.TransferModeCold, string(handoff.TransferModeCold)

	pgInfo, settings, err := loadtest.DescribeServer(ctx, cfg.adminURL, "synchronous_commit", "fsync", "max_connections", "autovacuum")
	if err != nil {
		return nil, teardown, err
	}
	autovacuum := settings[3]
	if b.dbName, b.dbURL, err = loadtest.CreateDatabase(ctx, cfg.adminURL, "bench_desk_"); err != nil {
		return nil, teardown, err
	}
	cleanup.Add(func() error {
		if cfg.keep {
			fmt.Fprintf(out, "kept the bench database: psql '%s'\n", loadtest.Redacted(b.dbURL))
			return nil
		}
		return loadtest.DropDatabase(cfg.adminURL, b.dbName)
	})

	b.warns = &warnCounter{counts: map[string]int{}}
	b.logger = slog.New(&countingHandler{Handler: slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}), c: b.warns})
	if b.db, err = openPool(ctx, b.dbURL, setupConns, nil); err != nil {
		return nil, teardown, err
	}
	cleanup.Add(func() error { b.db.Close(); return nil })
	if err := postgres.Migrate(ctx, b.db, b.logger); err != nil {
		return nil, teardown, err
	}
	b.auth = auth.NewService(b.db)

	for _, name := range []string{"A", "B"} {
		d, err := startDesk(ctx, name, b.dbURL, cfg.serverConns, b.logger)
		if err != nil {
			return nil, teardown, err
		}
		cleanup.Add(d.stop)
		if name == "A" {
			b.a = d
		} else {
			b.b = d
		}
	}
	if b.bare, err = startBare(); err != nil {
		return nil, teardown, err
	}
	cleanup.Add(b.bare.stop)
	transport := &http.Transport{MaxIdleConns: 1000, MaxIdleConnsPerHost: 1000, IdleConnTimeout: time.Minute}
	b.client = &http.Client{Transport: transport, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	cleanup.Add(func() error { transport.CloseIdleConnections(); return nil })

	need := uint64(max(cfg.fanoutSockets, cfg.latencySockets)) + 2*uint64(cfg.raceAgents) + 1000 //nolint:gosec // G115: parseConfig has checked all three are positive.
	limit, err := raiseOpenFiles(need)
	if err != nil {
		return nil, teardown, fmt.Errorf("open-files limit: %w", err)
	}
	if limit < need {
		return nil, teardown, fmt.Errorf("open-files limit %d is below the %d this run needs (raise ulimit -n)", limit, need)
	}
	if b.farm, err = startFarm(); err != nil {
		return nil, teardown, err
	}
	cleanup.Add(b.farm.stop)

	t0 := time.Now()
	if err := b.createPeople(ctx); err != nil {
		return nil, teardown, err
	}
	fmt.Fprintf(out, "PostgreSQL: %s\n", pgInfo)
	if b.autovacuumOff = autovacuum != "on"; b.autovacuumOff {
		fmt.Fprintf(out, "            autovacuum is OFF on this PostgreSQL, so nothing vacuums or analyzes the tables by itself: the tool runs ANALYZE\n")
		fmt.Fprintf(out, "            after each bulk fill, and ")
		if cfg.playAutovacuum {
			fmt.Fprintf(out, "every %s vacuums or analyzes each table past autovacuum's thresholds (the table's own settings,\n", vacuumEvery)
			fmt.Fprintf(out, "            migrations/00040, else the server's), as autovacuum would in a deployment (-play-autovacuum=false: it does not)\n")
		} else {
			fmt.Fprintf(out, "nothing else (-play-autovacuum=false): dead rows pile up as in no deployment (scenario 5 shows the plan without ANALYZE)\n")
		}
	}
	fate := "dropped at exit"
	if cfg.keep {
		fate = "kept at exit (-keep)"
	}
	fmt.Fprintf(out, "database:   %s (fresh, migrated, %s)\n", loadtest.Redacted(b.dbURL), fate)
	fmt.Fprintf(out, "instances:  A %s and B %s: instance.Run each (HTTP, live hub, LISTEN, coalesced NOTIFY, presence, sweeper,\n", b.a.url, b.b.url)
	fmt.Fprintf(out, "            webhook deliverer), each on its own pool, pool_max_conns=%d; the tool's own pool has %d\n", cfg.serverConns, setupConns)
	fmt.Fprintf(out, "bare:       gorilla echo/broadcast server on %s (no database), the baseline of 2 and 3\n", b.bare.url)
	fmt.Fprintf(out, "sockets:    in a child process (this binary, %s=1) so the server's heap and GC are its own; open-files limit %d\n", farmEnv, limit)
	fmt.Fprintf(out, "agents:     %d users, members of every bench queue, inserted by SQL with one argon2id hash; agent 1 logged in by\n", len(b.users))
	fmt.Fprintf(out, "            POST /login, the others by auth.StartSession (what /login does after the password check) (%s)\n\n",
		time.Since(t0).Round(time.Millisecond))
	return b, teardown, nil
}

// openPool opens a pool as postgres.Open does (configured by the URL, pinged), with conns
// connections and, if given, a tracer.
func openPool(ctx context.Context, dbURL string, conns int, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	u, err := loadtest.PoolURL(dbURL, conns)
	if err != nil {
		return nil, err
	}
	if tracer == nil {
		return postgres.Open(ctx, u.String(), postgres.DefaultAcquireTimeout)
	}
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, err
	}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return pool, nil
}

// roundTrips counts what a pool sends PostgreSQL and waits for: each statement outside a batch
// and each batch (pgx pipelines a batch into one round trip), by what sent it.
type roundTrips struct {
	n  atomic.Int64
	by [len(tripSources)]atomic.Int64
}

// tripSources are who sends a statement, told apart by a piece of its SQL; the last one is the
// rest: the requests and actions.
var tripSources = [...]struct{ name, marker string }{
	{"live hub reads", "pg_snapshot_xmin(pg_current_snapshot()) AS upto"},
	{"NOTIFY", "pg_notify"},
	{"webhook deliverer", "webhook_outbox"},
	{"presence", "presence"},
	{"requests and actions", ""},
}

func (r *roundTrips) count(sql string) {
	r.n.Add(1)
	for i, s := range tripSources {
		if s.marker == "" || strings.Contains(sql, s.marker) {
			r.by[i].Add(1)
			return
		}
	}
}

// snapshot returns the counts by source.
func (r *roundTrips) snapshot() [len(tripSources)]int64 {
	var out [len(tripSources)]int64
	for i := range r.by {
		out[i] = r.by[i].Load()
	}
	return out
}

func (r *roundTrips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	r.count(data.SQL)
	return ctx
}

func (r *roundTrips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// TraceBatchStart counts a batch by its first statement (a batch of an action's writes starts
// with its event insert, the intake's with BEGIN: both land with the requests).
func (r *roundTrips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	sql := ""
	if data.Batch != nil && len(data.Batch.QueuedQueries) > 0 {
		sql = data.Batch.QueuedQueries[0].SQL
	}
	r.count(sql)
	return ctx
}

func (r *roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

func (r *roundTrips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func startDesk(ctx context.Context, name, dbURL string, conns int, logger *slog.Logger) (*deskInstance, error) {
	trips := &roundTrips{}
	db, err := openPool(ctx, dbURL, conns, trips)
	if err != nil {
		return nil, err
	}
	ln, baseURL, err := loadtest.Listen()
	if err != nil {
		db.Close()
		return nil, err
	}
	d := &deskInstance{name: name, url: baseURL, db: db, trips: trips}
	opts := instance.Options{Server: server.Config{Addr: ln.Addr().String(), BaseURL: d.url}, DatabaseURL: dbURL}
	stop := loadtest.Serve(ctx, func(serveCtx context.Context) error {
		return instance.Run(serveCtx, opts, logger.With("instance", name), db, ln)
	})
	d.stop = func() error {
		err := stop()
		db.Close()
		return err
	}
	return d, nil
}

// createPeople makes the bench queues, one API key for all of them, and the agents with a
// session each.
func (b *bench) createPeople(ctx context.Context) error {
	queues := queue.NewService(b.db)
	var ids []int64
	for _, name := range []string{queueLive, queueFanout, queueRace, queuePage, queueFlood} {
		q, err := queues.Create(ctx, queue.New{Name: name})
		if err != nil {
			return err
		}
		b.queues[name] = q.ID
		ids = append(ids, q.ID)
	}
	key, err := b.auth.CreateAPIKey(ctx, auth.NewAPIKey{Name: "bench-bot", QueueIDs: ids})
	if err != nil {
		return err
	}
	b.key = key.Key
	b.sender = intake.Sender{APIKeyID: key.ID, QueueIDs: ids}

	// One argon2id hash for all: hashing 19 MiB × 2 passes per user would dominate the set-up.
	hash, err := auth.HashPassword(password)
	if err != nil {
		return err
	}
	rows, err := b.db.Query(ctx, `
		INSERT INTO users (email, display_name, role, password_hash)
		SELECT format('agent%s@bench.example', g), format('Agent %s', g), 'agent', $1 FROM generate_series(1, $2) g
		RETURNING id, email, display_name, role, capacity`, hash, b.cfg.users)
	if err != nil {
		return err
	}
	b.users, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (auth.User, error) {
		var u auth.User
		err := row.Scan(&u.ID, &u.Email, &u.DisplayName, &u.Role, &u.Capacity)
		return u, err
	})
	if err != nil {
		return err
	}
	slices.SortFunc(b.users, func(x, y auth.User) int { return int(x.ID - y.ID) })
	if _, err := b.db.Exec(ctx, `INSERT INTO queue_members (queue_id, user_id) SELECT q, u FROM unnest($1::bigint[]) q, unnest($2::bigint[]) u`,
		ids, userIDs(b.users)); err != nil {
		return err
	}

	b.session = make([]string, len(b.users))
	if b.session[0], err = loadtest.Login(ctx, b.client, b.b.url, b.users[0].Email, password); err != nil {
		return err
	}
	return parallel(ctx, 8, len(b.users)-1, func(i int) error {
		s, err := b.auth.StartSession(ctx, b.users[i+1].ID)
		b.session[i+1] = s.Token
		return err
	})
}

func userIDs(users []auth.User) []int64 {
	ids := make([]int64, len(users))
	for i, u := range users {
		ids[i] = u.ID
	}
	return ids
}

// handoffID names the nth package of a scenario; the card carrying it is "card-" + the id.
func handoffID(scenario string, n int) string { return fmt.Sprintf("ho_bench_%s_%06d", scenario, n) }

// bodyFor is the example package as a bot sends it, with its own id and contact (so no
// per-contact guard refuses it) and the queue as target.
func (b *bench) bodyFor(queueName, id string) ([]byte, error) {
	p := make(map[string]any, len(b.body))
	for k, v := range b.body {
		p[k] = v
	}
	contact := map[string]any{}
	for k, v := range b.body["contact"].(map[string]any) {
		contact[k] = v
	}
	contact["id"] = "cust_" + id
	p["contact"], p["handoff_id"], p["target_profile"] = contact, id, queueName
	return json.Marshal(p)
}

// post sends a package to an instance's intake API as a bot does, and wants 201.
func (b *bench) post(ctx context.Context, base string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/handoffs", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+b.key)
	resp, err := b.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }() // the body has been read; a close error cannot change the answer
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("intake: status %d: %.300s", resp.StatusCode, answer)
	}
	return nil
}

// fill queues n packages directly through intake.Intake.Submit (the intake's own transaction,
// without HTTP), for set-up speed. Nothing wakes the live desk: no socket is open meanwhile.
func (b *bench) fill(ctx context.Context, queueName, scenario string, n int) error {
	intake := intake.New(b.db, time.Now, nil, nil)
	return parallel(ctx, setupConns, n, func(i int) error {
		p := b.pkg
		p.HandoffID = handoffID(scenario, i)
		p.Contact.ID = "cust_" + p.HandoffID
		p.TargetProfile = queueName
		_, err := intake.Submit(ctx, b.sender, p)
		return err
	})
}

// analyze refreshes the planner's statistics after a bulk fill, as autovacuum's autoanalyze does
// in a deployment (this cluster may run without autovacuum).
func (b *bench) analyze(ctx context.Context) error {
	_, err := b.db.Exec(ctx, `ANALYZE`)
	return err
}

// drainOutbox waits (bounded) until the instances' webhook deliverers have worked off the
// outbox, so that a set-up's backlog does not run during the next measurement.
func (b *bench) drainOutbox(ctx context.Context, limit time.Duration) (int64, error) {
	deadline := time.Now().Add(limit)
	for {
		var pending int64
		if err := b.db.QueryRow(ctx, `SELECT count(*) FROM webhook_outbox WHERE state = 'pending'`).Scan(&pending); err != nil {
			return 0, err
		}
		if pending == 0 || time.Now().After(deadline) {
			return pending, nil
		}
		select {
		case <-ctx.Done():
			return pending, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// parallel runs f(0..n-1) on w workers and returns the first error (the others stop early).
func parallel(ctx context.Context, w, n int, f func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(w, max(n, 1)) {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					cancel(err)
				}
			}
		})
	}
loop:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break loop
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// memSnap is the process's memory after a full collection.
type memSnap struct {
	heapInuse, stackInuse, heapAlloc uint64
	rss                              uint64 // resident set, from /proc (0 elsewhere)
	goroutines                       int
}

func (m memSnap) inuse() uint64 { return m.heapInuse + m.stackInuse }

func snapshot() memSnap {
	runtime.GC()
	debug.FreeOSMemory() // another GC, and returns freed pages so RSS means something
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	m := memSnap{heapInuse: ms.HeapInuse, stackInuse: ms.StackInuse, heapAlloc: ms.HeapAlloc, goroutines: runtime.NumGoroutine()}
	if statm, err := os.ReadFile("/proc/self/statm"); err == nil {
		if fields := strings.Fields(string(statm)); len(fields) > 1 {
			if pages, err := strconv.ParseUint(fields[1], 10, 64); err == nil {
				m.rss = pages * uint64(os.Getpagesize()) //nolint:gosec // G115: a page size is positive.
			}
		}
	}
	return m
}

// settle waits (bounded) until the number of goroutines stops falling: the server side of closed
// sockets has ended.
func settle(ctx context.Context) {
	last, stable := runtime.NumGoroutine(), 0
	for range 100 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		n := runtime.NumGoroutine()
		if n >= last {
			stable++
		} else {
			stable = 0
		}
		last = n
		if stable >= 5 {
			return
		}
	}
}

// warnCounter counts the desk's warnings and errors by message, e.g. "dropped a slow live
// subscriber".
type warnCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

func (w *warnCounter) all() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]int, len(w.counts))
	for k, v := range w.counts {
		out[k] = v
	}
	return out
}

type countingHandler struct {
	slog.Handler
	c *warnCounter
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.c.mu.Lock()
	h.c.counts[r.Message]++
	h.c.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h *countingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithAttrs(attrs), c: h.c}
}

func (h *countingHandler) WithGroup(name string) slog.Handler {
	return &countingHandler{Handler: h.Handler.WithGroup(name), c: h.c}
}
