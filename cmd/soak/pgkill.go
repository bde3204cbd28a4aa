package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// openDB opens a small pool of the tool's own on a scenario's database, to check what it holds.
func openDB(ctx context.Context, dbURL string) (*pgxpool.Pool, error) {
	u, err := loadtest.PoolURL(dbURL, 2)
	if err != nil {
		return nil, err
	}
	return pgxpool.New(ctx, u.String())
}

// pgKill: bots post packages to one instance; PostgreSQL's postmaster is killed with SIGKILL,
// left down a while, and started again (crash recovery). Every package answered 2xx must be stored
// once, and the desk should answer 503 with Retry-After while it cannot reach its database.
func (s *soak) pgKill(ctx context.Context) (*section, error) {
	cfg := s.cfg
	dbURL, err := s.pg.createDatabase(ctx, "soak_pgkill")
	if err != nil {
		return nil, err
	}
	if _, err := s.cli(dbURL, "queue", "add", "--name", "intake"); err != nil {
		return nil, err
	}
	key, err := s.apiKey(dbURL, "pgkill-bot", "intake", "")
	if err != nil {
		return nil, err
	}
	a, err := s.startApp(ctx, "pgkill", dbURL)
	if err != nil {
		return nil, err
	}
	ph := newPhases("before the kill", "PostgreSQL down", "PostgreSQL recovering", "after")
	in := s.newIntake(a.base, key, "intake", "ho_pgkill", ph, cfg.pgkillGiveUp)

	start := time.Now()
	wait := in.bots(ctx, cfg.pgkillBots, 0)
	fmt.Fprintf(s.out, "  %d bots posting to %s\n", cfg.pgkillBots, a.base)
	var killAt, restartAt, readyAt time.Time
	err = func() error {
		if err := loadtest.Sleep(ctx, cfg.pgkillBefore); err != nil {
			return err
		}
		killAt = time.Now()
		ph.mark(0, killAt)
		if err := s.pg.kill9(); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "  +%s kill -9 postmaster (pid %d)\n", seconds(killAt.Sub(start)), s.pg.proc.pid())
		if err := loadtest.Sleep(ctx, cfg.pgkillOutage); err != nil {
			return err
		}
		restartAt = time.Now()
		ph.mark(1, restartAt)
		starts := s.pg.starts
		if err := s.pg.start(ctx); err != nil {
			return err
		}
		readyAt = time.Now()
		ph.mark(2, readyAt)
		fmt.Fprintf(s.out, "  +%s PostgreSQL started again (%d start(s)), accepting connections after %s of crash recovery\n",
			seconds(restartAt.Sub(start)), s.pg.starts-starts, seconds(readyAt.Sub(restartAt)))
		return loadtest.Sleep(ctx, cfg.pgkillAfter)
	}()
	in.stop()
	stopAt := time.Now()
	wait()
	if err != nil {
		return nil, err
	}
	readyz, readyBody, _ := s.get(ctx, a.base+"/readyz")
	if err := stopApps(a); err != nil {
		return nil, err
	}
	db, err := openDB(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	d, err := in.check(ctx, db)
	if err != nil {
		return nil, err
	}
	logs, err := readLogs(a.logPath)
	if err != nil {
		return nil, err
	}

	sec := &section{n: 1}
	sec.info("timeline", fmt.Sprintf("%d bots; kill at +%s; down %s; crash recovery %s; load until +%s",
		cfg.pgkillBots, seconds(killAt.Sub(start)), seconds(restartAt.Sub(killAt)), seconds(readyAt.Sub(restartAt)), seconds(stopAt.Sub(start))))
	d.report(sec, "intake")
	// A backend the kill orphaned may still commit and answer, so a 2xx in the outage is no fault.
	refused, other := 0, 0
	for _, p := range ph.names[1:3] {
		refused += in.tally.count(p, func(k string) bool { return !strings.HasPrefix(k, "20") })
		other += in.tally.count(p, func(k string) bool {
			return !strings.HasPrefix(k, "20") && (!strings.HasPrefix(k, "503 ") || !strings.Contains(k, "Retry-After"))
		})
	}
	sec.expect("refusals while PostgreSQL was down or recovering that were 503 with Retry-After",
		fmt.Sprintf("%d of %d", refused-other, refused), "all", other == 0 && refused > 0)
	if first := in.firstAckAfter(readyAt); !first.IsZero() {
		sec.info("intake answered 2xx again, after PostgreSQL accepted connections", "+"+seconds(first.Sub(readyAt)))
	} else {
		sec.expect("intake answered 2xx again after PostgreSQL accepted connections", "never", "within the run", false)
	}
	before := rate(in.acksBetween(start, killAt), killAt.Sub(start))
	after := rate(in.acksBetween(readyAt, stopAt), stopAt.Sub(readyAt))
	sec.info("intake rate before the kill / after recovery (ratio)", fmt.Sprintf("%.0f/s / %.0f/s (%s)", before, after, ratio(after, before)))
	sec.info("2xx answer before the kill", p50p90max(in.latency[ph.names[0]]))
	sec.info("2xx answer after recovery", p50p90max(in.latency[ph.names[3]]))
	sec.expect("/readyz at the end", fmt.Sprintf("%d %s", readyz, readyBody), "200", readyz == http.StatusOK)
	if n := in.unexpected.Count(); n > 0 {
		sec.expect("answers neither 2xx nor retryable", fmt.Sprintf("%d, first: %q", n, in.unexpected.Samples()), "0", false)
	}
	for _, l := range in.tally.lines() {
		sec.note("answers %s", l)
	}
	sec.note("the instance logged: %s", logs.warningLine())
	return sec, nil
}
