package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/handoffdesk/desk/internal/metrics"
	"github.com/handoffdesk/desk/internal/queue"
)

// everySeries is an instance's registry with a series in every family: a pool (which opens no
// connection until asked for one), a queue read at the scrape, and each count made once.
func everySeries(t *testing.T) *metrics.Metrics {
	t.Helper()
	pool, err := pgxpool.New(t.Context(), "postgres://127.0.0.1:1/none")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	m := metrics.New(pool)
	m.ReadState(metrics.State{
		Queues:  func(context.Context) ([]queue.Health, error) { return []queue.Health{{Name: "billing_t2"}}, nil },
		Backlog: func(context.Context) (int, error) { return 0, nil },
	})
	m.Request("GET", "/handoffs/:id", 200, time.Millisecond)
	m.Intake("billing_t2", metrics.Created)
	m.Accepted("billing_t2", time.Minute)
	m.Resolved("billing_t2", time.Hour)
	m.Delivery("delivered")
	m.Published(time.Now())
	m.SocketOpened()
	m.FrameSent()
	return m
}

// The registry follows Prometheus's naming and exposition rules as promtool checks them
// (client_golang's promlint: units, _total on counters, help on every family).
func TestRegistryPassesPromlint(t *testing.T) {
	t.Parallel()
	m := everySeries(t)
	problems, err := testutil.GatherAndLint(m.Registry())
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("%s: %s", p.Metric, p.Text)
	}
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) < 20 {
		t.Errorf("the registry gathers %d families; the lint saw too few to mean much", len(families))
	}
}
