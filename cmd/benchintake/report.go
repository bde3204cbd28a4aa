package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// Targets, informational: the exit status does not depend on them. Intake against the raw
// INSERT at targetBots; a warm package against a cold one at every concurrency, since a warm
// package is what a live-chat bot sends (issue #22).
const (
	targetBots     = 8
	targetRatio    = 0.50
	targetP99      = 25 * time.Millisecond
	targetWarmRate = 0.8 // warm ops/s at least this times cold's
	targetWarmP99  = 1.5 // warm p99 at most this times cold's
)

// summary is the median over the runs of one side of a cell.
type summary struct {
	rate     float64
	p50, p99 time.Duration
	cpu      time.Duration // of this process per operation
	pgCPU    time.Duration // of the PostgreSQL backends per operation; negative if unknown
}

func summarize(runs []sample) summary {
	return summary{
		rate: loadtest.MedianOf(runs, func(s sample) float64 { return s.rate() }),
		p50:  loadtest.MedianOf(runs, func(s sample) time.Duration { return s.p50 }),
		p99:  loadtest.MedianOf(runs, func(s sample) time.Duration { return s.p99 }),
		cpu:  loadtest.MedianOf(runs, func(s sample) time.Duration { self, _ := s.cpuPerOp(); return self }),
		pgCPU: loadtest.MedianOf(runs, func(s sample) time.Duration {
			_, pg := s.cpuPerOp()
			return pg
		}),
	}
}

// pairRatio is the median over the runs of figure(a)/figure(b), the nth run of a against the nth
// of b: runs next to each other share the machine's state, so their ratio moves less than either.
func pairRatio(a, b []sample, figure func(sample) float64) float64 {
	ratios := make([]float64, 0, len(a))
	for i := range min(len(a), len(b)) {
		if d := figure(b[i]); d > 0 {
			ratios = append(ratios, figure(a[i])/d)
		}
	}
	return loadtest.Median(ratios)
}

func rateOf(s sample) float64 { return s.rate() }
func p99Of(s sample) float64  { return float64(s.p99) }

// modeOf returns the runs of mode in c, if it was measured.
func (c cell) modeOf(mode string) (modeRuns, bool) {
	for _, m := range c.modes {
		if m.mode == mode {
			return m, true
		}
	}
	return modeRuns{}, false
}

func report(w io.Writer, cfg config, res result) {
	fmt.Fprintf(w, "\nmedian of %d run(s) per cell; p50/p99 are exact per run (nearest rank over every request completed in the window);\n", cfg.runs)
	fmt.Fprintf(w, "×raw is the median of the runs' ratios to the raw INSERT run just before them;\n")
	fmt.Fprintf(w, "cpu/op is CPU time per operation in the window: Go is this whole process (server, bots or baseline workers, GC),\n")
	fmt.Fprintf(w, "pg the PostgreSQL processes of the bench database (not the WAL writer or checkpointer); ? when /proc cannot tell\n")
	fmt.Fprintf(w, "load average (1, 5, 15 min) at the end: %s\n\n", loadtest.LoadAverage())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "bots\tbytes\tside\tops/s\t×raw\tp50\tp99\tcpu/op Go+pg\terrors\t")
	for _, c := range res.cells {
		base := summarize(c.baseline)
		fmt.Fprintf(tw, "%d\t%d\traw INSERT\t%.0f\t\t%s\t%s\t%s\t%d\t\n", c.concurrency, c.size, base.rate,
			loadtest.Millis(base.p50), loadtest.Millis(base.p99), us(base.cpu)+"+"+us(base.pgCPU), c.baselineErrs)
		for _, m := range c.modes {
			s := summarize(m.intake)
			fmt.Fprintf(tw, "%d\t%d\t%s intake\t%.0f\t%.2f\t%s\t%s\t%s\t%d\t\n", c.concurrency, c.size, m.mode, s.rate,
				pairRatio(m.intake, c.baseline, rateOf), loadtest.Millis(s.p50), loadtest.Millis(s.p99), us(s.cpu)+"+"+us(s.pgCPU), m.errs)
		}
	}
	tw.Flush()

	fmt.Fprintf(w, "\ntargets (informational, exit status ignores them):\n")
	for _, c := range res.cells {
		warm, okWarm := c.modeOf("warm")
		cold, okCold := c.modeOf("cold")
		if okWarm && okCold {
			rate, p99 := pairRatio(warm.intake, cold.intake, rateOf), pairRatio(warm.intake, cold.intake, p99Of)
			fmt.Fprintf(w, "  %3d bots %6d bytes: warm/cold ops/s %.2f >= %.2f %s; warm/cold p99 %.2f <= %.2f %s (%s / %s)\n",
				c.concurrency, c.size, rate, targetWarmRate, loadtest.Verdict(rate >= targetWarmRate), p99, targetWarmP99,
				loadtest.Verdict(p99 <= targetWarmP99), loadtest.Millis(summarize(warm.intake).p99), loadtest.Millis(summarize(cold.intake).p99))
		}
		if c.concurrency != targetBots {
			continue
		}
		for _, m := range c.modes {
			s := summarize(m.intake)
			ratio := pairRatio(m.intake, c.baseline, rateOf)
			fmt.Fprintf(w, "  %3d bots %6d bytes: %s intake/raw %.2f >= %.2f %s; %s p99 %s <= %s %s\n", c.concurrency, c.size, m.mode,
				ratio, targetRatio, loadtest.Verdict(ratio >= targetRatio), m.mode, loadtest.Millis(s.p99), loadtest.Millis(targetP99), loadtest.Verdict(s.p99 <= targetP99))
		}
	}
	fmt.Fprintf(w, "\nleft in the bench database before it was dropped: %d handoffs, %d webhook_outbox rows (the deliverer marks the outbox rows no_endpoint: the bench's keys have no webhook URL)\n", res.handoffs, res.outbox)
	fmt.Fprintf(w, "warm packages %d, warm_timeout webhooks %d (nobody online: one each)\n", res.warm, res.warmTimeouts)
	fmt.Fprintf(w, "errors: %d\n", res.errors())
	for _, e := range res.errorSamples {
		fmt.Fprintf(w, "  %s\n", e)
	}
}
