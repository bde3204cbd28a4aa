// Command benchwebhook measures how fast the webhook deliverer works off the outbox against bots
// that answer at once, beside the fastest the same PostgreSQL takes outbox rows in (single-row
// INSERTs through webhook.Queue), both in the same run on the same database; and whether it keeps
// up with rows written at a steady rate while it delivers.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

func main() {
	loadtest.Main("benchwebhook", func(ctx context.Context) error { return run(ctx, os.Args, os.Getenv, os.Stdout) })
}

// run is the whole program; main only wires it to the process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, command, err := parseConfig(args[1:], getenv)
	if err != nil {
		return err
	}
	loadtest.PrintHeader(stdout, command, "writers, deliverer, bots and PostgreSQL")
	res, err := measure(ctx, cfg, stdout)
	if err != nil {
		return err
	}
	report(stdout, cfg, res)
	if len(res.failures) > 0 {
		return fmt.Errorf("%d correctness check(s) failed: %s", len(res.failures), res.failures[0])
	}
	return nil
}

func parseConfig(args []string, getenv func(string) string) (cfg config, command string, err error) {
	fs := loadtest.NewFlagSet("benchwebhook", getenv, &cfg.adminURL)
	fs.IntVar(&cfg.endpoints, "endpoints", 8, "bots, each with its own key and its own receiver on a port of its own")
	fs.IntVar(&cfg.slow, "slow", 0, "endpoints besides, whose bots answer only after -slow-delay; their rows are not counted")
	fs.DurationVar(&cfg.slowDelay, "slow-delay", 10*time.Second, "how long the slow endpoints' bots take to answer")
	fs.IntVar(&cfg.events, "events", 10000, "outbox rows written per measurement for the endpoints that answer at once, spread evenly over them")
	fs.IntVar(&cfg.writers, "writers", 8, "concurrent writers of the outbox rows, each on its own connection")
	fs.Float64Var(&cfg.rate, "rate", 1400, "rows per second written during the steady run (the intake rate to keep up with)")
	fs.IntVar(&cfg.runs, "runs", 3, "runs of each measurement; the report shows the median")
	fs.IntVar(&cfg.maxInFlight, "max-in-flight", 0, "requests at once per endpoint (0: the deliverer's default)")
	fs.IntVar(&cfg.deliverConns, "deliver-conns", 8, "pool_max_conns of the deliverer's pool")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the measurements here (writers, deliverer and bots alike)")
	if err := loadtest.ParseFlags(fs, args); err != nil {
		return config{}, "", err
	}
	for name, v := range map[string]int{"endpoints": cfg.endpoints, "events": cfg.events, "writers": cfg.writers,
		"runs": cfg.runs, "deliver-conns": cfg.deliverConns} {
		if v <= 0 {
			return config{}, "", fmt.Errorf("-%s must be positive", name)
		}
	}
	if cfg.rate <= 0 || cfg.maxInFlight < 0 || cfg.slow < 0 || cfg.slowDelay < 0 {
		return config{}, "", errors.New("-rate must be positive, and -max-in-flight, -slow and -slow-delay at least 0")
	}
	return cfg, loadtest.CommandLine(fs), nil
}
