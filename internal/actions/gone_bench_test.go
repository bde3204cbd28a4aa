package actions

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/conversation"
)

// BenchmarkSweepGoneCustomers measures what customer_gone costs the sweeper when nobody is gone:
// a sweep over held packages whose customers wrote last (each is read, none resolved), with the
// queue's customer_gone on, against the same sweep with it off, in turns within one run so that
// both see the same machine and tables. Two medians and their ratio. Setup is not timed.
func BenchmarkSweepGoneCustomers(b *testing.B) {
	const held = 500
	d := newDesk(b, "billing")
	ctx := context.Background()
	var agents []auth.User
	for i := range held / 100 {
		agents = append(agents, d.agent(b, fmt.Sprint("agent", i), auth.RoleAgent, 100, "billing"))
	}
	for i := range held {
		id, agent := d.submit(b, "billing", nil), agents[i%len(agents)]
		if err := d.actions.Accept(ctx, agent, id); err != nil {
			b.Fatal(err)
		}
		if err := d.actions.Reply(ctx, agent, id, reply(b, "Hello, I am on it.")); err != nil {
			b.Fatal(err)
		}
		if _, err := d.actions.PostMessage(ctx, d.sender.APIKeyID, d.sender.QueueIDs, id,
			conversation.Incoming{MessageID: fmt.Sprint("m", i), Role: conversation.User, Text: "Thanks"}); err != nil {
			b.Fatal(err)
		}
	}
	d.clock.Advance(time.Hour)
	sweep := func(gone string) time.Duration {
		if _, err := d.db.Exec(ctx, `UPDATE queues SET customer_gone = $1::interval`, gone); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		n, err := d.actions.Sweep(ctx)
		if err != nil || n != 0 {
			b.Fatalf("sweep: %d, %v; want nothing moved", n, err)
		}
		return time.Since(start)
	}
	var on, off []time.Duration
	turn := 0
	for b.Loop() {
		turn++
		if turn%2 == 0 {
			on, off = append(on, sweep("30 minutes")), append(off, sweep("0"))
		} else {
			off, on = append(off, sweep("0")), append(on, sweep("30 minutes"))
		}
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2])
	}
	b.ReportMetric(median(on), "ns/sweep-gone-on")
	b.ReportMetric(median(off), "ns/sweep-gone-off")
	b.ReportMetric(median(on)/median(off), "ratio")
}
