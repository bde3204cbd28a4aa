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
	if got := sum.errorLines(); got != 3 {
		t.Errorf("ERROR lines: %d, want 3 (a worker's, a package's and a stray line)", got)
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
	if _, _, err := parseConfig([]string{"-scenarios", "6"}); err == nil {
		t.Error("-scenarios 6 accepted")
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

// The fifth run at its -quick size (about 40 seconds of load on three instances, and a
// PostgreSQL cluster of its own): an instance and then PostgreSQL are killed under warm and cold
// packages, rings and refund approvals, and every invariant holds. The paths the run is there
// for were taken: rings accepted, declined and let run out, approvals granted, denied and left
// to expire, agents on the killed instance.
func TestWarmTransfersAndApprovalsHoldUnderKills(t *testing.T) {
	cfg, _, err := parseConfig([]string{"-quick", "-scenarios", "5", "-example", "../../internal/handoff/testdata/harbor-v1.json"})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	sections, err := soakAll(t.Context(), cfg, &out)
	if err != nil {
		t.Fatalf("soak: %v\n%s", err, out.String())
	}
	sec := sections[0]
	if len(sec.failed) > 0 {
		t.Fatalf("invariants failed: %q\n%s", sec.failed, out.String())
	}
	for _, path := range []string{"ring accepted", "ring declined", "ring let run out", "granted", "denied", "expired", "accepted", "dead agents"} {
		if sec.counts[path] == 0 {
			t.Errorf("the run never took %q\n%s", path, out.String())
		}
	}
}

func offered(seq int64, at time.Time, pkg string, agent int64) offerEvent {
	return offerEvent{seq: seq, at: at, started: true, pkg: pkg, agent: agent}
}

func ended(seq int64, at time.Time, pkg string, agent int64) offerEvent {
	return offerEvent{seq: seq, at: at, pkg: pkg, agent: agent}
}

// A package ringing two agents at once, an agent rung for two packages at once, and an end of an
// offer nobody had each break the one-live-offer rule; offers one after the other do not.
func TestOfferOverlapsFindTwoLiveOffers(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	fine := []offerEvent{offered(1, at(0), "p1", 1), ended(2, at(10), "p1", 1), offered(3, at(10), "p1", 2),
		offered(4, at(20), "p2", 1), ended(5, at(30), "p2", 1), ended(6, at(40), "p1", 2)}
	if offers, v, samples := offerOverlaps(fine); offers != 3 || v != 0 {
		t.Errorf("offers one after the other: %d offers, %d violations %q; want 3, 0", offers, v, samples)
	}
	for name, evs := range map[string][]offerEvent{
		"a package ringing two agents": {offered(1, at(0), "p1", 1), offered(2, at(5), "p1", 2)},
		"an agent rung twice":          {offered(1, at(0), "p1", 1), offered(2, at(5), "p2", 1)},
		"an end without its offer":     {offered(1, at(0), "p1", 1), ended(2, at(5), "p1", 2)},
	} {
		if _, v, samples := offerOverlaps(evs); v != 1 || len(samples) != 1 {
			t.Errorf("%s: %d violations %q, want 1", name, v, samples)
		}
	}
}

// The agents of the killed instance are those whose last socket before the kill was there; a
// ring of theirs that lasts past the bound, or starts after it before they are back, is a
// violation; one withdrawn within the bound, or made after they came back, is not.
func TestDeadRingsLookPastTheBoundUntilTheAgentIsBack(t *testing.T) {
	kill := time.Now()
	after := func(s float64) time.Time { return kill.Add(time.Duration(s * float64(time.Second))) }
	conns := []connection{
		{agent: 0, instance: killedInstance, began: after(-60)},
		{agent: 1, instance: killedInstance, began: after(-60)},
		{agent: 1, instance: 0, began: after(-10)}, // moved before the kill: not the dead instance's
		{agent: 0, instance: 0, began: after(7)},   // back, elsewhere
		{agent: 2, instance: killedInstance, began: after(-60)},
	}
	dead, back := killedAgents(conns, kill)
	if !dead[0] || dead[1] || !dead[2] || !back[0].Equal(after(7)) || !back[2].IsZero() {
		t.Fatalf("dead %v, back %v; want agents 0 and 2, 0 back at +7s, 2 never", dead, back)
	}
	byUser := map[int64]time.Time{10: back[0], 12: back[2]}
	spans := []offerSpan{
		{agent: 10, pkg: "p1", from: after(-1), to: after(3)},  // withdrawn within the bound
		{agent: 10, pkg: "p2", from: after(8), to: after(9)},   // after the agent came back
		{agent: 11, pkg: "p3", from: after(-1), to: after(30)}, // not a dead instance's agent
	}
	if d := deadRings(spans, kill, byUser); d.violations != 0 || d.rings != 1 || d.atKill != 1 || d.lastEnd != 3*time.Second {
		t.Errorf("within the bound: %+v; want no violation, 1 ring live at the kill, ended at +3s", d)
	}
	spans = append(spans,
		offerSpan{agent: 10, pkg: "p4", from: after(5.5), to: after(6)}, // after the bound, before the agent came back
		offerSpan{agent: 12, pkg: "p5", from: after(1)})                 // never ended, and the agent never came back
	if d := deadRings(spans, kill, byUser); d.violations != 2 || len(d.samples) != 2 {
		t.Errorf("past the bound: %+v; want both agents found", d)
	}
}

// A warm phase ends once: one accepted, one warm_timeout, or a warm_timeout followed by the
// accepted of the package taken cold; anything else is a violation, whatever order the webhooks
// arrived in and however often one was delivered.
func TestAWarmPhaseEndsOnce(t *testing.T) {
	t0 := time.Now()
	hook := func(id, event, eventID, reason string, occurred int) arrival {
		return arrival{handoffID: id, event: event, eventID: eventID, reason: reason, occurred: t0.Add(time.Duration(occurred) * time.Second)}
	}
	heard := warmEndsHeard([]arrival{
		hook("ok1", "accepted", "e1", "", 1), hook("ok1", "accepted", "e1", "", 1), // redelivered
		hook("ok2", "accepted", "e2", "", 5), hook("ok2", "warm_timeout", "e3", "all_declined", 2), // arrived out of order
		hook("ok2", "queued", "e4", "", 0),
		hook("bad1", "accepted", "e5", "", 1), hook("bad1", "warm_timeout", "e6", "waited_too_long", 2),
		hook("bad2", "warm_timeout", "e7", "all_declined", 1), hook("bad2", "warm_timeout", "e8", "agent_gone", 2),
		hook("bad3", "accepted", "e9", "", 1), hook("bad3", "accepted", "e10", "", 2),
	})
	want := map[string]string{"ok1": "accepted", "ok2": "warm_timeout:all_declined"}
	for _, id := range []string{"ok1", "ok2", "bad1", "bad2", "bad3", "never"} {
		end, ok := warmPhaseEnd(heard[id])
		if ok != (want[id] != "") || end != want[id] {
			t.Errorf("%s heard %v: %q, %t; want %q", id, heard[id], end, ok, want[id])
		}
	}
}

// Supervisors approve, deny or leave requests by their id, and spread their decisions over the
// approval timeout so that some come once the request expired.
func TestApprovalPlanDecidesTwoInThreeSomeLate(t *testing.T) {
	verdicts := map[string]int{}
	late := 0
	for id := int64(1); id <= 300; id++ {
		v, after := approvalPlan(id, 10*time.Second)
		verdicts[v]++
		if after < 3*time.Second || after > 12*time.Second {
			t.Fatalf("request %d decided after %s, outside 0.3–1.2 of the timeout", id, after)
		}
		if v != "" && after > 10*time.Second {
			late++
		}
	}
	if verdicts["approve"] != 100 || verdicts["deny"] != 100 || verdicts[""] != 100 || late < 20 {
		t.Errorf("verdicts %v, %d late; want a third each and some after the timeout", verdicts, late)
	}
}
