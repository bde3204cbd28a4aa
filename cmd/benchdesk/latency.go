package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// latencyResult is scenario 1: packages posted to instance A, cards arriving on sockets held by
// instance B (A's coalesced NOTIFY wakes B's LISTEN connection, B's hub reads the events and
// fans them out), against the bare NOTIFY→LISTEN round trip on the same database.
type latencyResult struct {
	sockets, users, packages int
	rate                     float64
	all, first               []time.Duration // sorted: every (package, socket) arrival; each package's first
	notify                   []time.Duration // sorted NOTIFY→LISTEN round trips
	post                     []time.Duration // sorted intake POST answers
	missing                  int             // (package, socket) pairs that never arrived
	lost                     int             // sockets the server closed
	frameBytes               int
	late                     int    // packages whose first arrival took over lateAfter
	xids                     string // what held the feed's mark back meanwhile, sampled
	errors                   loadtest.ErrorLog
}

// lateAfter marks a first arrival that no NOTIFY explains: the hub read, found the card's
// transaction above the mark, and the next read came with a later wake or the 1s poll.
const lateAfter = 100 * time.Millisecond

const notifyChannel = "bench_ping"

func (b *bench) latency(ctx context.Context, out io.Writer, res *result) (*latencyResult, error) {
	cfg := b.cfg
	r := &latencyResult{sockets: cfg.latencySockets, users: min(cfg.users, cfg.latencySockets), packages: cfg.latencyPackages, rate: cfg.latencyRate}
	var err error
	if r.notify, err = b.notifyRoundTrips(ctx, cfg.latencyPackages); err != nil {
		return nil, fmt.Errorf("NOTIFY baseline: %w", err)
	}
	fmt.Fprintf(out, "  baseline: %d NOTIFY→LISTEN round trips: p50 %s p99 %s\n", len(r.notify), loadtest.Millis(loadtest.Percentile(r.notify, 50)), loadtest.Millis(loadtest.Percentile(r.notify, 99)))

	t0 := time.Now()
	if err := b.farm.dialDesk(b.b.url, queueLive, b.session[:r.users], r.sockets); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  %d sockets on B (%d agents × %d) ready in %s\n", r.sockets, r.users, (r.sockets+r.users-1)/r.users, time.Since(t0).Round(time.Millisecond))
	if err := loadtest.SleepUntil(ctx, time.Now().Add(500*time.Millisecond)); err != nil { // presence flush, quiet start
		return nil, err
	}

	n := cfg.latencyPackages
	ids := make([]string, n)
	bodies := make([][]byte, n)
	for i := range n {
		ids[i] = handoffID("live", i)
		if bodies[i], err = b.bodyFor(queueLive, ids[i]); err != nil {
			return nil, err
		}
	}
	sent := make([]int64, n) // wall clock just before each POST, Unix ns
	posts := make([]time.Duration, n)
	interval := time.Duration(float64(time.Second) / cfg.latencyRate)
	xids := b.sampleXIDs(ctx)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range n {
		if err := loadtest.SleepUntil(ctx, start.Add(time.Duration(i)*interval)); err != nil {
			return nil, err
		}
		// Open loop: each POST has its own goroutine, so a slow answer does not delay the next.
		wg.Go(func() {
			t := time.Now()
			sent[i] = t.UnixNano()
			if err := b.post(ctx, b.a.url, bodies[i]); err != nil {
				r.errors.Add(err)
			}
			posts[i] = time.Since(t)
		})
	}
	wg.Wait()
	r.xids = xids.summary()
	fmt.Fprintf(out, "  %d packages posted to A at %.0f/s in %s\n", n, cfg.latencyRate, time.Since(start).Round(time.Millisecond))

	reply, err := b.farm.collect(ids, cfg.collectTimeout)
	if err != nil {
		return nil, err
	}
	r.lost = reply.Lost
	var sizes []int
	for i, id := range ids {
		first := int64(0)
		for _, at := range reply.Arrivals[id] {
			if at == 0 {
				r.missing++
				continue
			}
			r.all = append(r.all, time.Duration(at-sent[i]))
			if first == 0 || at < first {
				first = at
			}
		}
		if first != 0 {
			r.first = append(r.first, time.Duration(first-sent[i]))
			if time.Duration(first-sent[i]) > lateAfter {
				r.late++
			}
		}
		if s := reply.Sizes[id]; s > 0 {
			sizes = append(sizes, s)
		}
	}
	r.frameBytes = loadtest.Median(sizes)
	slices.Sort(r.all)
	slices.Sort(r.first)
	r.post = sorted(posts)
	if _, err := b.farm.closeSockets(); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  desk: %d arrivals (%d missing), frame %d bytes: p50 %s p99 %s; first arrival p50 %s p99 %s; POST p50 %s\n",
		len(r.all), r.missing, r.frameBytes, loadtest.Millis(loadtest.Percentile(r.all, 50)), loadtest.Millis(loadtest.Percentile(r.all, 99)),
		loadtest.Millis(loadtest.Percentile(r.first, 50)), loadtest.Millis(loadtest.Percentile(r.first, 99)), loadtest.Millis(loadtest.Percentile(r.post, 50)))
	fmt.Fprintf(out, "  %d of %d packages first arrived after %s; meanwhile the %s\n", r.late, n, lateAfter, r.xids)

	if r.errors.Count() > 0 {
		res.fail("1: %d intake POSTs failed, first: %q", r.errors.Count(), r.errors.Samples())
	}
	if r.missing > 0 {
		res.fail("1: %d of %d (package, socket) cards never arrived within %s", r.missing, n*r.sockets, cfg.collectTimeout)
	}
	if r.lost > 0 {
		res.fail("1: the server closed %d sockets", r.lost)
	}
	return r, nil
}

// notifyRoundTrips is the floor under cross-instance latency: one connection LISTENs, another
// sends pg_notify (as the desk's notifier does), and the clock runs until the listener has it.
func (b *bench) notifyRoundTrips(ctx context.Context, n int) ([]time.Duration, error) {
	listener, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return nil, err
	}
	defer func() { _ = listener.Close(context.WithoutCancel(ctx)) }() // a close error cannot change the figures
	notifier, err := pgx.Connect(ctx, b.dbURL)
	if err != nil {
		return nil, err
	}
	defer func() { _ = notifier.Close(context.WithoutCancel(ctx)) }() // a close error cannot change the figures
	if _, err := listener.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		return nil, err
	}
	const warmup = 10
	var out []time.Duration
	for i := range n + warmup {
		t := time.Now()
		if _, err := notifier.Exec(ctx, `SELECT pg_notify($1, '')`, notifyChannel); err != nil {
			return nil, err
		}
		waitCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := listener.WaitForNotification(waitCtx)
		cancel()
		if err != nil {
			return nil, err
		}
		if i >= warmup {
			out = append(out, time.Since(t))
		}
		if err := loadtest.SleepUntil(ctx, time.Now().Add(2*time.Millisecond)); err != nil {
			return nil, err
		}
	}
	return sorted(out), nil
}
