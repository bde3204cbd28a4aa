package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// pgKill: bots post packages to one instance; PostgreSQL's postmaster is killed with SIGKILL,
// left down a while, and started again (crash recovery). Every package answered 2xx must be stored
// once, and the desk should answer 503 with Retry-After while it cannot reach its database.
func (s *soak) pgKill(ctx context.Context) (*section, error) {
	cfg := s.cfg
	dbURL, db, err := s.newDatabase(ctx, "soak_pgkill", "intake")
	if err != nil {
		return nil, err
	}
	defer db.Close()
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
	ds, logs, err := wrapUp(ctx, db, []*app{a}, in)
	if err != nil {
		return nil, err
	}

	sec := &section{n: 1}
	sec.info("timeline", fmt.Sprintf("%d bots; kill at +%s; down %s; crash recovery %s; load until +%s",
		cfg.pgkillBots, seconds(killAt.Sub(start)), seconds(restartAt.Sub(killAt)), seconds(readyAt.Sub(restartAt)), seconds(stopAt.Sub(start))))
	ds[0].report(sec, "intake")
	// A backend the kill orphaned may still commit and answer, so a 2xx in the outage is no fault.
	sec.refusals("refusals while PostgreSQL was down or recovering that were 503 with Retry-After",
		func(k string) bool { return !strings.HasPrefix(k, "20") }, []*tally{in.tally}, ph.names[1:3]...)
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
	sec.unexpected("answers neither 2xx nor retryable", &in.unexpected)
	sec.answers("answers", in.tally)
	sec.note("the instance logged: %s", logs.warningLine())
	return sec, nil
}
