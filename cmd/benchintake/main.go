// Command benchintake measures how fast bots can hand packages to the desk end to end (HTTP,
// validation, guards, the intake transaction) against the fastest the same PostgreSQL can store
// the same bodies (single-row INSERTs), both measured in the same run on the same database.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// defaultAdminURL is where `make test` finds PostgreSQL too (pgtest.DefaultAdminURL, not imported
// so that the command does not link the testing package).
const defaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args, os.Getenv, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "benchintake: %v\n", err)
		os.Exit(1)
	}
}

// run is the whole program; main only wires it to the process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, command, err := parseConfig(args[1:], getenv)
	if errors.Is(err, flag.ErrHelp) {
		return nil // the flag package printed the usage
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "command:    %s\n", command)
	fmt.Fprintf(stdout, "Go:         %s %s/%s, GOMAXPROCS=%d, NumCPU=%d (client, server and PostgreSQL share these)\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU())
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
	adminURL := getenv("TEST_DATABASE_URL")
	if adminURL == "" {
		adminURL = defaultAdminURL
	}
	fs := flag.NewFlagSet("benchintake", flag.ContinueOnError)
	fs.StringVar(&cfg.adminURL, "database-url", adminURL, "admin URL of the PostgreSQL to create the bench database on")
	fs.StringVar(&cfg.examplePath, "example", "internal/handoff/testdata/harbor-v1.json", "the package the bodies are built from")
	fs.DurationVar(&cfg.duration, "duration", 5*time.Second, "measured time of each run of each side")
	fs.IntVar(&cfg.runs, "runs", 3, "runs of each side per cell; the report shows the median")
	concurrency := fs.String("concurrency", "8,64", "concurrent bots (and baseline workers), comma-separated")
	sizes := fs.String("sizes", "4096,20480", "package body sizes in bytes, comma-separated")
	fs.IntVar(&cfg.serverConns, "server-conns", 32, "pool_max_conns of the server's database pool")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the measurements here (labels side=server|bots|baseline)")
	if err := fs.Parse(args); err != nil {
		return config{}, "", err
	}
	if fs.NArg() > 0 {
		return config{}, "", fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if cfg.concurrency, err = parseInts(*concurrency); err != nil {
		return config{}, "", fmt.Errorf("-concurrency: %w", err)
	}
	if cfg.sizes, err = parseInts(*sizes); err != nil {
		return config{}, "", fmt.Errorf("-sizes: %w", err)
	}
	if cfg.duration <= 0 || cfg.runs <= 0 || cfg.serverConns <= 0 {
		return config{}, "", errors.New("-duration, -runs and -server-conns must be positive")
	}
	if cfg.runs*len(cfg.concurrency)*len(cfg.sizes) > 9999 {
		return config{}, "", errors.New("at most 9999 intake runs: each gets a queue named bench_NNNN")
	}
	command = "go run ./cmd/benchintake"
	fs.VisitAll(func(f *flag.Flag) {
		if v := f.Value.String(); v != "" {
			if f.Name == "database-url" {
				v = loadtest.Redacted(v)
			}
			command += " -" + f.Name + "=" + v
		}
	})
	return cfg, command, nil
}

// parseInts reads a comma-separated list of positive integers such as "8,64".
func parseInts(list string) ([]int, error) {
	var out []int
	for field := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(field))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q is not a positive integer", field)
		}
		out = append(out, n)
	}
	return out, nil
}
