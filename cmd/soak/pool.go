package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/loadtest"
)

const poolQueue = "pool"

// poolExhaustion: bots post and read while a transaction of the tool's holds ACCESS EXCLUSIVE on
// the packages table, so that every request that touches it holds a pooled connection and waits,
// and the rest wait for a connection. The desk should answer 503 with Retry-After within its
// deadlines rather than hang, keep /readyz at 200 (busy is not down), store every package it
// acknowledged, and log truthfully what became of packages whose clients left.
func (s *soak) poolExhaustion(ctx context.Context) (*section, error) {
	cfg := s.cfg
	dbURL, db, err := s.newDatabase(ctx, "soak_pool", poolQueue)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	key, err := s.apiKey(dbURL, "pool-bot", poolQueue, "")
	if err != nil {
		return nil, err
	}
	a, err := s.startApp(ctx, "pool", dbURL, "DATABASE_ACQUIRE_TIMEOUT="+cfg.poolAcquireTimeout.String(),
		"REQUEST_TIMEOUT="+cfg.poolRequestTimeout.String())
	if err != nil {
		return nil, err
	}

	ph := newPhases("before the lock", "lock held", "after release")
	patient := s.newIntake(a.base, key, poolQueue, "ho_patient", ph, cfg.pgkillGiveUp)
	leaving := s.newIntake(a.base, key, poolQueue, "ho_leaving", ph, 0)
	var seeded []string
	for range 8 {
		id, err := patient.send(ctx)
		if err != nil {
			return nil, err
		}
		seeded = append(seeded, id)
	}
	p := &poolRun{s: s, base: a.base, key: key, phases: ph, seeded: seeded, leaving: leaving, reads: newTally(ph.names...),
		readyz: newTally(ph.names...), healthz: newTally(ph.names...), patientTook: map[string][]time.Duration{}}
	patient.observe = p.observe

	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	third := cfg.poolBots / 3
	waitPatient := patient.bots(ctx, third, 0)
	var wg sync.WaitGroup
	for i := range cfg.poolBots - 2*third {
		wg.Go(func() { p.reader(loadCtx, i) })
	}
	for range third {
		wg.Go(func() { p.leaver(loadCtx, cfg.poolClientTimeout) })
	}
	wg.Go(func() { p.poll(loadCtx, "/readyz", p.readyz) })
	wg.Go(func() { p.poll(loadCtx, "/healthz", p.healthz) })
	fmt.Fprintf(s.out, "  %d bots on %s: %d post and retry, %d post and leave after %s, %d read\n",
		cfg.poolBots, a.base, third, third, cfg.poolClientTimeout, cfg.poolBots-2*third)
	start := time.Now()
	var lockAt, releaseAt time.Time
	err = func() error {
		if err := loadtest.Sleep(ctx, cfg.poolBefore); err != nil {
			return err
		}
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }() // the lock ended with the rollback
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `LOCK TABLE handoffs IN ACCESS EXCLUSIVE MODE`); err != nil {
			return errors.Join(err, tx.Rollback(ctx))
		}
		lockAt = time.Now()
		ph.mark(0, lockAt)
		fmt.Fprintf(s.out, "  +%s ACCESS EXCLUSIVE on handoffs taken\n", seconds(lockAt.Sub(start)))
		sleepErr := loadtest.Sleep(ctx, cfg.poolHold)
		if err := tx.Rollback(context.WithoutCancel(ctx)); err != nil {
			return err
		}
		releaseAt = time.Now()
		ph.mark(1, releaseAt)
		fmt.Fprintf(s.out, "  +%s released\n", seconds(releaseAt.Sub(start)))
		if sleepErr != nil {
			return sleepErr
		}
		return loadtest.Sleep(ctx, cfg.poolAfter)
	}()
	patient.stop()
	stopLoad()
	stopAt := time.Now()
	waitPatient()
	wg.Wait()
	if err != nil {
		return nil, err
	}
	// A package whose client left is logged once its batch answers, a moment after the release.
	if err := loadtest.Sleep(ctx, 2*time.Second); err != nil {
		return nil, err
	}
	ds, logs, err := wrapUp(ctx, db, []*app{a}, patient, leaving)
	if err != nil {
		return nil, err
	}
	patientD, leavingD := ds[0], ds[1]

	sec := &section{n: 4}
	sec.info("instance", fmt.Sprintf("pool_max_conns=%d, DATABASE_ACQUIRE_TIMEOUT=%s, REQUEST_TIMEOUT=%s", cfg.poolConns, cfg.poolAcquireTimeout, cfg.poolRequestTimeout))
	sec.info("timeline", fmt.Sprintf("lock from +%s to +%s; load until +%s", seconds(lockAt.Sub(start)), seconds(releaseAt.Sub(start)), seconds(stopAt.Sub(start))))
	patientD.report(sec, "retrying bots")
	leavingD.report(sec, "leaving bots")
	locked := ph.names[1]
	sec.refusals("5xx to patient clients while locked that were 503 with Retry-After",
		func(k string) bool { return strings.HasPrefix(k, "5") }, []*tally{patient.tally, p.reads}, locked)
	p.mu.Lock()
	longest := durations(p.patientTook[locked])
	p.mu.Unlock()
	if len(longest) > 0 {
		limit := cfg.poolRequestTimeout + time.Second
		sec.expect("longest answer to a patient client while locked (no hangs)", seconds(longest[len(longest)-1]), "≤ "+seconds(limit), longest[len(longest)-1] <= limit)
		sec.info("  answers to patient clients while locked", p50p90max(longest))
	}
	ready := p.readyz.count(locked, func(k string) bool { return strings.HasPrefix(k, "200") })
	polled := p.readyz.count(locked, func(string) bool { return true })
	sec.expect("/readyz while locked answering 200 (busy is not down)", fmt.Sprintf("%d of %d", ready, polled), "all", ready == polled && polled > 0)
	healthy := p.healthz.count(locked, func(k string) bool { return strings.HasPrefix(k, "200") })
	sec.info("/healthz while locked answering 200", fmt.Sprintf("%d of %d", healthy, p.healthz.count(locked, func(string) bool { return true })))
	if first := patient.firstAckAfter(releaseAt); !first.IsZero() {
		sec.info("first 2xx to a retrying bot after the release", "+"+seconds(first.Sub(releaseAt)))
	}
	sec.info("2xx answer to retrying bots before the lock / after (p50 ratio)", fmt.Sprintf("%s / %s", p50p90max(patient.latency[ph.names[0]]),
		p50p90max(patient.latency[ph.names[2]])))
	leftIDs := leaving.unansweredSet()
	committed := 0
	for _, msg := range []string{"client left; package committed", "deadline passed; package committed"} {
		for _, id := range logs.ids[msg] {
			if leftIDs[id] {
				committed++
			}
		}
	}
	sec.expect("leaving bots: stored ones logged as committed after the client left; request ERROR lines",
		fmt.Sprintf("%d of %d; %d", committed, leavingD.saved, logs.requestErrors()), "all; 0", committed == leavingD.saved && logs.requestErrors() == 0)
	sec.answers("retrying posts", patient.tally)
	sec.answers("leaving posts", leaving.tally)
	sec.answers("reads", p.reads)
	sec.answers("/readyz", p.readyz)
	sec.note("the instance logged: %s", logs.warningLine())
	return sec, nil
}

// poolRun is the clients of poolExhaustion other than the retrying bots.
type poolRun struct {
	s       *soak
	base    string
	key     string
	phases  *phases
	seeded  []string
	leaving *intake
	reads   *tally
	readyz  *tally
	healthz *tally

	mu          sync.Mutex
	patientTook map[string][]time.Duration // by phase: every answer to a patient client
}

func (p *poolRun) observe(phase string, a answer) {
	if a.err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.patientTook[phase] = append(p.patientTook[phase], a.took)
}

// reader asks for a package's status again and again, waiting as long as the desk takes.
func (p *poolRun) reader(ctx context.Context, i int) {
	for n := i; ctx.Err() == nil; n++ {
		a := p.s.read(ctx, p.base, p.key, p.seeded[n%len(p.seeded)])
		if ctx.Err() != nil {
			return
		}
		phase := p.phases.at(time.Now())
		p.reads.add(phase, a.kind())
		p.observe(phase, a)
		if a.retryable() {
			_ = loadtest.Sleep(ctx, jitter(firstBackoff)) // a cancelled sleep ends the loop
		}
	}
}

// leaver posts new packages and waits at most timeout for each answer, never sending one again.
func (p *poolRun) leaver(ctx context.Context, timeout time.Duration) {
	in := p.leaving
	for ctx.Err() == nil {
		id := fmt.Sprintf("%s_%07d", in.prefix, in.seq.Add(1))
		body, err := p.s.body(id, in.queue)
		if err != nil {
			in.unexpected.Add(err)
			return
		}
		a := p.s.submit(ctx, p.base, p.key, body, timeout)
		if ctx.Err() != nil && a.err != nil {
			return // the load stopped, not the desk
		}
		now := time.Now()
		phase := p.phases.at(now)
		in.tally.add(phase, a.kind())
		switch {
		case a.ok():
			in.ack(id, now, phase, a)
		case a.retryable():
			// Gone for good: a package refused at its deadline may still commit, as may one whose
			// answer did not come in time.
			in.giveUpOn(id)
			if a.err == nil {
				_ = loadtest.Sleep(ctx, jitter(firstBackoff)) // a cancelled sleep ends the loop
			}
		default:
			in.unexpected.Add(fmt.Errorf("%s: %s", id, a.kind()))
		}
	}
}

// poll asks path every 250 ms.
func (p *poolRun) poll(ctx context.Context, path string, t *tally) {
	for ctx.Err() == nil {
		status, body, err := p.s.get(ctx, p.base+path)
		if ctx.Err() != nil {
			return
		}
		kind := fmt.Sprintf("%d %s", status, body)
		if err != nil {
			kind = "error: " + err.Error()
		} else if status != http.StatusOK && status != http.StatusServiceUnavailable {
			kind = fmt.Sprintf("%d", status)
		}
		t.add(p.phases.at(time.Now()), kind)
		_ = loadtest.Sleep(ctx, 250*time.Millisecond) // a cancelled sleep ends the loop
	}
}
