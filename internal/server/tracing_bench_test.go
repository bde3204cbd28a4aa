package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/instance"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/tracing"
)

// BenchmarkIntakeTracing measures a bot's POST of a package, with a traceparent, answered by an
// instance with tracing off and by one with tracing on (every span kept by the SDK's in-memory
// exporter behind the batching processor, as an OTLP exporter would sit). The two instances share
// one database and take requests in turns, so both see the same machine and the same table sizes.
// It reports the median of each and their ratio.
func BenchmarkIntakeTracing(b *testing.B) {
	dbURL := pgtest.URL(b)
	exported := tracetest.NewInMemoryExporter()
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exported))
	b.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	off, on := benchInstance(b, dbURL, tracing.Off()), benchInstance(b, dbURL, tracing.With(provider))

	db := openBenchPool(b, dbURL, tracing.Off())
	q, err := queue.NewService(db).Create(b.Context(), queue.New{Name: "billing_t2"})
	if err != nil {
		b.Fatal(err)
	}
	k, err := auth.NewService(db).CreateAPIKey(b.Context(), auth.NewAPIKey{Name: "tier1", QueueIDs: []int64{q.ID}})
	if err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile("../handoff/testdata/harbor-v1.json")
	if err != nil {
		b.Fatal(err)
	}
	var pkg map[string]any
	if err := json.Unmarshal(raw, &pkg); err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	n := 0
	submit := func(base string) time.Duration {
		n++
		// Each package its own contact, so that no guard refuses one.
		pkg["handoff_id"], pkg["contact"].(map[string]any)["id"] = fmt.Sprintf("ho_bench_%d", n), fmt.Sprintf("cust_bench_%d", n)
		body, err := json.Marshal(pkg)
		if err != nil {
			b.Fatal(err)
		}
		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/handoffs", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+k.Key)
		req.Header.Set("traceparent", botTraceparent)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		took := time.Since(start)
		if resp.StatusCode != http.StatusCreated {
			b.Fatalf("submit: %d", resp.StatusCode)
		}
		return took
	}
	var without, with []time.Duration
	turn := false
	for b.Loop() {
		turn = !turn
		if turn {
			without = append(without, submit(off))
			with = append(with, submit(on))
		} else {
			with = append(with, submit(on))
			without = append(without, submit(off))
		}
	}
	b.StopTimer()
	if err := provider.ForceFlush(context.Background()); err != nil {
		b.Fatal(err)
	}
	if len(exported.GetSpans()) < len(with) {
		b.Fatalf("%d spans exported for %d traced packages, want several each", len(exported.GetSpans()), len(with))
	}
	median := func(ds []time.Duration) float64 {
		slices.Sort(ds)
		return float64(ds[len(ds)/2])
	}
	b.ReportMetric(median(without), "ns/intake-off")
	b.ReportMetric(median(with), "ns/intake-on")
	b.ReportMetric(median(with)/median(without), "ratio")
}

func openBenchPool(b *testing.B, url string, traces *tracing.Tracing) *pgxpool.Pool {
	b.Helper()
	pool, err := postgres.Open(b.Context(), url, postgres.DefaultAcquireTimeout, postgres.Traced(traces))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// benchInstance serves a desk instance traced by traces (its pool too) on 127.0.0.1 and returns
// its URL.
func benchInstance(b *testing.B, dbURL string, traces *tracing.Tracing) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := instance.Options{Server: server.Config{Addr: ln.Addr().String(), BaseURL: url}, DatabaseURL: dbURL, Tracing: traces}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	db := openBenchPool(b, dbURL, traces)
	go func() { done <- instance.Run(ctx, opts, logger, db, ln) }()
	b.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("serve: %v", err)
		}
	})
	return url
}
