// Command soak repeats the desk's fault runs against real processes and prints what it saw:
//
//  1. kill -9 of PostgreSQL while bots post packages, each retried under its own id until answered;
//  2. kill -9 of one of two app instances while agents take, accept and resolve packages on both;
//  3. a webhook receiver that hangs beside one that answers at once;
//  4. an exhausted database pool: a lock held on the packages table while bots keep asking;
//  5. warm transfers and refund approvals on three instances, agents on websockets, while one
//     instance and then PostgreSQL are killed with kill -9.
//
// Everything runs on loopback: `web serve` instances (the built binary, as operators run it) and a
// PostgreSQL cluster of the tool's own in a temporary directory, on a free port, so that it may kill
// its postmaster without touching any other PostgreSQL. Children run in process groups of their
// own, so a Ctrl-C reaches the tool alone, which then stops them in order and removes the
// directory; should the tool itself be killed, the kernel kills them (parent-death signal).
//
// Figures are informational. The exit status is 1 when an invariant fails: a package that was
// acknowledged is missing or stored twice, or a package was claimed twice; and in the fifth run,
// two live rings of one package or one agent at once, a ring to an agent of a dead instance past
// five seconds, a warm package whose bot heard no end or two ends of its warm phase, or a refund
// approval that ended other than once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

func main() {
	loadtest.Main("soak", func(ctx context.Context) error { return run(ctx, os.Args, os.Stdout) })
}

// run is the whole program; main only wires it to the process.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, command, err := parseConfig(args[1:])
	if err != nil {
		return err
	}
	loadtest.PrintHeader(stdout, command, "the app instances, the tool and PostgreSQL")
	start := time.Now()
	sections, err := soakAll(ctx, cfg, stdout)
	fmt.Fprintf(stdout, "\ntotal %s\n", time.Since(start).Round(time.Second))
	if err != nil {
		return err
	}
	var failures []string
	for _, sec := range sections {
		failures = append(failures, sec.failed...)
	}
	if len(failures) > 0 {
		return fmt.Errorf("%d invariant(s) failed: %s", len(failures), strings.Join(failures, "; "))
	}
	return nil
}

// config is what one run does. Durations bound every phase, so that the whole run is bounded.
type config struct {
	web         string // the built `web` binary; empty: build ./cmd/web into the run's directory
	examplePath string // the package the bodies are built from
	scenarios   []int
	poolConns   int // pool_max_conns of every instance
	keep        bool

	pgkillBots    int
	pgkillBefore  time.Duration // load before the kill
	pgkillOutage  time.Duration // PostgreSQL stays down this long
	pgkillAfter   time.Duration // load after PostgreSQL answers again
	pgkillGiveUp  time.Duration // how long a bot keeps retrying its last package after the load stops
	appkillPkgs   int
	appkillAgents int
	appkillRun    time.Duration // the agents' whole run; the kill comes after a third of it
	appkillRevive time.Duration // the killed instance is started again this long after the kill
	reservation   time.Duration // the claims queue's reservation timeout

	hookBots      int
	hookIntake    time.Duration // bots post this long; the slow bot starts after a third of it
	hookSlowSleep time.Duration // the slow receiver's answer takes this long
	hookSlowRate  float64       // packages per second for the slow receiver's bot
	hookDrain     time.Duration // the longest the backlog is watched after intake stops

	poolBots           int
	poolBefore         time.Duration
	poolHold           time.Duration // the lock is held this long
	poolAfter          time.Duration
	poolAcquireTimeout time.Duration
	poolRequestTimeout time.Duration
	poolClientTimeout  time.Duration // impatient bots leave after this

	warmAgents      int
	warmSupervisors int
	warmCapacity    int           // packages each agent holds at once
	warmBots        int           // half post warm packages, half cold
	warmPace        time.Duration // each bot sends a package this often
	warmRun         time.Duration // the bots' run; the instance is killed after a fifth of it
	warmMove        time.Duration // half the killed instance's agents reconnect elsewhere this long after the kill
	warmRevive      time.Duration // the killed instance is started again this long after the kill
	warmOutage      time.Duration // PostgreSQL stays down this long
	warmWindow      time.Duration // the queue's accept window: how long a ring lasts
	warmWait        time.Duration // the queue's warm wait
	warmApproval    time.Duration // the queue's approval timeout
	warmDrain       time.Duration // the longest each step of the end waits (warm phases, approvals, webhooks)
}

func (c config) runs(n int) bool { return slices.Contains(c.scenarios, n) }

// quickSizes shrink every scenario, to about two and a half minutes in all; flags given explicitly still win.
func quickSizes() map[string]string {
	return map[string]string{
		"pgkill-bots": "8", "pgkill-before": "3s", "pgkill-outage": "2s", "pgkill-after": "4s",
		"appkill-packages": "3000", "appkill-agents": "8", "appkill-run": "12s", "appkill-revive": "2s",
		"hook-bots": "6", "hook-intake": "9s", "hook-drain": "10s",
		"pool-bots": "16", "pool-before": "2s", "pool-hold": "6s", "pool-after": "3s",
		"warm-agents": "8", "warm-bots": "4", "warm-pace": "700ms", "warm-run": "24s", "warm-move": "6s", "warm-revive": "7s",
		"warm-pg-outage": "2s", "warm-accept-window": "2s", "warm-wait": "8s", "warm-approval-timeout": "4s", "warm-drain": "45s",
	}
}

func parseConfig(args []string) (cfg config, command string, err error) {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.StringVar(&cfg.web, "web", "", "the built web binary (make build: bin/web); empty builds ./cmd/web into the run's directory")
	fs.StringVar(&cfg.examplePath, "example", "internal/handoff/testdata/harbor-v1.json", "the package the bodies are built from")
	scenarios := fs.String("scenarios", "1,2,3,4,5", "scenarios to run, comma-separated: 1 kill PostgreSQL, 2 kill an instance, 3 slow webhook, 4 pool exhaustion, 5 warm transfers and approvals under both kills")
	fs.IntVar(&cfg.poolConns, "pool", 8, "pool_max_conns of every instance's database pool")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the run's directory (cluster, logs) at exit, for inspection")

	fs.IntVar(&cfg.pgkillBots, "pgkill-bots", 16, "1: bots posting packages")
	fs.DurationVar(&cfg.pgkillBefore, "pgkill-before", 8*time.Second, "1: load before PostgreSQL is killed")
	fs.DurationVar(&cfg.pgkillOutage, "pgkill-outage", 5*time.Second, "1: how long PostgreSQL stays down before it is started again")
	fs.DurationVar(&cfg.pgkillAfter, "pgkill-after", 10*time.Second, "1: load after PostgreSQL answers again")
	fs.DurationVar(&cfg.pgkillGiveUp, "pgkill-give-up", 20*time.Second, "1, 3, 4: how long a bot keeps retrying its last package after the load stops")

	fs.IntVar(&cfg.appkillPkgs, "appkill-packages", 10000, "2: packages queued before the agents start")
	fs.IntVar(&cfg.appkillAgents, "appkill-agents", 16, "2: agents, half on each instance")
	fs.DurationVar(&cfg.appkillRun, "appkill-run", 40*time.Second, "2: the agents' run; the kill comes after a third of it")
	fs.DurationVar(&cfg.appkillRevive, "appkill-revive", 3*time.Second, "2: the killed instance is started again this long after the kill")
	fs.DurationVar(&cfg.reservation, "appkill-reservation-timeout", 5*time.Second, "2: the queue's reservation timeout (the sweeper runs every 5s)")

	fs.IntVar(&cfg.hookBots, "hook-bots", 12, "3: bots posting for the fast receiver")
	fs.DurationVar(&cfg.hookIntake, "hook-intake", 30*time.Second, "3: how long the bots post; the slow receiver's bot starts after a third of it")
	fs.DurationVar(&cfg.hookSlowSleep, "hook-slow-sleep", 10*time.Second, "3: how long the slow receiver takes to answer")
	fs.Float64Var(&cfg.hookSlowRate, "hook-slow-rate", 5, "3: packages per second posted for the slow receiver")
	fs.DurationVar(&cfg.hookDrain, "hook-drain", 30*time.Second, "3: the longest the fast receiver's backlog is watched after intake stops")

	fs.IntVar(&cfg.poolBots, "pool-bots", 32, "4: bots: a third post and leave after -pool-client-timeout, a third post and retry, a third read")
	fs.DurationVar(&cfg.poolBefore, "pool-before", 3*time.Second, "4: load before the lock")
	fs.DurationVar(&cfg.poolHold, "pool-hold", 15*time.Second, "4: how long a transaction holds ACCESS EXCLUSIVE on the packages table")
	fs.DurationVar(&cfg.poolAfter, "pool-after", 5*time.Second, "4: load after the lock is released")
	fs.DurationVar(&cfg.poolAcquireTimeout, "pool-acquire-timeout", 2*time.Second, "4: the instance's DATABASE_ACQUIRE_TIMEOUT")
	fs.DurationVar(&cfg.poolRequestTimeout, "pool-request-timeout", 5*time.Second, "4: the instance's REQUEST_TIMEOUT")
	fs.DurationVar(&cfg.poolClientTimeout, "pool-client-timeout", time.Second, "4: how long an impatient bot waits for an answer")

	fs.IntVar(&cfg.warmAgents, "warm-agents", 20, "5: agents on websockets, a third on each instance")
	fs.IntVar(&cfg.warmSupervisors, "warm-supervisors", 2, "5: supervisors deciding refund approvals, on the instances that are not killed")
	fs.IntVar(&cfg.warmCapacity, "warm-capacity", 3, "5: packages each agent holds at once")
	fs.IntVar(&cfg.warmBots, "warm-bots", 8, "5: bots, half posting warm packages and half cold")
	fs.DurationVar(&cfg.warmPace, "warm-pace", 800*time.Millisecond, "5: each bot sends a package this often")
	fs.DurationVar(&cfg.warmRun, "warm-run", 90*time.Second, "5: how long the bots post; an instance is killed after a fifth of it, PostgreSQL later")
	fs.DurationVar(&cfg.warmMove, "warm-move", 7*time.Second, "5: half the killed instance's agents reconnect to another instance this long after the kill")
	fs.DurationVar(&cfg.warmRevive, "warm-revive", 10*time.Second, "5: the killed instance is started again this long after the kill; the rest of its agents come back to it")
	fs.DurationVar(&cfg.warmOutage, "warm-pg-outage", 4*time.Second, "5: how long PostgreSQL stays down")
	fs.DurationVar(&cfg.warmWindow, "warm-accept-window", 3*time.Second, "5: the queue's accept window (how long one ring lasts)")
	fs.DurationVar(&cfg.warmWait, "warm-wait", 15*time.Second, "5: the queue's warm wait (how long a warm package goes on ringing)")
	fs.DurationVar(&cfg.warmApproval, "warm-approval-timeout", 8*time.Second, "5: the queue's approval timeout, set in the run's own database below the desk's floor of a minute")
	fs.DurationVar(&cfg.warmDrain, "warm-drain", 60*time.Second, "5: the longest the end waits for each of: warm phases to end, approvals to end, webhooks to be delivered")

	quick := loadtest.AddQuick(fs, "shrink every scenario, for a run of about two and a half minutes in all (explicit flags still win)", quickSizes())
	if err := quick.Parse(args); err != nil {
		return config{}, "", err
	}
	if cfg.scenarios, err = loadtest.ParseScenarios(*scenarios, 5); err != nil {
		return config{}, "", err
	}
	for name, v := range map[string]int{"pool": cfg.poolConns, "pgkill-bots": cfg.pgkillBots, "appkill-packages": cfg.appkillPkgs,
		"hook-bots": cfg.hookBots} {
		if v <= 0 {
			return config{}, "", fmt.Errorf("-%s must be positive", name)
		}
	}
	if cfg.appkillAgents < 2 {
		return config{}, "", errors.New("-appkill-agents must be at least 2: half of them work on each instance")
	}
	if cfg.poolBots < 3 {
		return config{}, "", errors.New("-pool-bots must be at least 3: one of each kind")
	}
	for name, d := range map[string]time.Duration{"pgkill-before": cfg.pgkillBefore, "pgkill-outage": cfg.pgkillOutage,
		"pgkill-after": cfg.pgkillAfter, "pgkill-give-up": cfg.pgkillGiveUp, "appkill-run": cfg.appkillRun,
		"appkill-reservation-timeout": cfg.reservation, "hook-intake": cfg.hookIntake, "hook-slow-sleep": cfg.hookSlowSleep,
		"hook-drain": cfg.hookDrain, "pool-before": cfg.poolBefore, "pool-hold": cfg.poolHold, "pool-after": cfg.poolAfter,
		"pool-acquire-timeout": cfg.poolAcquireTimeout, "pool-request-timeout": cfg.poolRequestTimeout,
		"pool-client-timeout": cfg.poolClientTimeout} {
		if d <= 0 {
			return config{}, "", fmt.Errorf("-%s must be positive", name)
		}
	}
	if cfg.reservation < time.Second {
		return config{}, "", errors.New("-appkill-reservation-timeout: the desk refuses reservation timeouts under a second")
	}
	if cfg.appkillRevive < 0 || cfg.appkillRevive >= cfg.appkillRun*2/3 {
		return config{}, "", errors.New("-appkill-revive must fall within the run after the kill (under two thirds of -appkill-run)")
	}
	if cfg.hookSlowRate <= 0 {
		return config{}, "", errors.New("-hook-slow-rate must be positive")
	}
	if err := cfg.checkWarm(); err != nil {
		return config{}, "", err
	}
	return cfg, quick.CommandLine(), nil
}

// checkWarm refuses settings under which the fifth run could not check what it promises to.
func (c config) checkWarm() error {
	for name, v := range map[string]int{"warm-agents": c.warmAgents, "warm-supervisors": c.warmSupervisors, "warm-capacity": c.warmCapacity} {
		if v <= 0 {
			return fmt.Errorf("-%s must be positive", name)
		}
	}
	if c.warmAgents < warmInstances {
		return fmt.Errorf("-warm-agents must be at least %d: agents work on each instance", warmInstances)
	}
	if c.warmBots < 2 {
		return errors.New("-warm-bots must be at least 2: half post warm packages, half cold")
	}
	for name, d := range map[string]time.Duration{"warm-pace": c.warmPace, "warm-run": c.warmRun, "warm-pg-outage": c.warmOutage,
		"warm-approval-timeout": c.warmApproval, "warm-drain": c.warmDrain} {
		if d <= 0 {
			return fmt.Errorf("-%s must be positive", name)
		}
	}
	if c.warmWindow < time.Second || c.warmWait < time.Second {
		return errors.New("-warm-accept-window and -warm-wait: the desk refuses either under a second")
	}
	// The killed instance's agents must stay away past the bound, or its check sees nothing.
	if c.warmMove <= deadInstanceBound || c.warmRevive < c.warmMove {
		return fmt.Errorf("-warm-move must exceed %s and -warm-revive must not come before it", deadInstanceBound)
	}
	if _, pgKill := c.warmTimeline(); pgKill+c.warmOutage+2*time.Second > c.warmRun {
		return fmt.Errorf("-warm-run %s is too short: PostgreSQL is killed at +%s (the instance's restart plus %s) and stays down %s",
			c.warmRun, pgKill, settle, c.warmOutage)
	}
	return nil
}
