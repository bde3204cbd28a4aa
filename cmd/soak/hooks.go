package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/loadtest"
)

const hooksQueue = "hooks"

// fastHookP90 is what the fast receiver's p90 should stay within while the slow one hangs: a
// deliverer that polls every second and is woken by each commit, and waits for no other endpoint,
// delivers well within it. Undelivered events count at the time they waited.
const fastHookP90 = time.Second

// receiver is a bot's webhook endpoint on loopback that answers 200 after delay.
type receiver struct {
	url   string
	delay time.Duration
	srv   *http.Server

	mu          sync.Mutex
	arrivals    []arrival
	inFlight    int
	maxInFlight int
}

type arrival struct {
	handoffID, event, eventID string
	reason                    string // a warm_timeout's
	approvalID                int64  // an approval step's
	at                        time.Time
	occurred                  time.Time // when the change happened, as the desk says
}

func startReceiver(delay time.Duration) (*receiver, error) {
	ln, base, err := loadtest.Listen()
	if err != nil {
		return nil, err
	}
	r := &receiver{url: base + "/hook", delay: delay}
	r.srv = &http.Server{Handler: r, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = r.srv.Serve(ln) }() // Serve returns ErrServerClosed at close
	return r, nil
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	var event struct {
		EventID    string    `json:"event_id"`
		Event      string    `json:"event"`
		HandoffID  string    `json:"handoff_id"`
		Reason     string    `json:"reason"`
		OccurredAt time.Time `json:"occurred_at"`
		Approval   *struct {
			ID int64 `json:"id"`
		} `json:"approval"`
	}
	if err != nil || json.Unmarshal(body, &event) != nil {
		http.Error(w, "want the desk's JSON event", http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	a := arrival{handoffID: event.HandoffID, event: event.Event, eventID: event.EventID, reason: event.Reason, at: at, occurred: event.OccurredAt}
	if event.Approval != nil {
		a.approvalID = event.Approval.ID
	}
	r.arrivals = append(r.arrivals, a)
	r.inFlight++
	r.maxInFlight = max(r.maxInFlight, r.inFlight)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inFlight--
		r.mu.Unlock()
	}()
	if r.delay > 0 {
		select {
		case <-time.After(r.delay):
		case <-req.Context().Done():
			return
		}
	}
	w.WriteHeader(http.StatusOK)
}

func (r *receiver) snapshot() (arrivals []arrival, maxInFlight int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]arrival(nil), r.arrivals...), r.maxInFlight
}

// close stops the receiver, ending the requests it is sleeping on.
func (r *receiver) close() error { return r.srv.Close() }

// backlogSample is the outbox's pending rows of each key at one instant.
type backlogSample struct {
	at         time.Time
	fast, slow int
}

// slowHook: two bots' keys, one whose webhook receiver takes hook-slow-sleep to answer and one
// that answers at once. The fast receiver's delivery latency is measured before the slow one has
// anything to receive (the same-run baseline) and while it hangs, with the backlog and the rates
// of intake and delivery.
func (s *soak) slowHook(ctx context.Context) (*section, error) {
	cfg := s.cfg
	fast, err := startReceiver(0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = fast.close() }() // closed again below; the first close's error is the one reported
	slow, err := startReceiver(cfg.hookSlowSleep)
	if err != nil {
		return nil, err
	}
	defer func() { _ = slow.close() }() // as above
	dbURL, db, err := s.newDatabase(ctx, "soak_hooks", hooksQueue)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	fastKey, err := s.apiKey(dbURL, "fast-bot", hooksQueue, fast.url)
	if err != nil {
		return nil, err
	}
	slowKey, err := s.apiKey(dbURL, "slow-bot", hooksQueue, slow.url)
	if err != nil {
		return nil, err
	}
	a, err := s.startApp(ctx, "hooks", dbURL)
	if err != nil {
		return nil, err
	}

	ph := newPhases("slow receiver idle", "slow receiver hanging", "intake stopped")
	fastIn := s.newIntake(a.base, fastKey, hooksQueue, "ho_fast", ph, cfg.pgkillGiveUp)
	slowIn := s.newIntake(a.base, slowKey, hooksQueue, "ho_slow", ph, cfg.pgkillGiveUp)
	stopSampling := sampleBacklog(ctx, db)
	start := time.Now()
	waitFast := fastIn.bots(ctx, cfg.hookBots, 0)
	fmt.Fprintf(s.out, "  %d bots posting for the fast receiver; the slow receiver answers after %s\n", cfg.hookBots, cfg.hookSlowSleep)
	waitSlow := func() {}
	var slowAt, stopAt, drainedAt time.Time
	err = func() error {
		if err := loadtest.Sleep(ctx, cfg.hookIntake/3); err != nil {
			return err
		}
		slowAt = time.Now()
		ph.mark(0, slowAt)
		waitSlow = slowIn.bots(ctx, 1, time.Duration(float64(time.Second)/cfg.hookSlowRate))
		fmt.Fprintf(s.out, "  +%s a bot starts posting %.0f/s for the slow receiver\n", seconds(slowAt.Sub(start)), cfg.hookSlowRate)
		if err := loadtest.SleepUntil(ctx, start.Add(cfg.hookIntake)); err != nil {
			return err
		}
		fastIn.stop()
		slowIn.stop()
		stopAt = time.Now()
		ph.mark(1, stopAt)
		var err error
		drainedAt, err = waitDelivered(ctx, fast, fastIn, stopAt.Add(cfg.hookDrain))
		return err
	}()
	fastIn.stop()
	slowIn.stop()
	waitFast()
	waitSlow()
	backlog := stopSampling()
	if err != nil {
		return nil, err
	}
	ds, logs, err := wrapUp(ctx, db, []*app{a}, fastIn, slowIn)
	if err != nil {
		return nil, err
	}
	if err := errors.Join(fast.close(), slow.close()); err != nil {
		return nil, err
	}
	fastD, slowD := ds[0], ds[1]

	sec := &section{n: 3}
	watched := stopAt.Add(cfg.hookDrain)
	if !drainedAt.IsZero() {
		watched = drainedAt
	}
	sec.info("timeline", fmt.Sprintf("fast bots from +0s, the slow one from +%s, until +%s; delivery watched until +%s",
		seconds(slowAt.Sub(start)), seconds(stopAt.Sub(start)), seconds(watched.Sub(start))))
	fastD.report(sec, "fast bot")
	slowD.report(sec, "slow bot")
	arrivals, _ := fast.snapshot()
	slowArrivals, slowMax := slow.snapshot()
	latency, undelivered, duplicates := deliveryLatency(arrivals, fastIn, ph, watched)
	baseline, hanging := latency[ph.names[0]], latency[ph.names[1]]
	sec.info("fast: 201 → webhook, slow receiver idle (baseline)", fmt.Sprintf("%s; %d undelivered", p50p90max(baseline), undelivered[ph.names[0]]))
	sec.info("fast: 201 → webhook, slow receiver hanging", fmt.Sprintf("%s; %d undelivered", p50p90max(hanging), undelivered[ph.names[1]]))
	if len(baseline) > 0 && len(hanging) > 0 {
		b, h := durations(baseline), durations(hanging)
		sec.info("  p50 hanging / p50 baseline", ratio(float64(loadtest.Percentile(h, 50)), float64(loadtest.Percentile(b, 50))))
		p90 := loadtest.Percentile(h, 90)
		sec.expect("  p90 while the slow one hangs: not waiting on it", loadtest.Millis(p90), "≤ "+fastHookP90.String(), p90 <= fastHookP90)
	}
	sec.info("fast: repeated deliveries of one event (at-least-once)", fmt.Sprint(duplicates))
	intakeWindow := stopAt.Sub(start)
	intakeRate := rate(fastD.acked, intakeWindow)
	duringRate := rate(countArrivals(arrivals, start, stopAt), intakeWindow)
	sec.info("fast: intake rate / delivery rate while intake ran (ratio)", fmt.Sprintf("%.0f/s / %.0f/s (%s)", intakeRate, duringRate, ratio(duringRate, intakeRate)))
	sec.expect("  delivery keeps up with intake (at least 90%)", ratio(duringRate, intakeRate), "≥ ×0.90", duringRate >= 0.9*intakeRate && intakeRate > 0)
	atStop, peak := backlogAt(backlog, stopAt)
	if drainedAt.IsZero() {
		sec.expect("fast backlog after intake stopped", fmt.Sprintf("%d pending at the stop (peak %d), not drained within %s", atStop, peak, cfg.hookDrain),
			"drained", false)
	} else {
		drain := drainedAt.Sub(stopAt)
		sec.info("fast backlog at the stop (peak); drained in; drain rate", fmt.Sprintf("%d (%d); %s; %.0f/s", atStop, peak, seconds(drain),
			rate(countArrivals(arrivals, stopAt, drainedAt), drain)))
	}
	sec.info("slow receiver: requests received, most at once", fmt.Sprintf("%d, %d", len(slowArrivals), slowMax))
	sec.note("backlog (pending outbox rows fast/slow, every second): %s", backlogLine(backlog, start))
	sec.note("the instance logged: %s", logs.warningLine())
	return sec, nil
}

// deliveryLatency is, per phase of the 201, the time from each fast package's 201 to its queued
// event's first arrival. A package whose event had not arrived by end counts with the time it
// waited, a lower bound, so that what never came raises the percentiles rather than drops out;
// undelivered counts those. duplicates counts repeated arrivals of one event.
func deliveryLatency(arrivals []arrival, in *intake, ph *phases, end time.Time) (latency map[string][]time.Duration, undelivered map[string]int, duplicates int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	latency, undelivered = map[string][]time.Duration{}, map[string]int{}
	seen := map[string]bool{}
	first := map[string]time.Time{}
	for _, a := range arrivals {
		if seen[a.eventID] {
			duplicates++
			continue
		}
		seen[a.eventID] = true
		if _, ok := first[a.handoffID]; a.event == "queued" && !ok {
			first[a.handoffID] = a.at
		}
	}
	for id, acked := range in.acked {
		phase := ph.at(acked)
		at, ok := first[id]
		if !ok {
			undelivered[phase]++
			at = end
		}
		latency[phase] = append(latency[phase], at.Sub(acked))
	}
	return latency, undelivered, duplicates
}

func countArrivals(arrivals []arrival, from, to time.Time) int {
	n := 0
	for _, a := range arrivals {
		if !a.at.Before(from) && a.at.Before(to) {
			n++
		}
	}
	return n
}

// waitDelivered waits until the fast receiver has every acknowledged package's queued event, or
// until limit, and returns when that was (zero if never).
func waitDelivered(ctx context.Context, r *receiver, in *intake, limit time.Time) (time.Time, error) {
	for {
		arrivals, _ := r.snapshot()
		got := map[string]bool{}
		for _, a := range arrivals {
			if a.event == "queued" {
				got[a.handoffID] = true
			}
		}
		missing := 0
		for _, id := range in.ackedIDs() {
			if !got[id] {
				missing++
			}
		}
		if missing == 0 {
			return time.Now(), nil
		}
		if time.Now().After(limit) {
			return time.Time{}, nil
		}
		if err := loadtest.Sleep(ctx, 100*time.Millisecond); err != nil {
			return time.Time{}, err
		}
	}
}

// sampleBacklog reads the outbox's pending rows per key every second until the returned function
// is called, which returns the samples.
func sampleBacklog(ctx context.Context, db *pgxpool.Pool) (stop func() []backlogSample) {
	ctx, cancel := context.WithCancel(ctx)
	var samples []backlogSample
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			sample := backlogSample{at: time.Now()}
			err := db.QueryRow(ctx, `
				SELECT count(*) FILTER (WHERE k.name = 'fast-bot'), count(*) FILTER (WHERE k.name = 'slow-bot')
				FROM webhook_outbox o JOIN api_keys k ON k.id = o.api_key_id WHERE o.state = 'pending'`).Scan(&sample.fast, &sample.slow)
			if err == nil {
				samples = append(samples, sample)
			}
			_ = loadtest.Sleep(ctx, time.Second) // a cancelled sleep ends the loop
		}
	}()
	return func() []backlogSample {
		cancel()
		<-done
		return samples
	}
}

// backlogAt is the fast backlog of the last sample before t, and the peak over all samples.
func backlogAt(samples []backlogSample, t time.Time) (at, peak int) {
	for _, s := range samples {
		if !s.at.After(t) {
			at = s.fast
		}
		peak = max(peak, s.fast)
	}
	return at, peak
}

func backlogLine(samples []backlogSample, start time.Time) string {
	line := ""
	for i, s := range samples {
		if i > 0 {
			line += " "
		}
		line += fmt.Sprintf("+%.0fs %d/%d", s.at.Sub(start).Seconds(), s.fast, s.slow)
	}
	return line
}
