package metrics_test

import (
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/metrics"
)

// Counting sits on every request, intake, frame and published event: it must not allocate, as
// a label map (With(prometheus.Labels{…})) or a status code formatted per request would.
func TestCountingAllocatesNothing(t *testing.T) {
	m := metrics.New(nil)
	for name, count := range map[string]func(){
		"request":   func() { m.Request("POST", "/handoffs/:id/accept", 303, time.Millisecond) },
		"intake":    func() { m.Intake("billing_t2", metrics.Created) },
		"accepted":  func() { m.Accepted("billing_t2", time.Minute) },
		"delivery":  func() { m.Delivery("delivered") },
		"frame":     m.FrameSent,
		"published": func() { m.Published(time.Now()) },
	} {
		count() // the series' first use creates it
		if n := testing.AllocsPerRun(100, count); n != 0 {
			t.Errorf("%s: %v allocations per call, want 0", name, n)
		}
	}
}
