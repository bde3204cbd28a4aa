package main

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

// An answer belongs to the phase the run was in when it came, also while later marks are unset.
func TestPhasesSplitARunAtItsMarks(t *testing.T) {
	t0 := time.Now()
	ph := newPhases("before", "down", "after")
	if got := ph.at(t0.Add(time.Hour)); got != "before" {
		t.Fatalf("before any mark: %q, want before", got)
	}
	ph.mark(0, t0)
	if got := ph.at(t0.Add(-time.Second)); got != "before" {
		t.Errorf("before the first mark: %q", got)
	}
	if got := ph.at(t0.Add(time.Hour)); got != "down" {
		t.Errorf("after the first mark, the second unset: %q, want down", got)
	}
	ph.mark(1, t0.Add(time.Minute))
	if got, want := []string{ph.at(t0), ph.at(t0.Add(time.Minute - 1)), ph.at(t0.Add(time.Minute))}, []string{"down", "down", "after"}; !slices.Equal(got, want) {
		t.Errorf("around the marks: %q, want %q", got, want)
	}
}

// A webhook that never came counts with the time it waited, so that it raises the percentiles
// instead of dropping out of them; a repeated event and other events do not count as deliveries.
func TestDeliveryLatencyCountsWhatNeverCame(t *testing.T) {
	t0 := time.Now()
	ph := newPhases("idle", "hanging")
	ph.mark(0, t0.Add(10*time.Second))
	in := &intake{acked: map[string]time.Time{
		"a": t0,                       // idle, delivered after 1s
		"b": t0.Add(11 * time.Second), // hanging, delivered after 2s, twice
		"c": t0.Add(12 * time.Second), // hanging, never delivered: waited until end
	}}
	arrivals := []arrival{
		{handoffID: "a", event: "queued", eventID: "e1", at: t0.Add(time.Second)},
		{handoffID: "b", event: "queued", eventID: "e2", at: t0.Add(13 * time.Second)},
		{handoffID: "b", event: "queued", eventID: "e2", at: t0.Add(14 * time.Second)},
		{handoffID: "c", event: "accepted", eventID: "e3", at: t0.Add(13 * time.Second)},
	}
	end := t0.Add(20 * time.Second)
	latency, undelivered, duplicates := deliveryLatency(arrivals, in, ph, end)
	if got := latency["idle"]; !slices.Equal(got, []time.Duration{time.Second}) {
		t.Errorf("idle: %v, want [1s]", got)
	}
	if got := durations(latency["hanging"]); !slices.Equal(got, []time.Duration{2 * time.Second, 8 * time.Second}) {
		t.Errorf("hanging: %v, want [2s 8s]", got)
	}
	if undelivered["hanging"] != 1 || undelivered["idle"] != 0 || duplicates != 1 {
		t.Errorf("undelivered %v, duplicates %d; want hanging 1, 1 duplicate", undelivered, duplicates)
	}
}

// The log summary keeps what the pool scenario checks: which packages were logged as committed
// after their client left, and which ERROR lines are about requests.
func TestLogSummary(t *testing.T) {
	sum := logSummary{warnings: map[string]int{}, messages: map[string]int{}, ids: map[string][]string{}}
	err := sum.read(strings.NewReader(`{"level":"INFO","msg":"client left; package committed","handoff_id":"ho_1"}
{"level":"WARN","msg":"unavailable","reason":"busy"}
{"level":"ERROR","msg":"reading desk events","err":"timeout"}
{"level":"ERROR","msg":"deadline passed; package failed","handoff_id":"ho_2"}
panic: boom
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := sum.ids["client left; package committed"]; !slices.Equal(got, []string{"ho_1"}) {
		t.Errorf("committed after the client left: %q, want [ho_1]", got)
	}
	if got := sum.requestErrors(); got != 1 {
		t.Errorf("request errors: %d, want 1 (a worker's ERROR and a stray line are not about requests)", got)
	}
	if got := sum.warningLine(); !strings.Contains(got, `"ERROR (not a log line)" ×1`) || !strings.Contains(got, `"WARN unavailable" ×1`) {
		t.Errorf("warning line %q", got)
	}
}

// -quick shrinks every scenario, but a flag given explicitly wins.
func TestQuickKeepsExplicitFlags(t *testing.T) {
	cfg, command, err := parseConfig([]string{"-quick", "-pgkill-bots", "3"})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.pgkillBots != 3 || cfg.appkillRun != 12*time.Second || !strings.HasSuffix(command, "(-quick)") {
		t.Errorf("pgkill-bots %d, appkill-run %s, command %q", cfg.pgkillBots, cfg.appkillRun, command)
	}
	if _, _, err := parseConfig([]string{"-scenarios", "5"}); err == nil {
		t.Error("-scenarios 5 accepted")
	}
}

// A failed invariant reaches the exit status; a missed expectation does not.
func TestOnlyInvariantsFailTheRun(t *testing.T) {
	sec := &section{n: 1}
	sec.expect("fast enough", "no", "yes", false)
	if failed := sec.summary(io.Discard); len(failed) != 0 {
		t.Fatalf("a missed expectation failed the run: %q", failed)
	}
	sec.invariant("acknowledged but not stored", "1 of 10", "0 of > 0", false)
	if failed := sec.summary(io.Discard); len(failed) != 1 || !strings.Contains(failed[0], "acknowledged but not stored: 1 of 10") {
		t.Fatalf("failed invariants %q, want the one", failed)
	}
}

// Refusals count in the phases named, across tallies: every one should be a 503 that says when to
// come back, and a run with none has not shown it.
func TestRefusalsWantA503WithRetryAfter(t *testing.T) {
	refused := func(k string) bool { return strings.HasPrefix(k, "5") }
	a, b := newTally("before", "down"), newTally("before", "down")
	a.add("down", "503 database_unavailable (Retry-After 5)")
	b.add("down", "503 database_unavailable (Retry-After 5)")
	b.add("down", "201")
	b.add("before", "500 internal")
	sec := &section{n: 1}
	sec.refusals("refusals", refused, []*tally{a, b}, "down")
	if got := sec.rows[0]; got[1] != "2 of 2" || got[3] != "ok" {
		t.Errorf("two 503s with Retry-After, a 201, and a 500 in another phase: %q", got)
	}
	b.add("down", "503 busy")
	b.add("down", "502")
	sec.refusals("refusals", refused, []*tally{a, b}, "before", "down")
	if got := sec.rows[1]; got[1] != "2 of 5" || got[3] != "MISS" {
		t.Errorf("with a 500, a 503 without Retry-After and a 502: %q, want 2 of 5, MISS", got)
	}
	sec.refusals("refusals", refused, []*tally{newTally("down")}, "down")
	if got := sec.rows[2]; got[1] != "0 of 0" || got[3] != "MISS" {
		t.Errorf("no refusals at all: %q, want a MISS", got)
	}
}
