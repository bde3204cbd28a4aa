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
		modes:       []string{"cold", "warm"},
		serverConns: 4,
	}
	// Only operations that end inside a window count: on a machine busy enough that a window
	// ends before one does, the windows grow until each side finishes some.
	var res result
	for {
		var err error
		if res, err = measure(context.Background(), cfg, io.Discard); err != nil {
			t.Fatal(err)
		}
		if len(res.cells) != 1 || len(res.cells[0].modes) != 2 {
			t.Fatalf("got %d cells, want 1, of cold and warm", len(res.cells))
		}
		if c := res.cells[0]; c.baseline[0].ops > 0 && c.modes[0].intake[0].ops > 0 && c.modes[1].intake[0].ops > 0 || cfg.duration >= 10*time.Second {
			break
		}
		t.Logf("a side finished nothing inside %s: measuring again in windows twice as long", cfg.duration)
		cfg.duration *= 2
	}
	c := res.cells[0]
	if c.baseline[0].ops == 0 || c.modes[0].intake[0].ops == 0 || c.modes[1].intake[0].ops == 0 {
		t.Errorf("baseline did %d ops, cold intake %d, warm intake %d: want all above zero", c.baseline[0].ops,
			c.modes[0].intake[0].ops, c.modes[1].intake[0].ops)
	}
	if n := res.errors(); n != 0 {
		t.Errorf("%d operations failed, first: %q", n, res.errorSamples)
	}
	if c.baseline[0].cpu.self <= 0 || c.modes[0].intake[0].cpu.self <= 0 {
		t.Errorf("CPU time of this process: baseline %v, intake %v; want both above zero", c.baseline[0].cpu.self, c.modes[0].intake[0].cpu.self)
	}
	if answered := c.modes[0].intake[0].ops + c.modes[1].intake[0].ops; res.handoffs < int64(answered) {
		t.Errorf("%d handoffs stored, fewer than the %d answered 201 in the windows", res.handoffs, answered)
	}
	// Nobody is online: every warm package ended its warm phase at once, and told its bot.
	if res.warmTimeouts != res.warm {
		t.Errorf("%d warm packages, %d warm_timeout webhooks: want one each", res.warm, res.warmTimeouts)
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
