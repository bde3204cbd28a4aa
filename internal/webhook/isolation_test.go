package webhook_test

import (
	"context"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/webhook"
)

// waitFor polls until cond holds, and fails the test if it never does: a bound on liveness, far
// beyond what the wait takes, not a measure of speed.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// rowsOf lists a key's outbox rows, newest first.
func (f *fixture) rowsOf(t *testing.T, keyID int64) []webhook.Delivery {
	t.Helper()
	rows, err := webhook.Deliveries(t.Context(), f.db, webhook.DeliveryFilter{APIKeyID: keyID, Limit: webhook.MaxDeliveryLimit})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func countState(rows []webhook.Delivery, state string) int {
	n := 0
	for _, r := range rows {
		if r.State == state {
			n++
		}
	}
	return n
}

// run starts d.Run until the test ends.
func run(t *testing.T, d *webhook.Deliverer) {
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil after its context ends", err)
		}
	})
}

// hanging answers every request only once release is closed.
func hanging(release <-chan struct{}) func(int, *http.Request) int {
	return func(_ int, r *http.Request) int {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		return http.StatusOK
	}
}

func TestSlowEndpointDoesNotDelayOthers(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	f := setup(t, hanging(release))
	fast := newBot(t, always(http.StatusOK))
	fastKey := f.apiKey(t, "fast", fast.server.URL+"/hook")
	// The slow endpoint's rows are older, so a claim in due order meets them first.
	for i := range 20 {
		f.enqueue(t, "slow"+strconv.Itoa(i), "queued")
	}
	for i := range 20 {
		enqueue(t, f.db, newEvent(fastKey.ID, "fast"+strconv.Itoa(i), "queued"))
	}
	// Requests may take a minute, far longer than the test waits: the slow ones end only when
	// released.
	run(t, f.deliverer(t, webhook.Options{MaxInFlight: 4, Timeout: time.Minute}))

	waitFor(t, "every fast delivery recorded while the slow endpoint hangs", func() bool {
		return countState(f.rowsOf(t, fastKey.ID), webhook.StateDelivered) == 20
	})
	if got := len(fast.receipts()); got != 20 {
		t.Errorf("the fast bot received %d requests, want each of its 20 events once", got)
	}
	if got := len(f.bot.receipts()); got != 4 {
		t.Errorf("the slow bot has %d requests hanging, want 4 (MaxInFlight)", got)
	}
	if n := countState(f.rowsOf(t, f.key.ID), webhook.StatePending); n != 20 {
		t.Errorf("%d of the slow endpoint's rows pending, want all 20 while it hangs", n)
	}

	close(release)
	waitFor(t, "the slow endpoint's rows delivered once it answers", func() bool {
		return countState(f.rowsOf(t, f.key.ID), webhook.StateDelivered) == 20
	})
}

func TestEndpointRequestsAreBoundedAndWaitingRowsKeepTheirAttempts(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var (
		mu              sync.Mutex
		now, mostAtOnce int
	)
	f := setup(t, func(n int, r *http.Request) int {
		mu.Lock()
		now++
		mostAtOnce = max(mostAtOnce, now)
		mu.Unlock()
		defer func() {
			mu.Lock()
			now--
			mu.Unlock()
		}()
		return hanging(release)(n, r)
	})
	for i := range 10 {
		f.enqueue(t, "h"+strconv.Itoa(i), "queued")
	}
	d := f.deliverer(t, webhook.Options{MaxInFlight: 3, Timeout: time.Minute})
	run(t, d)

	waitFor(t, "3 requests in flight", func() bool { return len(f.bot.receipts()) == 3 })
	// Another pass finds the endpoint's slots taken and as many rows waiting for them: its other
	// rows are not even claimed.
	if n := deliverDue(t, d); n != 0 {
		t.Errorf("a pass claimed %d rows of an endpoint with every slot taken, want 0", n)
	}
	tried := map[int]int{}
	for _, r := range f.rowsOf(t, f.key.ID) {
		tried[r.Attempts]++
	}
	if tried[1] != 6 || tried[0] != 4 {
		t.Errorf("rows by attempts = %v, want 6 claimed (3 in flight, 3 waiting for a slot) and 4 with none used", tried)
	}

	close(release)
	waitFor(t, "every row delivered", func() bool {
		return countState(f.rowsOf(t, f.key.ID), webhook.StateDelivered) == 10
	})
	mu.Lock()
	defer mu.Unlock()
	if mostAtOnce != 3 {
		t.Errorf("the endpoint had up to %d requests at once, want 3", mostAtOnce)
	}
}

func TestBreakerPausesAFailingEndpoint(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	f := setup(t, func(int, *http.Request) int {
		if healthy.Load() {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	other := newBot(t, always(http.StatusOK))
	otherKey := f.apiKey(t, "other", other.server.URL+"/hook")
	for i := range 6 {
		f.enqueue(t, "h"+strconv.Itoa(i), "queued")
	}
	const cooldown = time.Minute
	opts := webhook.Options{MaxInFlight: 1, BreakerThreshold: 3, BreakerCooldown: cooldown, BackoffBase: time.Second}
	d := f.deliverer(t, opts)

	// Passes send the oldest rows one at a time (MaxInFlight), each failing, until the third
	// failure in a row...
	for range 3 {
		if deliverDue(t, d) == 0 || len(f.bot.receipts()) >= 3 {
			break
		}
	}
	// ...which opens the breaker: rows claimed and waiting for the slot go back unsent, the
	// endpoint's rows wait with their attempts unused, and another endpoint's go on.
	openedAt := f.clock.Now()
	enqueue(t, f.db, newEvent(otherKey.ID, "o1", "queued"))
	if n := deliverDue(t, d); n != 1 || len(other.receipts()) != 1 {
		t.Fatalf("with the breaker open: claimed %d rows and the other bot received %d, want its 1 row only", n, len(other.receipts()))
	}
	if got := len(f.bot.receipts()); got != 3 {
		t.Errorf("the failing endpoint received %d requests, want 3 (the threshold)", got)
	}
	tried := map[int]int{}
	for _, r := range f.rowsOf(t, f.key.ID) {
		tried[r.Attempts]++
		within(t, r.HandoffID+" next_attempt_at", r.NextAttemptAt, openedAt.Add(cooldown), time.Millisecond)
	}
	if tried[1] != 3 || tried[0] != 3 {
		t.Errorf("rows by attempts = %v, want 3 failed once and 3 never tried", tried)
	}
	// Another instance, whose own breaker is closed, leaves the held rows alone too.
	if n := deliverDue(t, f.deliverer(t, opts)); n != 0 {
		t.Errorf("another deliverer claimed %d held rows, want 0", n)
	}
	f.clock.Advance(cooldown / 2)
	if n := deliverDue(t, d); n != 0 {
		t.Errorf("claimed %d rows halfway through the cool-down, want 0", n)
	}

	// After the cool-down one row probes the endpoint; it fails, and the breaker opens again.
	f.clock.Advance(cooldown/2 + time.Second)
	if n := deliverDue(t, d); n != 1 {
		t.Errorf("claimed %d rows after the cool-down, want the 1 probe", n)
	}
	if n := deliverDue(t, d); n != 0 || len(f.bot.receipts()) != 4 {
		t.Errorf("after a failed probe: claimed %d more rows, %d requests in all; want 0 and 4", n, len(f.bot.receipts()))
	}

	// Once the endpoint answers, the next probe closes the breaker and the rows go.
	healthy.Store(true)
	f.clock.Advance(cooldown + time.Second)
	for range 10 {
		if deliverDue(t, d) == 0 {
			break
		}
	}
	rows := f.rowsOf(t, f.key.ID)
	if n := countState(rows, webhook.StateDelivered); n != 6 {
		t.Errorf("%d of 6 rows delivered after the endpoint recovered", n)
	}
	tried = map[int]int{}
	for _, r := range rows {
		tried[r.Attempts]++
	}
	if tried[1] != 3 || tried[2] != 2 || tried[3] != 1 {
		t.Errorf("rows by attempts = %v, want the 3 that waited delivered on their first, 2 on their second, the probe on its third", tried)
	}
}

func TestRowWaitingPastItsLeaseGoesBackUnsent(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}, 2), make(chan struct{})
	f := setup(t, func(n int, r *http.Request) int {
		started <- struct{}{}
		return hanging(release)(n, r)
	})
	f.enqueue(t, "h1", "queued")
	f.enqueue(t, "h2", "queued")
	const lease = time.Minute
	d := f.deliverer(t, webhook.Options{MaxInFlight: 1, Lease: lease, Timeout: 10 * time.Second})

	// One row is sent and hangs; the other was claimed with it and waits for the slot...
	type passed struct {
		n   int
		err error
	}
	done := make(chan passed, 1)
	go func() {
		n, err := d.DeliverDue(t.Context())
		done <- passed{n, err}
	}()
	<-started
	// ...until its lease has nearly run out, when another deliverer could claim it again.
	f.clock.Advance(lease - 10*time.Second)
	close(release)
	if p := <-done; p.err != nil || p.n != 2 {
		t.Fatalf("the pass claimed %d rows (%v), want 2: one sent, one waiting", p.n, p.err)
	}
	if got := len(f.bot.receipts()); got != 1 {
		t.Errorf("the bot received %d requests, want 1: the row that waited past its lease is not sent", got)
	}
	tried := map[string]int{}
	for _, r := range f.rowsOf(t, f.key.ID) {
		tried[r.State+"/"+strconv.Itoa(r.Attempts)]++
	}
	if tried["delivered/1"] != 1 || tried["pending/0"] != 1 {
		t.Errorf("rows by state/attempts = %v, want one delivered and one given back with its attempt", tried)
	}
}
