// Package metricstest builds what the checks of the desk's metrics read: the registry's lint and
// the Grafana dashboard's queries (tools/promqlcheck).
package metricstest

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/metrics"
	"github.com/handoffdesk/desk/internal/queue"
)

// EverySeries is an instance's registry with a series in every family: a pool (which opens no
// connection until asked for one), a queue read at the scrape, and each count made once.
func EverySeries(t testing.TB) *metrics.Metrics {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none")
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
