package actions

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff"
)

// BenchmarkResolveRefunded measures what the approval rule costs a resolve: a resolve as refunded
// takes the slow path (row lock, the package's refund, the queue's threshold and, above it, the
// grant), against the fast path's resolve as solved, in turns within one run so that all see the
// same machine and table sizes. Three medians: solved (fast path), refunded below the threshold
// (slow path, no grant to look up), refunded above it with a grant. Setup (submit, accept, request
// and grant) is not timed.
func BenchmarkResolveRefunded(b *testing.B) {
	d := newDesk(b, "billing")
	ctx := context.Background()
	alex := d.agent(b, "alex", auth.RoleAgent, 1, "billing")
	sam := d.agent(b, "sam", auth.RoleSupervisor, 1)
	accepted := func(amount string) string {
		id := d.submit(b, "billing", withRefund(amount, "USD"))
		if err := d.actions.Accept(ctx, alex, id); err != nil {
			b.Fatal(err)
		}
		return id
	}
	timed := func(f func() (string, error)) time.Duration {
		start := time.Now()
		if _, err := f(); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	solved := func() time.Duration {
		id := accepted("20.00")
		return timed(func() (string, error) { return d.actions.Resolve(ctx, alex, id, "solved", "", handoff.HandBack{}) })
	}
	below := func() time.Duration {
		id := accepted("20.00")
		return timed(func() (string, error) { return d.actions.Resolve(ctx, alex, id, "refunded", "", handoff.HandBack{}) })
	}
	granted := func() time.Duration {
		id := accepted("120.00")
		approvalID, err := d.actions.RequestApproval(ctx, alex, id, "bench")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := d.actions.Decide(ctx, sam, approvalID, true, "ok"); err != nil {
			b.Fatal(err)
		}
		// Accept put a hold in place; the grant left the package accepted in alex's hands as before.
		return timed(func() (string, error) { return d.actions.Resolve(ctx, alex, id, "refunded", "", handoff.HandBack{}) })
	}
	var fast, slow, approved []time.Duration
	turn := 0
	for b.Loop() {
		turn++
		order := []func(){
			func() { fast = append(fast, solved()) },
			func() { slow = append(slow, below()) },
			func() { approved = append(approved, granted()) },
		}
		for i := range order {
			order[(i+turn)%len(order)]()
		}
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2])
	}
	b.ReportMetric(median(fast), "ns/resolve-solved-fast")
	b.ReportMetric(median(slow), "ns/resolve-refunded-below")
	b.ReportMetric(median(approved), "ns/resolve-refunded-granted")
	b.ReportMetric(median(slow)/median(fast), "ratio-below")
	b.ReportMetric(median(approved)/median(fast), "ratio-granted")
}
