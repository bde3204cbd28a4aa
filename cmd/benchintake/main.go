// Command benchintake measures how fast bots can hand packages to the desk end to end (HTTP,
// validation, guards, the intake transaction, a warm package's first ring) against the fastest the
// same PostgreSQL can store the same bodies (single-row INSERTs), cold and warm packages each
// beside that baseline, all measured in the same run on the same database.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

func main() {
	loadtest.Main("benchintake", func(ctx context.Context) error { return run(ctx, os.Args, os.Getenv, os.Stdout) })
}

// run is the whole program; main only wires it to the process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, command, err := parseConfig(args[1:], getenv)
	if err != nil {
		return err
	}
	loadtest.PrintHeader(stdout, command, "client, server and PostgreSQL")
	res, err := measure(ctx, cfg, stdout)
	if err != nil {
		return err
	}
	report(stdout, cfg, res)
	if n := res.errors(); n > 0 {
		return fmt.Errorf("%d operations failed (intake answers other than 201, or failed baseline inserts)", n)
	}
	return nil
}

func parseConfig(args []string, getenv func(string) string) (cfg config, command string, err error) {
	fs := loadtest.NewFlagSet("benchintake", getenv, &cfg.adminURL)
	fs.StringVar(&cfg.examplePath, "example", "internal/handoff/testdata/harbor-v1.json", "the package the bodies are built from")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "measured time of each run of each side")
	fs.IntVar(&cfg.runs, "runs", 3, "runs of each side per cell; the report shows the median")
	concurrency := fs.String("concurrency", "8,64", "concurrent bots (and baseline workers), comma-separated")
	sizes := fs.String("sizes", "4096,20480", "package body sizes in bytes, comma-separated")
	modes := fs.String("modes", "cold,warm", "transfer modes of the packages, comma-separated, each measured beside the same baseline")
	fs.IntVar(&cfg.serverConns, "server-conns", 32, "pool_max_conns of the server's database pool")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the measurements here (labels side=server|bots|baseline)")
	if err := loadtest.ParseFlags(fs, args); err != nil {
		return config{}, "", err
	}
	if cfg.concurrency, err = loadtest.ParseInts(*concurrency); err != nil {
		return config{}, "", fmt.Errorf("-concurrency: %w", err)
	}
	if cfg.sizes, err = loadtest.ParseInts(*sizes); err != nil {
		return config{}, "", fmt.Errorf("-sizes: %w", err)
	}
	for _, mode := range strings.Split(*modes, ",") {
		if mode != "cold" && mode != "warm" {
			return config{}, "", fmt.Errorf("-modes: %q is not a transfer mode (cold, warm)", mode)
		}
		cfg.modes = append(cfg.modes, mode)
	}
	if cfg.duration <= 0 || cfg.runs <= 0 || cfg.serverConns <= 0 {
		return config{}, "", errors.New("-duration, -runs and -server-conns must be positive")
	}
	if cfg.runs*len(cfg.concurrency)*len(cfg.sizes)*len(cfg.modes) > 9999 {
		return config{}, "", errors.New("at most 9999 intake runs: each gets a queue named bench_NNNN")
	}
	return cfg, loadtest.CommandLine(fs), nil
}
