package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/loadtest"
)

const (
	// Bots retry at firstBackoff, doubling to maxBackoff, rather than waiting out the desk's
	// Retry-After (5 s): their retries are what time the recovery, so they must come often
	// enough to time it to within a second.
	firstBackoff = 50 * time.Millisecond
	maxBackoff   = time.Second
	// patience is how long a patient bot waits for one answer: far beyond any deadline of the
	// desk's, so that a hang shows as a long answer rather than as the bot's own timeout.
	patience = 60 * time.Second
)

// intake is bots posting packages with one key to one queue of one instance. Each bot sends a
// package under its own handoff_id, the API's idempotency key, and sends the same body again
// after a 5xx or a lost answer until it is answered 2xx or the bot gives up.
type intake struct {
	s    *soak
	base string
	// bases, when set, replace base: packages go to them in turn, and a retry goes to the next
	// one, as through a load balancer in front of several instances.
	bases []string
	// mode, when set, is the transfer_mode of the packages ("warm" or "cold").
	mode   string
	key    string
	queue  string
	prefix string
	phases *phases
	tally  *tally
	seq    atomic.Int64
	// stopped is when the load stopped (UnixNano), 0 before: no new packages after it, and no
	// retries past it plus the give-up time.
	stopped atomic.Int64
	giveUp  time.Duration
	// observe, when set, sees every answer.
	observe func(phase string, a answer)

	mu         sync.Mutex
	acked      map[string]time.Time // handoff_id → when its 2xx came
	replays    int                  // 200s: a retry whose first try had committed
	unanswered []string             // packages given up on without a 2xx
	latency    map[string][]time.Duration
	unexpected loadtest.ErrorLog // answers that are neither 2xx nor worth retrying
}

func (s *soak) newIntake(base, key, queue, prefix string, ph *phases, giveUp time.Duration) *intake {
	return &intake{s: s, base: base, key: key, queue: queue, prefix: prefix, phases: ph, tally: newTally(ph.names...),
		giveUp: giveUp, acked: map[string]time.Time{}, latency: map[string][]time.Duration{}}
}

// bots runs n bots until stop is called, each sending every pace (0: as fast as answered), and
// returns a function that waits for them.
func (in *intake) bots(ctx context.Context, n int, pace time.Duration) (wait func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			next := time.Now()
			for ctx.Err() == nil && in.stopped.Load() == 0 {
				if pace > 0 {
					if loadtest.SleepUntil(ctx, next) != nil {
						return
					}
					next = next.Add(pace)
				}
				if _, err := in.send(ctx); err != nil {
					return
				}
			}
		})
	}
	return wg.Wait
}

// stop stops the bots: each finishes, or gives up on, the package it is sending.
func (in *intake) stop() { in.stopped.CompareAndSwap(0, time.Now().UnixNano()) }

// send posts a new package until it is answered 2xx, refused, or given up on, and returns its id.
func (in *intake) send(ctx context.Context) (string, error) {
	n := in.seq.Add(1)
	id := fmt.Sprintf("%s_%07d", in.prefix, n)
	body, err := in.s.bodyAs(id, in.queue, in.mode)
	if err != nil {
		return "", err
	}
	backoff := firstBackoff
	for attempt := 0; ; attempt++ {
		base := in.base
		if len(in.bases) > 0 {
			base = in.bases[(int(n)+attempt)%len(in.bases)]
		}
		a := in.s.submit(ctx, base, in.key, body, patience)
		now := time.Now()
		phase := in.phases.at(now)
		in.tally.add(phase, a.kind())
		if in.observe != nil {
			in.observe(phase, a)
		}
		switch {
		case a.ok():
			in.ack(id, now, phase, a)
			return id, nil
		case ctx.Err() != nil:
			return id, ctx.Err()
		case !a.retryable():
			in.unexpected.Add(fmt.Errorf("%s: %s", id, a.kind()))
			in.giveUpOn(id)
			return id, nil
		}
		if stopped := in.stopped.Load(); stopped != 0 && now.After(time.Unix(0, stopped).Add(in.giveUp)) {
			in.giveUpOn(id)
			return id, nil
		}
		if err := loadtest.Sleep(ctx, jitter(backoff)); err != nil {
			return id, err
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (in *intake) ack(id string, at time.Time, phase string, a answer) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.acked[id] = at
	if a.status == 200 {
		in.replays++
	}
	in.latency[phase] = append(in.latency[phase], a.took)
}

func (in *intake) giveUpOn(id string) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.unanswered = append(in.unanswered, id)
}

// unansweredSet are the packages given up on without a 2xx.
func (in *intake) unansweredSet() map[string]bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	set := make(map[string]bool, len(in.unanswered))
	for _, id := range in.unanswered {
		set[id] = true
	}
	return set
}

// ackedIDs are the packages answered 2xx.
func (in *intake) ackedIDs() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	ids := make([]string, 0, len(in.acked))
	for id := range in.acked {
		ids = append(ids, id)
	}
	return ids
}

// ackTimes are the instants of the 2xx answers, in order.
func (in *intake) ackTimes() []time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	times := make([]time.Time, 0, len(in.acked))
	for _, t := range in.acked {
		times = append(times, t)
	}
	slices.SortFunc(times, time.Time.Compare)
	return times
}

// acksBetween counts the 2xx answers in [from, to).
func (in *intake) acksBetween(from, to time.Time) int {
	n := 0
	for _, t := range in.ackTimes() {
		if !t.Before(from) && t.Before(to) {
			n++
		}
	}
	return n
}

// firstAckAfter is the first 2xx at or after t, or the zero time if none came.
func (in *intake) firstAckAfter(t time.Time) time.Time {
	for _, a := range in.ackTimes() {
		if !a.Before(t) {
			return a
		}
	}
	return time.Time{}
}

// durability is what the database holds of the packages the bots sent.
type durability struct {
	acked, lost       int // answered 2xx; of those, not stored
	replays           int // answered 200: a retry whose first try had committed
	twice             int // handoff ids stored more than once, or queued twice in the event log
	unanswered, saved int // given up on without a 2xx; of those, stored all the same
}

// check compares the packages the bots were told were stored with the database.
func (in *intake) check(ctx context.Context, db *pgxpool.Pool) (durability, error) {
	acked := in.ackedIDs()
	in.mu.Lock()
	unanswered := slices.Clone(in.unanswered)
	replays := in.replays
	in.mu.Unlock()
	d := durability{acked: len(acked), unanswered: len(unanswered), replays: replays}
	var present int
	if err := db.QueryRow(ctx, `SELECT count(DISTINCT handoff_id) FROM handoffs WHERE handoff_id = ANY($1)`, acked).Scan(&present); err != nil {
		return d, err
	}
	d.lost = len(acked) - present
	if err := db.QueryRow(ctx, `SELECT count(*) FROM handoffs WHERE handoff_id = ANY($1)`, unanswered).Scan(&d.saved); err != nil {
		return d, err
	}
	err := db.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM (SELECT handoff_id FROM handoffs WHERE handoff_id LIKE $1 || '%' GROUP BY 1 HAVING count(*) > 1) t)
			+ (SELECT count(*) FROM (SELECT e.handoff_id FROM events e JOIN handoffs h ON h.id = e.handoff_id
				WHERE e.kind = 'queued' AND h.handoff_id LIKE $1 || '%' GROUP BY 1 HAVING count(*) > 1) t)`, in.prefix).Scan(&d.twice)
	return d, err
}

// report adds the durability invariants to a section.
func (d durability) report(sec *section, who string) {
	sec.info(who+": packages acknowledged (of which 200: a retry's first try had committed)", fmt.Sprintf("%d (%d)", d.acked, d.replays))
	sec.invariant(who+": acknowledged but not stored", fmt.Sprintf("%d of %d", d.lost, d.acked), "0 of > 0", d.lost == 0 && d.acked > 0)
	sec.invariant(who+": stored or queued twice", fmt.Sprint(d.twice), "0", d.twice == 0)
	if d.unanswered > 0 {
		sec.info(who+": given up on without a 2xx; stored all the same", fmt.Sprintf("%d; %d", d.unanswered, d.saved))
	}
}

// jitter spreads d by ±20%, so that bots refused together do not come back together.
func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*rand.Float64())) //nolint:gosec // G404: spreading retries needs no secure randomness.
}
