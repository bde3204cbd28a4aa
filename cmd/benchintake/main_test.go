package main

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

func TestMeasureBothSides(t *testing.T) {
	cfg := config{
		adminURL:    pgtest.AdminURL(),
		examplePath: "../../internal/handoff/testdata/harbor-v1.json",
		duration:    300 * time.Millisecond,
		runs:        1,
		concurrency: []int{2},
		sizes:       []int{4096},
		serverConns: 4,
	}
	res, err := measure(context.Background(), cfg, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.cells) != 1 {
		t.Fatalf("got %d cells, want 1", len(res.cells))
	}
	c := res.cells[0]
	if c.baseline[0].ops == 0 || c.intake[0].ops == 0 {
		t.Errorf("baseline did %d ops, intake %d: want both above zero", c.baseline[0].ops, c.intake[0].ops)
	}
	if n := res.errors(); n != 0 {
		t.Errorf("%d operations failed, first: %q", n, res.errorSamples)
	}
	if c.baseline[0].cpu.self <= 0 || c.intake[0].cpu.self <= 0 {
		t.Errorf("CPU time of this process: baseline %v, intake %v; want both above zero", c.baseline[0].cpu.self, c.intake[0].cpu.self)
	}
	if res.handoffs < int64(c.intake[0].ops) {
		t.Errorf("%d handoffs stored, fewer than the %d answered 201 in the window", res.handoffs, c.intake[0].ops)
	}

	left, err := loadtest.DatabaseExists(t.Context(), pgtest.AdminURL(), res.database)
	if err != nil {
		t.Fatal(err)
	}
	if left {
		t.Errorf("database %s was not dropped", res.database)
	}
}

func TestProcessCPUReadsProcStat(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	for start := time.Now(); time.Since(start) < 30*time.Millisecond; {
		// Burn enough CPU for at least one clock tick.
	}
	used, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if used <= 0 {
		t.Errorf("this process used %v of CPU, want more than zero", used)
	}
}
