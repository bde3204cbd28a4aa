package intake

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/handoff"
)

// BenchmarkWarmBatch measures what deciding warm packages' first rings costs a batch's
// transaction: a batch of cold packages, the same warm with nobody online (each ends its warm
// phase with its batch), and warm with two agents online (two ring, the rest wait), in turns
// within one run so that all see the same machine and table sizes. Batches of 1 (a quiet desk)
// and 8 (a busy one), on a desk where 2,000 packages wait already, its statistics up to date.
// Between batches the live rings are ended, untimed, so that each online batch rings its two
// agents afresh. It reports the median time per batch and warm/cold.
func BenchmarkWarmBatch(b *testing.B) {
	for _, size := range []int{1, 8} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			d := newDesk(b, "nobody", "online")
			d.agentOf(b, "alex", "online", true)
			d.agentOf(b, "bea", "online", true)
			ctx := context.Background()
			for range 2000 / maxBatchSize {
				var ps []handoff.Package
				for range maxBatchSize {
					ps = append(ps, d.packages.Next(b, "nobody"))
				}
				d.intake.write(d.batchOf(b, ps...))
			}
			if _, err := d.db.Exec(ctx, `ANALYZE`); err != nil {
				b.Fatal(err)
			}
			batch := func(queueName string, mode handoff.TransferMode) []*submission {
				var ps []handoff.Package
				for range size {
					p := d.packages.Next(b, queueName)
					p.TransferMode = mode
					ps = append(ps, p)
				}
				return d.batchOf(b, ps...)
			}
			timed := func(s []*submission) time.Duration {
				start := time.Now()
				d.intake.write(s)
				took := time.Since(start)
				for _, sub := range s {
					if sub.err != nil {
						b.Fatal(sub.err)
					}
				}
				return took
			}
			var cold, nobody, online []time.Duration
			turn := 0
			for b.Loop() {
				turn++
				order := []func(){
					func() { cold = append(cold, timed(batch("nobody", handoff.TransferModeCold))) },
					func() { nobody = append(nobody, timed(batch("nobody", handoff.TransferModeWarm))) },
					func() {
						s := batch("online", handoff.TransferModeWarm)
						online = append(online, timed(s))
						b.StopTimer()
						if _, err := d.db.Exec(ctx, `
							WITH ended AS (UPDATE offers SET ended_at = now(), outcome = 'declined' WHERE ended_at IS NULL RETURNING handoff_id)
							UPDATE handoffs SET offered_to = NULL, offered_until = NULL FROM ended WHERE handoffs.id = ended.handoff_id`); err != nil {
							b.Fatal(err)
						}
						b.StartTimer()
					},
				}
				for i := range order {
					order[(i+turn)%len(order)]()
				}
			}
			median := func(ds []time.Duration) float64 {
				slices.Sort(ds)
				return float64(ds[len(ds)/2])
			}
			b.ReportMetric(median(cold), "ns/batch-cold")
			b.ReportMetric(median(nobody), "ns/batch-warm-nobody-online")
			b.ReportMetric(median(online), "ns/batch-warm-two-online")
			b.ReportMetric(median(nobody)/median(cold), "ratio-nobody")
			b.ReportMetric(median(online)/median(cold), "ratio-online")
		})
	}
}
