package webhook

import (
	"testing"
	"time"
)

// An endpoint that was fast had rows claimed rounds ahead; when its requests slow down it may have
// fewer rounds than it holds. Its quota is then none, not a negative LIMIT that fails the claim of
// every endpoint (found by make soak's slow receiver).
func TestQuotaNeverGoesBelowNone(t *testing.T) {
	t.Parallel()
	const maxInFlight, wait = 8, 20 * time.Second
	e := &endpoint{}
	e.timed(10 * time.Millisecond)
	ahead := e.quota(time.Time{}, maxInFlight, wait)
	if ahead <= 2*maxInFlight {
		t.Fatalf("a fast endpoint's quota = %d, want rounds ahead of its %d slots", ahead, maxInFlight)
	}
	e.claimed = ahead
	for range 50 {
		e.timed(10 * time.Second)
	}
	if q := e.quota(time.Time{}, maxInFlight, wait); q != 0 {
		t.Fatalf("a slowed endpoint holding %d rows: quota = %d, want 0", e.claimed, q)
	}
	e.claimed = maxInFlight
	if q := e.quota(time.Time{}, maxInFlight, wait); q <= 0 {
		t.Fatalf("a slow endpoint holding only its slots' rows: quota = %d, want more", q)
	}
}
