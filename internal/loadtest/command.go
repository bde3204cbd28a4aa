package loadtest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

// DefaultAdminURL is where `make test` finds PostgreSQL too (pgtest.DefaultAdminURL, not imported
// so that the tools do not link the testing package).
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// Main runs a tool with a context that ends at SIGINT or SIGTERM, so that an interrupted run still
// tears down and drops its database, and exits with status 1 when run fails. A run that ends in
// flag.ErrHelp did not fail: the flag package has printed the usage asked for.
func Main(name string, run func(ctx context.Context) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx); err != nil && !errors.Is(err, flag.ErrHelp) {
		_, _ = fmt.Fprintf(os.Stderr, "%s: %v\n", name, err) // exiting anyway, with nowhere else to tell
		os.Exit(1)
	}
}

// NewFlagSet starts a tool's flags with -database-url, the server its scratch database is created
// on: by default the one the tests use (TEST_DATABASE_URL, else DefaultAdminURL).
func NewFlagSet(name string, getenv func(string) string, adminURL *string) *flag.FlagSet {
	fallback := getenv("TEST_DATABASE_URL")
	if fallback == "" {
		fallback = DefaultAdminURL
	}
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.StringVar(adminURL, "database-url", fallback, "admin URL of the PostgreSQL to create the bench database on")
	return fs
}

// ParseFlags parses args, which must be flags only: a stray word is more likely a mistyped flag
// than something to ignore.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// CommandLine is the command that repeats a run of the tool fs belongs to, with every flag that
// has a value, defaults included, so that a report still says what it measured after a default
// changes. The database URL is shown without its password; the flags in omit are left out.
func CommandLine(fs *flag.FlagSet, omit ...string) string {
	command := "go run ./cmd/" + fs.Name()
	fs.VisitAll(func(f *flag.Flag) {
		if v := f.Value.String(); v != "" && !slices.Contains(omit, f.Name) {
			if f.Name == "database-url" {
				v = Redacted(v)
			}
			command += " -" + f.Name + "=" + v
		}
	})
	return command
}

// PrintHeader starts a report with the command that repeats the run and the runtime and cores it
// ran on, which every figure depends on; sharing names what else works on those cores. Like the
// rest of a tool's report it goes to stdout, where a failed write has nowhere better to be told.
func PrintHeader(w io.Writer, command, sharing string) {
	_, _ = fmt.Fprintf(w, "command:    %s\n", command)
	_, _ = fmt.Fprintf(w, "Go:         %s %s/%s, GOMAXPROCS=%d, NumCPU=%d (%s share these)\n",
		runtime.Version(), runtime.GOOS, runtime.GOARCH, runtime.GOMAXPROCS(0), runtime.NumCPU(), sharing)
}

// ParseInts reads a comma-separated list of positive integers such as "8,64".
func ParseInts(list string) ([]int, error) {
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

// Quick is a tool's -quick flag: a smoke run that shrinks the tool's sizes, while the flags given
// on the command line still win.
type Quick struct {
	fs    *flag.FlagSet
	on    *bool
	sizes map[string]string // flag name → its value in a smoke run
}

// AddQuick adds -quick to fs, which sets the flags named in sizes to their values there.
func AddQuick(fs *flag.FlagSet, usage string, sizes map[string]string) *Quick {
	return &Quick{fs: fs, on: fs.Bool("quick", false, usage), sizes: sizes}
}

// Parse parses args as ParseFlags does; with -quick, it then sets each size the command line did
// not give.
func (q *Quick) Parse(args []string) error {
	if err := ParseFlags(q.fs, args); err != nil || !*q.on {
		return err
	}
	given := map[string]bool{}
	q.fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for name, value := range q.sizes {
		if !given[name] {
			if err := q.fs.Set(name, value); err != nil {
				return err
			}
		}
	}
	return nil
}

// CommandLine is the command that repeats the run, with the sizes spelled out as CommandLine
// spells out every flag, and -quick named after it, so that a report says it was a smoke run.
func (q *Quick) CommandLine() string {
	command := CommandLine(q.fs, "quick")
	if *q.on {
		command += " (-quick)"
	}
	return command
}

// ParseScenarios reads -scenarios, the comma-separated numbers of the scenarios to run out of a
// tool's 1..n.
func ParseScenarios(list string, n int) ([]int, error) {
	scenarios, err := ParseInts(list)
	if err != nil {
		return nil, fmt.Errorf("-scenarios: %w", err)
	}
	for _, s := range scenarios {
		if s > n {
			return nil, fmt.Errorf("-scenarios: %d is not one of 1..%d", s, n)
		}
	}
	return scenarios, nil
}
