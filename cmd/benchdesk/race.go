package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/loadtest"
)

// raceResult is scenario 4: agents on both instances loop Next→Accept→Resolve until the queue is
// empty; against the same number of bare SKIP LOCKED claims on a bare table.
type raceResult struct {
	packages, agents int
	via              string
	serverConns      int           // per instance
	fill             time.Duration // set-up: queueing the packages
	outboxLeft       int64         // webhook rows still pending when the race started

	took     time.Duration // first Next to the last agent finding the queue empty
	accepted int           // accepts answered as successful
	cycles   []time.Duration
	errors   loadtest.ErrorLog

	// The audit log's word, per package of the queue.
	once, double, never, left, stuck, wrongAgent int64
	limited                                      bool // the agents stopped at -race-limit
	harnessDouble                                int  // packages two agents were both told they accepted

	baseClients, baseConns int
	baseTook               time.Duration
	baseClaims             int
	baseDouble             int

	waits, baseWaits string        // where the bench database's busy backends were, sampled
	trips            int64         // round trips both instances' pools made during the race
	rtt              time.Duration // p50 of SELECT 1 on the tool's own connection during the race
	tripsBy          [len(tripSources)]int64
	wal, baseWAL     int64 // bytes of WAL the whole cluster wrote during the race and the baseline

	// The webhook outbox: rows the race wrote, rows the deliverers settled meanwhile, rows still
	// pending when the agents finished, and how many they settled in -webhook-watch after it.
	webhooksWritten, webhooksSettled, webhooksPending, webhooksAfter int64
}

// ceiling is the most accepts per second conns connections can give when each accept costs
// trips round trips of rtt each: a connection is busy for the whole of every round trip.
func (r *raceResult) ceiling(conns int) float64 {
	perAccept := float64(r.trips) / float64(max(r.accepted, 1)) * r.rtt.Seconds()
	if perAccept <= 0 {
		return 0
	}
	return float64(conns) / perAccept
}

// sampleRoundTrips times SELECT 1 on one of the tool's connections every sampleEvery until the
// returned function is called, which returns the median.
func (b *bench) sampleRoundTrips(ctx context.Context) func() time.Duration {
	var d []time.Duration
	stop := b.sample(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		t := time.Now()
		if _, err := conn.Exec(ctx, `SELECT 1`); err != nil {
			return err
		}
		d = append(d, time.Since(t))
		return nil
	})
	return func() time.Duration {
		stop()
		return loadtest.Percentile(sorted(d), 50)
	}
}

// outboxCounts returns the outbox's rows and its pending rows.
func (b *bench) outboxCounts(ctx context.Context) (total, pending int64, err error) {
	err = b.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'pending') FROM webhook_outbox`).Scan(&total, &pending)
	return total, pending, err
}

const (
	claimTable = `CREATE TABLE bench_claims (
		id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		status     text NOT NULL DEFAULT 'queued',
		claimed_by integer)`
	claimIndex = `CREATE INDEX bench_claims_queued_idx ON bench_claims (id) WHERE status = 'queued'`
	claimSQL   = `UPDATE bench_claims SET status = 'claimed', claimed_by = $1
		WHERE id = (SELECT id FROM bench_claims WHERE status = 'queued' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
		RETURNING id`
)

func (b *bench) race(ctx context.Context, out io.Writer, res *result) (*raceResult, error) {
	cfg := b.cfg
	r := &raceResult{packages: cfg.racePackages, agents: cfg.raceAgents, via: cfg.raceVia, serverConns: cfg.serverConns}

	t0 := time.Now()
	if err := b.fill(ctx, queueRace, "race", r.packages); err != nil {
		return nil, err
	}
	r.fill = time.Since(t0)
	left, err := b.drainOutbox(ctx, time.Minute)
	if err != nil {
		return nil, err
	}
	if err := b.analyze(ctx); err != nil {
		return nil, err
	}
	r.outboxLeft = left
	fmt.Fprintf(out, "  %d packages queued by intake.Intake.Submit in %s (%.0f/s); webhook outbox drained to %d pending, ANALYZE, in %s\n",
		r.packages, r.fill.Round(time.Millisecond), float64(r.packages)/r.fill.Seconds(), left, (time.Since(t0) - r.fill).Round(time.Millisecond))

	if err := b.claimBaseline(ctx, r); err != nil {
		return nil, fmt.Errorf("baseline: %w", err)
	}
	fmt.Fprintf(out, "  baseline: %d bare SKIP LOCKED claims by %d clients over %d connections in %s: %.0f claims/s\n",
		r.baseClaims, r.baseClients, r.baseConns, r.baseTook.Round(time.Millisecond), float64(r.baseClaims)/r.baseTook.Seconds())
	fmt.Fprintf(out, "    busy backends (pg_stat_activity every %s): %s\n", sampleEvery, r.baseWaits)

	// The desk: agent i works on instance A when i is even, B when odd.
	var mu sync.Mutex
	acceptedBy := map[string]int{}
	var cycles []time.Duration
	record := func(id string, cycle time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if id != "" {
			acceptedBy[id]++
		}
		if cycle > 0 {
			cycles = append(cycles, cycle)
		}
	}
	var actionsA, actionsB *actions.Service
	if cfg.raceVia == "actions" {
		actionsA, actionsB = actions.New(b.a.db, time.Now, nil, nil, nil, ""), actions.New(b.b.db, time.Now, nil, nil, nil, "")
	}
	total0, pending0, err := b.outboxCounts(ctx)
	if err != nil {
		return nil, err
	}
	sampler := b.sampleWaits(ctx)
	rtt := b.sampleRoundTrips(ctx)
	trips0 := b.a.trips.n.Load() + b.b.trips.n.Load()
	wal0, err := b.walLSN(ctx)
	if err != nil {
		return nil, err
	}
	byA0, byB0 := b.a.trips.snapshot(), b.b.trips.snapshot()
	start := time.Now()
	deadline := start.Add(cfg.raceLimit)
	var wg sync.WaitGroup
	for i := range r.agents {
		inst, actions := b.a, actionsA
		if i%2 == 1 {
			inst, actions = b.b, actionsB
		}
		wg.Go(func() {
			if actions != nil {
				b.agentActions(ctx, deadline, actions, b.users[i], record, &r.errors)
			} else {
				b.agentHTTP(ctx, deadline, inst.url, b.session[i], record, &r.errors)
			}
		})
	}
	wg.Wait()
	r.took = time.Since(start)
	wal1, err := b.walLSN(ctx)
	if err != nil {
		return nil, err
	}
	r.wal = wal1 - wal0
	r.waits = sampler.top(4)
	r.rtt = rtt()
	r.trips = b.a.trips.n.Load() + b.b.trips.n.Load() - trips0
	byA, byB := b.a.trips.snapshot(), b.b.trips.snapshot()
	for i := range tripSources {
		r.tripsBy[i] = byA[i] + byB[i] - byA0[i] - byB0[i]
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	total1, pending1, err := b.outboxCounts(ctx)
	if err != nil {
		return nil, err
	}
	r.webhooksWritten, r.webhooksPending = total1-total0, pending1
	r.webhooksSettled = r.webhooksWritten - (pending1 - pending0)
	if err := loadtest.SleepUntil(ctx, time.Now().Add(cfg.webhookWatch)); err != nil {
		return nil, err
	}
	_, pending2, err := b.outboxCounts(ctx)
	if err != nil {
		return nil, err
	}
	r.webhooksAfter = pending1 - pending2
	r.cycles = sorted(cycles)
	for _, n := range acceptedBy {
		r.accepted += n
		if n > 1 {
			r.harnessDouble++
		}
	}
	err = b.db.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE n = 1), count(*) FILTER (WHERE n > 1), count(*) FILTER (WHERE n = 0),
			count(*) FILTER (WHERE status = 'queued'), count(*) FILTER (WHERE status NOT IN ('queued', 'resolved')),
			count(*) FILTER (WHERE n = 1 AND accepted_by IS DISTINCT FROM assignee_id)
		FROM (
			SELECT h.id, h.status, h.assignee_id, count(a.seq) AS n, min(a.actor_user) AS accepted_by
			FROM handoffs h LEFT JOIN events a ON a.handoff_id = h.id AND a.kind = 'accepted'
			WHERE h.queue_id = $1 GROUP BY h.id) per_package`, b.queues[queueRace]).
		Scan(&r.once, &r.double, &r.never, &r.left, &r.stuck, &r.wrongAgent)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  desk (%s): %d agents, %d accepts in %s: %.0f accepts/s; cycle p50 %s p99 %s; errors %d\n",
		r.via, r.agents, r.accepted, r.took.Round(time.Millisecond), float64(r.accepted)/r.took.Seconds(),
		loadtest.Millis(loadtest.Percentile(r.cycles, 50)), loadtest.Millis(loadtest.Percentile(r.cycles, 99)), r.errors.Count())
	fmt.Fprintf(out, "    database round trips by both instances (requests and background work): %d, %.1f per accepted package (baseline: 1 per claim)\n",
		r.trips, float64(r.trips)/float64(max(r.accepted, 1)))
	var parts []string
	for i, src := range tripSources {
		parts = append(parts, fmt.Sprintf("%s %.1f", src.name, float64(r.tripsBy[i])/float64(max(r.accepted, 1))))
	}
	fmt.Fprintf(out, "    per accepted package, by sender: %s\n", strings.Join(parts, ", "))
	fmt.Fprintf(out, "    WAL written (the whole cluster): %.1f KB per accepted package (baseline: %.2f KB per claim)\n",
		float64(r.wal)/1024/float64(max(r.accepted, 1)), float64(r.baseWAL)/1024/float64(max(r.baseClaims, 1)))
	fmt.Fprintf(out, "    a round trip (SELECT 1, the tool's own connection) took p50 %s meanwhile: %d connections / (%.1f round trips × %s) ≈ %.0f accepts/s at most\n",
		loadtest.Millis(r.rtt), 2*cfg.serverConns, float64(r.trips)/float64(max(r.accepted, 1)), loadtest.Millis(r.rtt), r.ceiling(2*cfg.serverConns))
	fmt.Fprintf(out, "    busy backends (pg_stat_activity every %s): %s\n", sampleEvery, r.waits)
	fmt.Fprintf(out, "  webhooks: the race wrote %d outbox rows; the deliverers settled %d meanwhile (%.0f/s) and left %d pending; with no agents they settled %d in the next %s (%.0f/s)\n",
		r.webhooksWritten, r.webhooksSettled, float64(r.webhooksSettled)/r.took.Seconds(), r.webhooksPending, r.webhooksAfter, cfg.webhookWatch,
		float64(r.webhooksAfter)/cfg.webhookWatch.Seconds())
	r.limited = r.left > 0 && r.took >= cfg.raceLimit
	fmt.Fprintf(out, "  event log: %d packages accepted exactly once, %d more than once, %d never (%d still queued); %d neither queued nor resolved; %d resolved by another than their acceptor\n",
		r.once, r.double, r.never, r.left, r.stuck, r.wrongAgent)
	if r.limited {
		fmt.Fprintf(out, "  the agents stopped at -race-limit=%s with %d packages still queued: accepts/s is over the time they ran\n", cfg.raceLimit, r.left)
	}

	if r.double > 0 || r.harnessDouble > 0 {
		res.fail("4: double claims: %d packages have more than one 'accepted' audit row, %d were accepted by two agents", r.double, r.harnessDouble)
	}
	if (r.left > 0 && !r.limited) || r.stuck > 0 || r.wrongAgent > 0 || r.once+r.double+r.never != int64(r.packages) || r.never != r.left {
		res.fail("4: of %d packages %d were accepted exactly once, %d never, %d are still queued, %d neither queued nor resolved, %d resolved by another agent",
			r.packages, r.once, r.never, r.left, r.stuck, r.wrongAgent)
	}
	if r.errors.Count() > 0 {
		res.fail("4: %d agent requests failed, first: %q", r.errors.Count(), r.errors.Samples())
	}
	if r.baseDouble > 0 || r.baseClaims != r.packages {
		res.fail("4: baseline claimed %d of %d rows, %d twice", r.baseClaims, r.packages, r.baseDouble)
	}
	return r, nil
}

// agentHTTP is one agent's browser: POST next (303 to the reserved package, or 404 when nothing
// waits), POST accept, POST resolve, until the queue is empty.
func (b *bench) agentHTTP(ctx context.Context, deadline time.Time, base, token string, record func(string, time.Duration), errs *loadtest.ErrorLog) {
	for ctx.Err() == nil && time.Now().Before(deadline) {
		t := time.Now()
		status, location, err := b.form(ctx, base, "/queues/"+queueRace+"/next", token, nil)
		if err != nil {
			errs.Add(err)
			return
		}
		if status == http.StatusNotFound {
			return // nothing waiting
		}
		id, ok := strings.CutPrefix(location, "/handoffs/")
		if status != http.StatusSeeOther || !ok {
			errs.Add(fmt.Errorf("next: status %d, location %q", status, location))
			return
		}
		if status, _, err = b.form(ctx, base, "/handoffs/"+id+"/accept", token, nil); err != nil || status != http.StatusSeeOther {
			errs.Add(fmt.Errorf("accept %s: status %d, err %v", id, status, err))
			return
		}
		record(id, 0)
		if status, _, err = b.form(ctx, base, "/handoffs/"+id+"/resolve", token, url.Values{"code": {"solved"}}); err != nil || status != http.StatusSeeOther {
			errs.Add(fmt.Errorf("resolve %s: status %d, err %v", id, status, err))
			return
		}
		record("", time.Since(t))
	}
}

// agentActions is the same loop through actions.Service in-process, without HTTP or sessions.
func (b *bench) agentActions(ctx context.Context, deadline time.Time, actions *actions.Service, user auth.User, record func(string, time.Duration), errs *loadtest.ErrorLog) {
	for ctx.Err() == nil && time.Now().Before(deadline) {
		t := time.Now()
		id, err := actions.Next(ctx, user, queueRace)
		if desk.ErrorCode(err) == desk.NotFound {
			return
		}
		if err != nil {
			errs.Add(fmt.Errorf("next: %w", err))
			return
		}
		if err := actions.Accept(ctx, user, id); err != nil {
			errs.Add(fmt.Errorf("accept %s: %w", id, err))
			return
		}
		record(id, 0)
		if _, err := actions.Resolve(ctx, user, id, "solved", "", handoff.HandBack{}); err != nil {
			errs.Add(fmt.Errorf("resolve %s: %w", id, err))
			return
		}
		record("", time.Since(t))
	}
}

// form posts a form as a logged-in browser does (session cookie, same-origin Origin header) and
// returns the status and the Location header; redirects are not followed.
func (b *bench) form(ctx context.Context, base, path, token string, values url.Values) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, strings.NewReader(values.Encode()))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.Header.Set("Cookie", loadtest.SessionCookie+"="+token)
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }() // the body has been read; a close error cannot change the answer
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), err
}

// claimBaseline claims as many rows of a bare table as the desk has packages, with as many
// clients as agents. PostgreSQL here allows max_connections for everyone, so the clients share a
// pool as large as both instances' pools together: the connections the desk itself works with.
// The instances' idle connections are released first, so the two never hold slots at once.
func (b *bench) claimBaseline(ctx context.Context, r *raceResult) error {
	if _, err := b.db.Exec(ctx, claimTable); err != nil {
		return err
	}
	if _, err := b.db.Exec(ctx, claimIndex); err != nil {
		return err
	}
	if _, err := b.db.Exec(ctx, `INSERT INTO bench_claims (status) SELECT 'queued' FROM generate_series(1, $1)`, r.packages); err != nil {
		return err
	}
	r.baseClients, r.baseConns = r.agents, 2*b.cfg.serverConns
	sampler := b.sampleWaits(ctx)
	defer func() { r.baseWaits = sampler.top(4) }()
	b.a.db.Reset()
	b.b.db.Reset()
	pool, err := openPool(ctx, b.dbURL, r.baseConns, nil)
	if err != nil {
		return err
	}
	defer pool.Close()
	claimed := make([][]int64, r.baseClients)
	errs := &loadtest.ErrorLog{}
	wal0, err := b.walLSN(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	var wg sync.WaitGroup
	for i := range r.baseClients {
		wg.Go(func() {
			for ctx.Err() == nil {
				var id int64
				err := pool.QueryRow(ctx, claimSQL, i).Scan(&id)
				if errors.Is(err, pgx.ErrNoRows) {
					return
				}
				if err != nil {
					errs.Add(err)
					return
				}
				claimed[i] = append(claimed[i], id)
			}
		})
	}
	wg.Wait()
	r.baseTook = time.Since(start)
	wal1, err := b.walLSN(ctx)
	if err != nil {
		return err
	}
	r.baseWAL = wal1 - wal0
	if errs.Count() > 0 {
		return fmt.Errorf("%d claims failed, first: %q", errs.Count(), errs.Samples())
	}
	seen := map[int64]bool{}
	for _, ids := range claimed {
		for _, id := range ids {
			if seen[id] {
				r.baseDouble++
			}
			seen[id] = true
			r.baseClaims++
		}
	}
	return nil
}

// walLSN is the cluster's current WAL position in bytes: the difference of two is the WAL written
// between them, by everyone on the cluster (other databases' writers included).
func (b *bench) walLSN(ctx context.Context) (int64, error) {
	var lsn int64
	err := b.db.QueryRow(ctx, `SELECT (pg_current_wal_lsn() - '0/0')::bigint`).Scan(&lsn)
	return lsn, err
}
