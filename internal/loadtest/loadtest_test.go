package loadtest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

func TestPercentileIsNearestRank(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i + 1)
	}
	cases := []struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{hundred, 50, 50}, {hundred, 95, 95}, {hundred, 99, 99}, {hundred[:10], 99, 10},
		{hundred[:3], 50, 2}, {hundred[:1], 50, 1}, {hundred[:20], 99, 20}, {nil, 99, 0},
	}
	for _, c := range cases {
		if got := Percentile(c.sorted, c.p); got != c.want {
			t.Errorf("p%v of %d values = %d, want %d", c.p, len(c.sorted), got, c.want)
		}
	}
}

func TestOwnCPUCountsThisProcess(t *testing.T) {
	before := OwnCPU()
	for start := time.Now(); time.Since(start) < 30*time.Millisecond; {
		// Burn CPU: the time has to show.
	}
	after := OwnCPU()
	if before <= 0 || after <= before {
		t.Errorf("OwnCPU went from %v to %v while this process burned CPU", before, after)
	}
}

func TestScratchDatabaseLeavesNothing(t *testing.T) {
	adminURL := pgtest.AdminURL()
	name, dbURL, err := CreateDatabase(t.Context(), adminURL, "loadtest_")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(name, "loadtest_") || !strings.Contains(dbURL, "/"+name) {
		t.Errorf("created %s at %s", name, Redacted(dbURL))
	}
	exists, err := DatabaseExists(t.Context(), adminURL, name)
	if err != nil || !exists {
		t.Fatalf("right after CreateDatabase, DatabaseExists(%s) = %v, %v", name, exists, err)
	}
	if err := DropDatabase(adminURL, name); err != nil {
		t.Fatal(err)
	}
	if exists, err := DatabaseExists(t.Context(), adminURL, name); err != nil || exists {
		t.Errorf("after DropDatabase, DatabaseExists(%s) = %v, %v", name, exists, err)
	}
}

func TestCPUProfileIsWrittenAtStop(t *testing.T) {
	stop, err := StartCPUProfile("")
	if err != nil || stop() != nil {
		t.Fatalf("without a path, StartCPUProfile or its stop failed: %v", err)
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	if stop, err = StartCPUProfile(path); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("stop = %v", err)
	}
	if info, err := os.Stat(path); err != nil || info.Size() == 0 {
		t.Errorf("after stop, the profile at %s: %v, %v", path, info, err)
	}
}

// A pause ends with the run: an interrupted run does not sit out its sleeps, and a deadline already
// passed is no reason to carry on either.
func TestSleepEndsWithTheContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("Sleep of an hour on an ended context = %v, want context.Canceled", err)
	}
	if err := SleepUntil(ctx, time.Now().Add(-time.Second)); !errors.Is(err, context.Canceled) {
		t.Errorf("SleepUntil a past instant on an ended context = %v, want context.Canceled", err)
	}
	if err := SleepUntil(t.Context(), time.Now().Add(-time.Second)); err != nil {
		t.Errorf("SleepUntil a past instant = %v, want nil", err)
	}
	if err := Sleep(t.Context(), time.Millisecond); err != nil {
		t.Errorf("Sleep(1ms) = %v, want nil", err)
	}
}
