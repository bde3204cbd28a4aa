package webhook

import (
	"testing"
	"time"
)

func TestBackoffDoublesWithinJitterAndCaps(t *testing.T) {
	t.Parallel()
	const base = 5 * time.Second
	for attempt := 1; attempt <= 40; attempt++ {
		nominal := min(base<<min(attempt-1, 20), maxBackoff)
		low := time.Duration(float64(nominal) * 0.8)
		high := min(time.Duration(float64(nominal)*1.2), maxBackoff)
		for _, jitter := range []float64{0, 0.25, 0.5, 0.75, 0.999999} {
			got := backoff(base, attempt, jitter)
			if got < low || got > high {
				t.Errorf("backoff(%s, %d, %v) = %s, want within [%s, %s]", base, attempt, jitter, got, low, high)
			}
		}
	}
	if got := backoff(base, 1, 0.5); got != base {
		t.Errorf("backoff without jitter = %s, want %s", got, base)
	}
	if got := backoff(base, 3, 0.5); got != 4*base {
		t.Errorf("backoff after 3 attempts = %s, want %s", got, 4*base)
	}
	if got := backoff(base, 100, 0); got != maxBackoff*8/10 {
		t.Errorf("backoff at the cap with the lowest jitter = %s, want %s", got, maxBackoff*8/10)
	}
}
