package server

import (
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/clocktest"
	"github.com/handoffdesk/desk/internal/handoff"
)

// The badge's rule, stepped on the test clock: a held package whose customer left the agent's
// reply unanswered is quiet from the reply (or the accept, if later) and idle customer_idle after,
// to the second; a customer who waits for the desk, or a package nobody holds, has none.
func TestCustomerIdleBadgeRule(t *testing.T) {
	t.Parallel()
	clock := clocktest.New(time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC))
	accepted := clock.Now()
	reply := accepted.Add(time.Minute)
	item := board.Item{ID: 7, State: actions.State{Status: handoff.StatusAccepted}, AcceptedAt: &accepted, CustomerIdle: 10 * time.Minute}
	quiet := map[int64]time.Time{7: reply}

	clock.Advance(11*time.Minute - time.Second)
	got := customerIdle(quiet, item, clock.Now())
	if got == nil || got.Idle || !got.Since.Equal(reply) || !got.At.Equal(reply.Add(10*time.Minute)) {
		t.Fatalf("a second before customer_idle: %+v; want quiet since the reply, not idle yet, due 10m after it", got)
	}
	clock.Advance(time.Second)
	if got := customerIdle(quiet, item, clock.Now()); got == nil || !got.Idle {
		t.Fatalf("at customer_idle: %+v, want idle", got)
	}
	item.Status = handoff.StatusAwaitingApproval
	if got := customerIdle(quiet, item, clock.Now()); got == nil || !got.Idle {
		t.Errorf("awaiting approval: %+v, want idle: the agent still holds it", got)
	}

	// An accept after the reply (a package that came back and was taken again) starts the silence.
	item.Status = handoff.StatusAccepted
	later := reply.Add(5 * time.Minute)
	item.AcceptedAt = &later
	if got := customerIdle(quiet, item, clock.Now()); got == nil || got.Idle || !got.Since.Equal(later) {
		t.Errorf("accepted after the reply: %+v, want quiet since the accept and not idle yet", got)
	}

	for what, it := range map[string]board.Item{
		"waiting for the desk": item,
		"queued":               {ID: 7, State: actions.State{Status: handoff.StatusQueued}, CustomerIdle: time.Minute},
		"resolved":             {ID: 7, State: actions.State{Status: handoff.StatusResolved}, AcceptedAt: &accepted, CustomerIdle: time.Minute},
	} {
		q := quiet
		if what == "waiting for the desk" {
			q = map[int64]time.Time{}
		}
		if got := customerIdle(q, it, clock.Now()); got != nil {
			t.Errorf("%s: %+v, want no badge", what, got)
		}
	}
}
