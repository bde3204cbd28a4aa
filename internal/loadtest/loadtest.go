// Package loadtest is the skeleton the desk's load tools share, so that they set up, measure and
// report the same way: their flags and the command line that repeats a run, scratch databases and
// set-ups that undo themselves, servers run in-process on loopback, error counts, medians over
// runs, nearest-rank percentiles, CPU time and profiles. What each tool measures stays in the tool.
package loadtest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/url"
	"os"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// CreateDatabase creates an empty database named prefix plus a random suffix on the server of
// adminURL, and returns its name and URL.
func CreateDatabase(ctx context.Context, adminURL, prefix string) (name, dbURL string, err error) {
	admin, err := url.Parse(adminURL)
	if err != nil {
		return "", "", fmt.Errorf("database url: %w", err)
	}
	name = prefix + strings.ToLower(rand.Text())
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", "", err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }() // a close error cannot undo the query's outcome
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", err
	}
	scratch := *admin
	scratch.Path = "/" + name
	return name, scratch.String(), nil
}

// DropDatabase drops a scratch database, closing whatever connections are still open on it.
func DropDatabase(adminURL, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	defer func() { _ = conn.Close(ctx) }() // a close error cannot undo the query's outcome
	if _, err := conn.Exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// DatabaseExists reports whether the server of adminURL has a database of that name: what a tool's
// test asks to know that a run dropped its scratch database.
func DatabaseExists(ctx context.Context, adminURL, name string) (bool, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return false, err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }() // a close error cannot change the answer
	var exists bool
	err = conn.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1)`, name).Scan(&exists)
	return exists, err
}

// Percentile is the nearest-rank p-th percentile (0 < p ≤ 100) of sorted durations: always one
// that was measured, never an interpolation.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(p*float64(len(sorted))/100 + 0.999999) // ceil(p/100 × n)
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// Redacted shows a database URL without its password.
func Redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable url)"
	}
	return u.Redacted()
}

// StartCPUProfile profiles this process into the file at path until stop is called, which
// reports whether the profile was written out; with an empty path it does nothing.
func StartCPUProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path) //nolint:gosec // G304: the path is the operator's own -cpuprofile flag.
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return func() error {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		return nil
	}, nil
}

// OwnCPU is the user and system CPU time this process has used so far, its child processes not
// included; 0 if the system cannot tell.
func OwnCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Sleep waits for d, or until ctx is done: a load tool's pauses end at once when the run is
// interrupted. It returns ctx's error if ctx ended first or had ended already.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// SleepUntil waits until t, or until ctx is done, as Sleep does.
func SleepUntil(ctx context.Context, t time.Time) error { return Sleep(ctx, time.Until(t)) }

// LoadAverage is the machine's 1-, 5- and 15-minute load: the cores are shared, and what else
// runs moves every figure.
func LoadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	fields := strings.Fields(string(raw))
	if len(fields) < 3 {
		return "unknown"
	}
	return strings.Join(fields[:3], " ")
}
