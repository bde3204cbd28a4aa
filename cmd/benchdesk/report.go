package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// Targets, informational: the exit status does not depend on them.
const (
	targetLatencyP50 = 15 * time.Millisecond
	targetLatencyP99 = 60 * time.Millisecond
	targetFanoutP99  = 100 * time.Millisecond
	targetPerSocket  = 12 * 1024 // bytes
	targetAccepts    = 1500.0    // per second
	targetPageP95    = 20 * time.Millisecond
	targetFlood      = 2.0 // another agent's page during a search flood, × the same page quiet
)

func report(w io.Writer, res result, took time.Duration) {
	fmt.Fprintf(w, "\nresults (nearest-rank percentiles; \"median\" is over events or rounds as noted; targets are informational)\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tmeasure\tdesk\tbaseline (same run)\tdesk/baseline\ttarget\tverdict")
	row := func(n, measure, desk, base, ratio, target, verdict string) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n, measure, desk, base, ratio, target, verdict)
	}
	if l := res.latency; l != nil {
		scope := fmt.Sprintf("ingest→frame, POST on A, %d sockets on B (%d agents)", l.sockets, l.users)
		row("1", scope+", p50 of all arrivals", loadtest.Millis(loadtest.Percentile(l.all, 50)), "NOTIFY→LISTEN p50 "+loadtest.Millis(loadtest.Percentile(l.notify, 50)),
			ratio(loadtest.Percentile(l.all, 50), loadtest.Percentile(l.notify, 50)), "≤ "+loadtest.Millis(targetLatencyP50), loadtest.Verdict(loadtest.Percentile(l.all, 50) <= targetLatencyP50 && len(l.all) > 0))
		row("1", fmt.Sprintf("  p99 of all %d (package, socket) arrivals", len(l.all)), loadtest.Millis(loadtest.Percentile(l.all, 99)), "NOTIFY→LISTEN p99 "+loadtest.Millis(loadtest.Percentile(l.notify, 99)),
			ratio(loadtest.Percentile(l.all, 99), loadtest.Percentile(l.notify, 99)), "≤ "+loadtest.Millis(targetLatencyP99), loadtest.Verdict(loadtest.Percentile(l.all, 99) <= targetLatencyP99 && len(l.all) > 0))
		row("1", fmt.Sprintf("  first arrival per package (%d), p50 / p99", len(l.first)), loadtest.Millis(loadtest.Percentile(l.first, 50))+" / "+loadtest.Millis(loadtest.Percentile(l.first, 99)),
			"", "", "", "info")
		row("1", fmt.Sprintf("  packages first arriving after %s", lateAfter), fmt.Sprintf("%d of %d", l.late, l.packages), "", "", "", "info")
		row("1", "  intake POST answer on A, p50 / p99", loadtest.Millis(loadtest.Percentile(l.post, 50))+" / "+loadtest.Millis(loadtest.Percentile(l.post, 99)), "", "", "", "info")
	}
	if f := res.fanout; f != nil {
		row("2", fmt.Sprintf("fan-out to %d sockets, last arrival p99 (%d events)", f.sockets, len(f.desk.last)), loadtest.Millis(loadtest.Percentile(f.desk.last, 99)),
			"bare gorilla p99 "+loadtest.Millis(loadtest.Percentile(f.bare.last, 99)), ratio(loadtest.Percentile(f.desk.last, 99), loadtest.Percentile(f.bare.last, 99)),
			"≤ "+loadtest.Millis(targetFanoutP99), loadtest.Verdict(loadtest.Percentile(f.desk.last, 99) <= targetFanoutP99 && len(f.desk.last) > 0))
		row("2", "  last arrival, median", loadtest.Millis(loadtest.Median(f.desk.last)), "bare gorilla median "+loadtest.Millis(loadtest.Median(f.bare.last)),
			ratio(loadtest.Median(f.desk.last), loadtest.Median(f.bare.last)), "", "info")
		row("2", "  last minus first arrival (the fan-out alone), median", loadtest.Millis(loadtest.Median(f.desk.spread)), "bare gorilla median "+loadtest.Millis(loadtest.Median(f.bare.spread)),
			ratio(loadtest.Median(f.desk.spread), loadtest.Median(f.bare.spread)), "", "info")
		row("2", "  first arrival, median / intake POST on B, median", loadtest.Millis(loadtest.Median(f.desk.first))+" / "+loadtest.Millis(loadtest.Median(f.deskPost)),
			"bare first "+loadtest.Millis(loadtest.Median(f.bare.first)), "", "", "info")
		row("3", fmt.Sprintf("server heap+stack per idle socket (%d sockets, %d B frames)", f.sockets, f.frameBytes), kb(f.desk.perSocket(f.sockets)),
			"bare gorilla "+kb(f.bare.perSocket(f.sockets)), fmt.Sprintf("×%.1f", f.desk.perSocket(f.sockets)/f.bare.perSocket(f.sockets)),
			fmt.Sprintf("≤ %d KB", targetPerSocket/1024), loadtest.Verdict(f.desk.perSocket(f.sockets) <= targetPerSocket))
		row("3", "  RSS per idle socket", kb(f.desk.rssPerSocket(f.sockets)), "bare gorilla "+kb(f.bare.rssPerSocket(f.sockets)), "", "", "info")
		afterEvents := (float64(f.desk.afterEvents.inuse()) - float64(f.desk.before.inuse())) / float64(f.sockets)
		row("3", "  heap+stack per socket after the events", kb(afterEvents),
			"bare gorilla "+kb((float64(f.bare.afterEvents.inuse())-float64(f.bare.before.inuse()))/float64(f.sockets)), "", "", "info")
	}
	if r := res.race; r != nil {
		rate, base := float64(r.accepted)/r.took.Seconds(), float64(r.baseClaims)/r.baseTook.Seconds()
		row("4", fmt.Sprintf("%d agents (%s, A and B) Next→Accept→Resolve over %d packages, accepts/s", r.agents, r.via, r.packages),
			fmt.Sprintf("%.0f/s", rate), fmt.Sprintf("bare SKIP LOCKED %.0f claims/s", base), fmt.Sprintf("%.2f", rate/base),
			fmt.Sprintf("≥ %.0f/s", targetAccepts), loadtest.Verdict(rate >= targetAccepts))
		row("4", "  Next→Accept→Resolve cycle, p50 / p99", loadtest.Millis(loadtest.Percentile(r.cycles, 50))+" / "+loadtest.Millis(loadtest.Percentile(r.cycles, 99)), "", "", "", "info")
		row("4", "  webhook rows settled by the deliverers during the race, per second", fmt.Sprintf("%.0f/s (%d of %d; %d left pending)",
			float64(r.webhooksSettled)/r.took.Seconds(), r.webhooksSettled, r.webhooksWritten, r.webhooksPending), "", "", "", "info")
		row("4", "  database round trips per accepted package", fmt.Sprintf("%.1f", float64(r.trips)/float64(max(r.accepted, 1))), "1 per claim", "", "", "info")
		row("4", "  round trip (SELECT 1) during the race, p50; the ceiling it implies", fmt.Sprintf("%s; %.0f/s", loadtest.Millis(r.rtt), r.ceiling(2*r.serverConns)),
			"", "", "", "info")
		row("4", "  packages accepted exactly once (event log)", fmt.Sprintf("%d / %d", r.once, r.packages),
			fmt.Sprintf("%d / %d claimed once", r.baseClaims-2*r.baseDouble, r.packages), "", "= all", loadtest.Verdict(r.once == int64(r.packages) && r.double == 0 && r.harnessDouble == 0))
	}
	if p := res.page; p != nil && len(p.page1) > 0 {
		p95 := func(s []loopStats) time.Duration {
			return loadtest.MedianOf(s, func(l loopStats) time.Duration { return l.p95 })
		}
		p50 := func(s []loopStats) time.Duration {
			return loadtest.MedianOf(s, func(l loopStats) time.Duration { return l.p50 })
		}
		row("5", fmt.Sprintf("GET /queues/{name}, %d open, %d GETs × %d concurrent, p95 (median of %d rounds)", p.packages, p.requests, p.concurrency, len(p.page1)),
			loadtest.Millis(p95(p.page1)), "/healthz p95 "+loadtest.Millis(p95(p.healthz)), ratio(p95(p.page1), p95(p.healthz)), "≤ "+loadtest.Millis(targetPageP95), loadtest.Verdict(p95(p.page1) <= targetPageP95))
		row("5", "  page 1, p50", loadtest.Millis(p50(p.page1)), "/healthz p50 "+loadtest.Millis(p50(p.healthz)), ratio(p50(p.page1), p50(p.healthz)), "", "info")
		if len(p.page2) > 0 {
			row("5", "  page 2 (?after= from the more link), p95", loadtest.Millis(p95(p.page2)), "/healthz p95 "+loadtest.Millis(p95(p.healthz)),
				ratio(p95(p.page2), p95(p.healthz)), "≤ "+loadtest.Millis(targetPageP95), loadtest.Verdict(p95(p.page2) <= targetPageP95))
			row("5", "  page 2, p50", loadtest.Millis(p50(p.page2)), "/healthz p50 "+loadtest.Millis(p50(p.healthz)), ratio(p50(p.page2), p50(p.healthz)), "", "info")
		}
		row("5", "  board.Board.Waiting in-process (query + decoding), p50", loadtest.Millis(p.waiting), "", "", "", "info")
	}
	if f := res.flood; f != nil && len(f.quiet) > 0 {
		quiet := loadtest.Percentile(f.quiet, 50)
		for _, run := range f.floods {
			flooded := loadtest.Percentile(run.page, 50)
			row("6", fmt.Sprintf("another agent's queue page (%d open) while one agent keeps %d searches %s in flight (%s), p50", f.packages, f.searchers, f.query, run.retry()),
				loadtest.Millis(flooded), "quiet p50 "+loadtest.Millis(quiet), ratio(flooded, quiet), fmt.Sprintf("≤ ×%.0f", targetFlood),
				loadtest.Verdict(float64(flooded) <= targetFlood*float64(quiet)))
			row("6", "  p90", loadtest.Millis(loadtest.Percentile(run.page, 90)), "quiet p90 "+loadtest.Millis(loadtest.Percentile(f.quiet, 90)),
				ratio(loadtest.Percentile(run.page, 90), loadtest.Percentile(f.quiet, 90)), "", "info")
			row("6", "  the flooder's answers by status", fmt.Sprint(run.answers), "one search alone p50 "+loadtest.Millis(f.searchP50), "", "", "info")
		}
	}
	tw.Flush()

	fmt.Fprintf(w, "\ncorrectness (these decide the exit status):\n")
	if l := res.latency; l != nil {
		fmt.Fprintf(w, "  1: every socket got every card: %s (%d of %d arrivals; %d sockets closed by the server; %d POSTs failed)\n",
			yes(l.missing == 0 && l.lost == 0 && l.errors.Count() == 0), len(l.all), l.packages*l.sockets, l.lost, l.errors.Count())
	}
	if f := res.fanout; f != nil {
		fmt.Fprintf(w, "  2: every socket got every card: %s (desk %d missing, %d closed; bare %d missing, %d closed)\n",
			yes(f.desk.missing == 0 && f.desk.lost == 0 && f.bare.missing == 0 && f.bare.lost == 0), f.desk.missing, f.desk.lost, f.bare.missing, f.bare.lost)
	}
	if r := res.race; r != nil {
		fmt.Fprintf(w, "  4: zero double claims: %s (event log: %d once, %d more than once, %d never; %d still queued%s; %d neither queued nor resolved; %d resolved by another; harness saw %d accepted twice; %d request errors)\n",
			yes(r.double == 0 && r.harnessDouble == 0 && r.stuck == 0 && r.wrongAgent == 0), r.once, r.double, r.never, r.left, limitNote(r.limited),
			r.stuck, r.wrongAgent, r.harnessDouble, r.errors.Count())
	}
	if p := res.page; p != nil {
		fmt.Fprintf(w, "  5: pages answered 200 with their cards: %s (page 1 %d cards, page 2 %d; %d failed GETs)\n",
			yes(p.errors.Count() == 0), p.cards1, p.cards2, p.errors.Count())
	}
	if f := res.flood; f != nil {
		fmt.Fprintf(w, "  6: the other agent's pages answered 200: %s (%d failed GETs)\n", yes(f.errors.Count() == 0), f.errors.Count())
	}
	if len(res.warnings) > 0 {
		var keys []string
		for k := range res.warnings {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%q ×%d", k, res.warnings[k]))
		}
		fmt.Fprintf(w, "  the desk logged (warn/error): %s\n", strings.Join(parts, ", "))
	} else {
		fmt.Fprintf(w, "  the desk logged no warnings or errors\n")
	}
	for _, f := range res.failures {
		fmt.Fprintf(w, "  FAILED: %s\n", f)
	}
	if res.vacuums != "" {
		fmt.Fprintf(w, "\nin autovacuum's place (it is off on this PostgreSQL), the tool ran: %s\n", res.vacuums)
	}
	fmt.Fprintf(w, "\ntotal %s; database %s\n", took.Round(time.Second), res.database)
}

func limitNote(limited bool) string {
	if limited {
		return " at the -race-limit"
	}
	return ""
}

func ratio(desk, base time.Duration) string {
	if base <= 0 {
		return "-"
	}
	return fmt.Sprintf("×%.1f", float64(desk)/float64(base))
}

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}
