package main

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// Targets, informational: the exit status does not depend on them.
const (
	targetBots  = 8
	targetRatio = 0.50
	targetP99   = 25 * time.Millisecond
)

// summary is the median over the runs of one cell.
type summary struct {
	baseRate, intakeRate   float64
	baseP50, baseP99       time.Duration
	intakeP50, intakeP99   time.Duration
	baseCPU, intakeCPU     time.Duration // of this process per operation
	basePGCPU, intakePGCPU time.Duration // of the PostgreSQL backends per operation; negative if unknown
}

func summarize(c cell) summary {
	rate := func(s sample) float64 { return s.rate() }
	p50 := func(s sample) time.Duration { return s.p50 }
	p99 := func(s sample) time.Duration { return s.p99 }
	self := func(s sample) time.Duration { self, _ := s.cpuPerOp(); return self }
	postgres := func(s sample) time.Duration { _, pg := s.cpuPerOp(); return pg }
	return summary{
		baseRate: loadtest.MedianOf(c.baseline, rate), intakeRate: loadtest.MedianOf(c.intake, rate),
		baseP50: loadtest.MedianOf(c.baseline, p50), baseP99: loadtest.MedianOf(c.baseline, p99),
		intakeP50: loadtest.MedianOf(c.intake, p50), intakeP99: loadtest.MedianOf(c.intake, p99),
		baseCPU: loadtest.MedianOf(c.baseline, self), intakeCPU: loadtest.MedianOf(c.intake, self),
		basePGCPU: loadtest.MedianOf(c.baseline, postgres), intakePGCPU: loadtest.MedianOf(c.intake, postgres),
	}
}

func report(w io.Writer, cfg config, res result) {
	fmt.Fprintf(w, "\nmedian of %d run(s) per cell; p50/p99 are exact per run (nearest rank over every request completed in the window);\n", cfg.runs)
	fmt.Fprintf(w, "cpu/op is CPU time per operation in the window: Go is this whole process (server, bots or baseline workers, GC),\n")
	fmt.Fprintf(w, "pg the PostgreSQL processes of the bench database (not the WAL writer or checkpointer); ? when /proc cannot tell\n\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "bots\tbytes\tbaseline ops/s\tintake ops/s\tintake/baseline\tintake p50\tintake p99\tbaseline p50\tbaseline p99\tintake cpu/op Go+pg\tbaseline cpu/op Go+pg\terrors\t")
	for _, c := range res.cells {
		s := summarize(c)
		fmt.Fprintf(tw, "%d\t%d\t%.0f\t%.0f\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t\n", c.concurrency, c.size, s.baseRate, s.intakeRate,
			s.intakeRate/s.baseRate, loadtest.Millis(s.intakeP50), loadtest.Millis(s.intakeP99), loadtest.Millis(s.baseP50), loadtest.Millis(s.baseP99),
			us(s.intakeCPU)+"+"+us(s.intakePGCPU), us(s.baseCPU)+"+"+us(s.basePGCPU), c.errs+c.baselineErrs)
	}
	tw.Flush()

	fmt.Fprintf(w, "\ntargets at %d bots (informational, exit status ignores them):\n", targetBots)
	found := false
	for _, c := range res.cells {
		if c.concurrency != targetBots {
			continue
		}
		found = true
		s := summarize(c)
		ratio := s.intakeRate / s.baseRate
		fmt.Fprintf(w, "  %6d bytes: intake/baseline %.2f >= %.2f %s; intake p99 %s <= %s %s\n", c.size,
			ratio, targetRatio, loadtest.Verdict(ratio >= targetRatio), loadtest.Millis(s.intakeP99), loadtest.Millis(targetP99), loadtest.Verdict(s.intakeP99 <= targetP99))
	}
	if !found {
		fmt.Fprintf(w, "  not measured: -concurrency has no %d\n", targetBots)
	}
	fmt.Fprintf(w, "\nleft in the bench database before it was dropped: %d handoffs, %d webhook_outbox rows (the deliverer marks the outbox rows no_endpoint: the bench's keys have no webhook URL)\n", res.handoffs, res.outbox)
	fmt.Fprintf(w, "errors: %d\n", res.errors())
	for _, e := range res.errorSamples {
		fmt.Fprintf(w, "  %s\n", e)
	}
}
