package webhook

import "time"

// endpoint is what a deliverer knows of one API key's webhook URL: its requests in flight, how
// long they take, and its breaker. Each instance keeps its own. When one instance's breaker opens
// it holds the endpoint's pending rows for the cool-down in the database, so the other instances
// leave them alone too; rows written during the cool-down may still be tried by an instance whose
// breaker is closed, until its own failures open it.
type endpoint struct {
	slots       chan struct{} // a token per request in flight, at most MaxInFlight
	claimed     int           // rows claimed that are not yet sent or given back
	more        bool          // its last claim filled its quota: more of its rows may be due
	requestTime time.Duration // a moving average of its requests' durations; zero until one ends
	failures    int           // consecutive failed deliveries
	openUntil   time.Time     // zero while the breaker is closed
}

// maxAheadRounds caps the rows claimed ahead of an endpoint's slots, in rounds of MaxInFlight.
const maxAheadRounds = 16

func (e *endpoint) isOpen() bool { return !e.openUntil.IsZero() }

// quota is how many rows the endpoint may be given now. While the breaker is closed: enough to
// fill its slots, and more waiting for a slot, so that its next request need not wait for a
// claim's round trip; as many rounds of them as its requests take to fit in wait, the time a row
// may wait for a slot within its lease (one round until a request has ended: a round waits at
// most one request's Timeout). None while the breaker is open, and one, the probe, once the
// cool-down is over and nothing of the endpoint is claimed.
func (e *endpoint) quota(now time.Time, maxInFlight int, wait time.Duration) int {
	switch {
	case !e.isOpen():
		rounds := 1
		if e.requestTime > 0 {
			rounds = min(int(wait/e.requestTime), maxAheadRounds)
		}
		// Rows claimed while its requests were quicker may be more than it may have now.
		return max((1+rounds)*maxInFlight-e.claimed, 0)
	case now.Before(e.openUntil) || e.claimed > 0:
		return 0
	default:
		return 1
	}
}

// timed counts a request's duration into the moving average, a fifth at a time.
func (e *endpoint) timed(took time.Duration) {
	if e.requestTime == 0 {
		e.requestTime = took
		return
	}
	e.requestTime += (took - e.requestTime) / 5
}

// settle counts a delivery's result, and reports whether it opened the breaker: the threshold's
// consecutive failure while closed, or a failed probe after the cool-down. A success closes it,
// whichever request it was: the endpoint answered.
func (e *endpoint) settle(failed bool, now time.Time, threshold int, cooldown time.Duration) (opened bool) {
	if !failed {
		e.failures, e.openUntil = 0, time.Time{}
		return false
	}
	e.failures++
	if (!e.isOpen() && e.failures >= threshold) || (e.isOpen() && !now.Before(e.openUntil)) {
		e.openUntil = now.Add(cooldown)
		return true
	}
	return false
}
