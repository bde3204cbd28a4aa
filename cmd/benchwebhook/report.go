package main

import (
	"fmt"
	"io"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// The target, informational: the exit status does not depend on it. Delivery keeps up with
// intake when it drains faster than intake writes, and a steady intake leaves no more than a
// second of it waiting.
const keepUpBacklog = time.Second

func report(w io.Writer, cfg config, res result) {
	insert := loadtest.MedianOf(res.runs, func(s sample) float64 { return s.insertRate })
	drain := loadtest.MedianOf(res.runs, func(s sample) float64 { return s.drainRate })
	ratio := loadtest.MedianOf(res.runs, func(s sample) float64 { return s.drainRate / s.insertRate })
	steady := loadtest.MedianOf(res.runs, func(s sample) float64 { return s.steadyRate })
	backlog := loadtest.MedianOf(res.runs, func(s sample) int64 { return s.steadyBacklog })
	clear := time.Duration(loadtest.MedianOf(res.runs, func(s sample) int64 { return int64(s.steadyClear) }))

	fmt.Fprintf(w, "\nmedian of %d run(s), %d endpoints answering at once (and %d slow ones), %d rows for them per measurement:\n",
		cfg.runs, cfg.endpoints, cfg.slow, cfg.events)
	fmt.Fprintf(w, "  baseline, outbox rows stored by %d writers:     %7.0f rows/s\n", cfg.writers, insert)
	fmt.Fprintf(w, "  drain, rows delivered and recorded:           %7.0f rows/s   drain/baseline %.2f (median of the runs' ratios)\n", drain, ratio)
	fmt.Fprintf(w, "  steady, rows written at %.0f/s (reached %.0f/s): backlog %d when writing stopped, gone %s later\n",
		cfg.rate, steady, backlog, loadtest.Millis(clear))
	maxBacklog := int64(cfg.rate * keepUpBacklog.Seconds())
	fmt.Fprintf(w, "\ntarget, delivery keeps up with intake at %.0f/s (informational, exit status ignores it):\n", cfg.rate)
	fmt.Fprintf(w, "  drain %.0f rows/s >= %.0f %s; steady backlog %d <= %d (%s of intake) %s\n",
		drain, cfg.rate, loadtest.Verdict(drain >= cfg.rate), backlog, maxBacklog, keepUpBacklog, loadtest.Verdict(backlog <= maxBacklog))
	fmt.Fprintf(w, "correctness (every row delivered, every event received once): %d failure(s)\n", len(res.failures))
	for _, f := range res.failures {
		fmt.Fprintf(w, "  %s\n", f)
	}
}
