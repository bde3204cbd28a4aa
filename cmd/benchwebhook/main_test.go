package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

func TestMeasureEverySide(t *testing.T) {
	cfg := config{adminURL: pgtest.AdminURL(), endpoints: 2, slow: 1, slowDelay: time.Minute, events: 60, writers: 2, rate: 600, runs: 1, deliverConns: 2}
	res, err := measure(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.runs) != 1 {
		t.Fatalf("got %d runs, want 1", len(res.runs))
	}
	if s := res.runs[0]; s.insertRate <= 0 || s.drainRate <= 0 || s.steadyRate <= 0 {
		t.Errorf("run = %+v, want every rate above zero", s)
	}
	if len(res.failures) != 0 {
		t.Errorf("correctness checks failed: %q", res.failures)
	}
	left, err := loadtest.DatabaseExists(t.Context(), pgtest.AdminURL(), res.database)
	if err != nil {
		t.Fatal(err)
	}
	if left {
		t.Errorf("database %s was not dropped", res.database)
	}
}
