package actions

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
)

// BenchmarkResolveFastPath measures the fast path's resolve trip (the update with its log row and
// webhook) with the eval record it now carries against the same trip without it, in turns within
// one run, so that both see the same machine and the same table sizes. It reports the median of
// each and their ratio; the setup (a package submitted and accepted on this instance) is not
// timed.
func BenchmarkResolveFastPath(b *testing.B) {
	d := newDesk(b, "billing")
	ctx := context.Background()
	alex := d.agent(b, "alex", auth.RoleAgent, 1, "billing")
	resolve := func(withEval bool) time.Duration {
		id := d.submit(b, "billing", nil)
		if err := d.actions.Accept(ctx, alex, id); err != nil {
			b.Fatal(err)
		}
		hd, ok := d.actions.holds.get(id, alex.ID)
		if !ok {
			b.Fatal("no hold after accept")
		}
		now := d.clock.Now()
		c := hd.to(events.Change{Kind: events.Resolved, Status: handoff.StatusResolved, ActorUser: &alex.ID,
			Reason: "solved", Outcome: "solved", Assignee: alex.DisplayName, At: now})
		var outcomes []evals.Outcome
		if withEval {
			outcomes = append(outcomes, evals.Outcome{Kind: evals.KindResolve, HandoffID: hd.rowID, QueueID: hd.queueID,
				EditorID: alex.ID, At: now, Code: "solved"})
		}
		start := time.Now()
		done, err := d.actions.fast(ctx, alex, hd, `status = $6, outcome = $7, outcome_note = NULLIF($8, ''), closed_at = $9,
			updated_at = $9, reserved_until = NULL`, `h.status = ANY ($10)`,
			[]any{handoff.StatusResolved, "solved", "", now, []handoff.Status{handoff.StatusAccepted}}, c, outcomes...)
		took := time.Since(start)
		if err != nil || !done {
			b.Fatalf("fast resolve: %v, done %v", err, done)
		}
		d.actions.holds.drop(id)
		return took
	}
	var without, with []time.Duration
	turn := false
	for b.Loop() {
		turn = !turn
		if turn {
			without = append(without, resolve(false))
			with = append(with, resolve(true))
		} else {
			with = append(with, resolve(true))
			without = append(without, resolve(false))
		}
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2])
	}
	b.ReportMetric(median(without), "ns/resolve-without-eval")
	b.ReportMetric(median(with), "ns/resolve-with-eval")
	b.ReportMetric(median(with)/median(without), "ratio")
}
