// Command benchdesk measures the live desk under load, each figure beside a baseline measured in
// the same run on the same machine and database:
//
//  1. ingest→frame latency across two instances, against a bare NOTIFY→LISTEN round trip;
//  2. fan-out of one event to thousands of sockets, against a bare gorilla broadcast;
//  3. server memory per idle socket, against the same bare gorilla server;
//  4. agents racing Next→Accept→Resolve, against bare SKIP LOCKED claims;
//  5. the queue page over a deep queue, against GET /healthz;
//  6. another agent's queue page while one agent floods the desk with searches, against the same
//     page with nobody searching.
//
// Everything runs on loopback against a fresh database that is dropped at exit. The client
// sockets live in a child process (this binary again, see farm.go), so the server's memory and
// garbage collector are its own. Targets are informational; the exit status is 1 only when a
// correctness check fails (a socket missed a card, a package was claimed twice, a request failed).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// farmEnv, set in its environment, makes this binary the child that holds the client sockets.
const farmEnv = "BENCHDESK_FARM"

func main() {
	if os.Getenv(farmEnv) != "" {
		loadtest.Main("benchdesk farm", func(ctx context.Context) error { return serveFarm(ctx, os.Stdin, os.Stdout) })
		return
	}
	loadtest.Main("benchdesk", func(ctx context.Context) error { return run(ctx, os.Args, os.Getenv, os.Stdout) })
}

// run is the whole program; main only wires it to the process.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	cfg, command, err := parseConfig(args[1:], getenv)
	if err != nil {
		return err
	}
	loadtest.PrintHeader(stdout, command, "server, client sockets and PostgreSQL")
	start := time.Now()
	res, err := measure(ctx, cfg, stdout)
	if err != nil {
		return err
	}
	report(stdout, res, time.Since(start))
	if len(res.failures) > 0 {
		return fmt.Errorf("%d correctness check(s) failed: %s", len(res.failures), strings.Join(res.failures, "; "))
	}
	return nil
}

// config is what one run measures. Sizes of zero skip nothing: -scenarios picks what runs.
type config struct {
	adminURL    string
	examplePath string // the package the bodies are built from
	serverConns int    // pool_max_conns of each instance's pool
	scenarios   []int  // which of 1..5 run
	runs        int    // rounds of the queue-page loop; its report is the median round
	cpuProfile  string
	memProfile  string
	keep        bool // keep the bench database for inspection
	// playAutovacuum: on a server without autovacuum, the tool vacuums as autovacuum would (vacuum.go).
	playAutovacuum bool

	users int // agents created; every socket and racer is one of them

	latencySockets  int     // 1: sockets on instance B
	latencyPackages int     // 1: packages posted to instance A (also the NOTIFY round trips)
	latencyRate     float64 // 1: packages per second

	fanoutSockets int // 2, 3: sockets on one instance, and on the bare gorilla server
	fanoutEvents  int // 2: events measured (after one warm-up)

	racePackages int // 4
	raceAgents   int // 4
	raceVia      string
	raceLimit    time.Duration // 4: agents start no new cycle after this
	webhookWatch time.Duration // 4: how long the deliverers are watched after the race

	pagePackages    int // 5
	pageRequests    int // 5: requests per loop
	pageConcurrency int // 5

	floodPackages  int           // 6: packages in the queue searched and paged
	floodSearchers int           // 6: searches the flooding agent keeps in flight
	floodRequests  int           // 6: the other agent's page GETs, quiet and flooded
	floodLimit     time.Duration // 6: the flood stops after this, whatever the page loop

	collectTimeout time.Duration // the longest a socket may take to receive a card before it counts as missed
}

func (c config) runs1() bool { return slices.Contains(c.scenarios, 1) }
func (c config) runs2() bool {
	return slices.Contains(c.scenarios, 2) || slices.Contains(c.scenarios, 3)
}
func (c config) runs4() bool { return slices.Contains(c.scenarios, 4) }
func (c config) runs5() bool { return slices.Contains(c.scenarios, 5) }
func (c config) runs6() bool { return slices.Contains(c.scenarios, 6) }

// quickSizes shrink every scenario for a smoke run; flags given explicitly still win.
func quickSizes() map[string]string {
	return map[string]string{
		"users": "60", "latency-sockets": "50", "latency-packages": "40", "latency-rate": "40",
		"fanout-sockets": "500", "fanout-events": "5", "race-packages": "1000", "race-agents": "20",
		"page-packages": "1000", "page-requests": "50", "runs": "1", "webhook-watch": "2s",
		"flood-packages": "1000", "flood-requests": "30",
	}
}

func parseConfig(args []string, getenv func(string) string) (cfg config, command string, err error) {
	fs := loadtest.NewFlagSet("benchdesk", getenv, &cfg.adminURL)
	fs.StringVar(&cfg.examplePath, "example", "internal/handoff/testdata/harbor-v1.json", "the package the bodies are built from")
	fs.IntVar(&cfg.serverConns, "server-conns", 16, "pool_max_conns of each of the two instances' pools")
	scenarios := fs.String("scenarios", "1,2,3,4,5,6", "scenarios to run, comma-separated (2 and 3 run together)")
	fs.IntVar(&cfg.runs, "runs", 3, "rounds of the queue-page loops (5); the report shows the median round")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run (server side; the sockets are in a child)")
	fs.StringVar(&cfg.memProfile, "memprofile", "", "write a heap profile of the server with the fan-out sockets open and idle (3)")
	fs.IntVar(&cfg.users, "users", 500, "agents created; sockets are spread over them round-robin, racers are the first ones")
	fs.IntVar(&cfg.latencySockets, "latency-sockets", 500, "1: agent sockets on instance B")
	fs.IntVar(&cfg.latencyPackages, "latency-packages", 300, "1: packages posted to instance A, and NOTIFY round trips")
	fs.Float64Var(&cfg.latencyRate, "latency-rate", 20, "1: packages per second")
	fs.IntVar(&cfg.fanoutSockets, "fanout-sockets", 5000, "2, 3: sockets on one instance and on the bare gorilla server")
	fs.IntVar(&cfg.fanoutEvents, "fanout-events", 20, "2: events measured on each side, after one warm-up")
	fs.IntVar(&cfg.racePackages, "race-packages", 20000, "4: packages the agents drain")
	fs.IntVar(&cfg.raceAgents, "race-agents", 200, "4: agents racing")
	fs.DurationVar(&cfg.raceLimit, "race-limit", 4*time.Minute, "4: agents start no new cycle after this long (the run stays bounded; the report says so)")
	fs.DurationVar(&cfg.webhookWatch, "webhook-watch", 10*time.Second, "4: how long to watch the webhook deliverers work off the race's backlog, with no agents")
	fs.StringVar(&cfg.raceVia, "race-via", "http", "4: how agents act: http (POST next/accept/resolve) or actions (actions.Service in-process)")
	fs.IntVar(&cfg.pagePackages, "page-packages", 10000, "5: open packages in the queue")
	fs.IntVar(&cfg.pageRequests, "page-requests", 200, "5: requests per loop")
	fs.IntVar(&cfg.pageConcurrency, "page-concurrency", 4, "5: concurrent requests")
	fs.IntVar(&cfg.floodPackages, "flood-packages", 20000, "6: packages in the queue the flood searches and the other agent pages")
	fs.IntVar(&cfg.floodSearchers, "flood-searchers", 16, "6: searches the flooding agent keeps in flight")
	fs.IntVar(&cfg.floodRequests, "flood-requests", 300, "6: the other agent's page GETs, one at a time, quiet and flooded")
	fs.DurationVar(&cfg.floodLimit, "flood-limit", time.Minute, "6: the flood stops after this long (the run stays bounded)")
	fs.DurationVar(&cfg.collectTimeout, "collect-timeout", 15*time.Second, "1, 2: how long to wait for every socket to receive a card")
	fs.BoolVar(&cfg.playAutovacuum, "play-autovacuum", true, "on a PostgreSQL without autovacuum, vacuum and analyze each table past autovacuum's thresholds every minute, as it would")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the bench database at exit, for inspection (the report says how to connect)")
	quick := loadtest.AddQuick(fs, "shrink every size for a smoke run (explicit flags still win)", quickSizes())
	if err := quick.Parse(args); err != nil {
		return config{}, "", err
	}
	if cfg.scenarios, err = loadtest.ParseScenarios(*scenarios, 6); err != nil {
		return config{}, "", err
	}
	if cfg.raceVia != "http" && cfg.raceVia != "actions" {
		return config{}, "", fmt.Errorf("-race-via: %q is not http or actions", cfg.raceVia)
	}
	for name, v := range map[string]int{"server-conns": cfg.serverConns, "runs": cfg.runs, "users": cfg.users,
		"latency-sockets": cfg.latencySockets, "latency-packages": cfg.latencyPackages, "fanout-sockets": cfg.fanoutSockets,
		"fanout-events": cfg.fanoutEvents, "race-packages": cfg.racePackages, "race-agents": cfg.raceAgents,
		"page-packages": cfg.pagePackages, "page-requests": cfg.pageRequests, "page-concurrency": cfg.pageConcurrency,
		"flood-packages": cfg.floodPackages, "flood-searchers": cfg.floodSearchers, "flood-requests": cfg.floodRequests} {
		if v <= 0 {
			return config{}, "", fmt.Errorf("-%s must be positive", name)
		}
	}
	if cfg.latencyRate <= 0 || cfg.collectTimeout <= 0 || cfg.raceLimit <= 0 || cfg.webhookWatch <= 0 || cfg.floodLimit <= 0 {
		return config{}, "", errors.New("-latency-rate, -collect-timeout, -race-limit, -webhook-watch and -flood-limit must be positive")
	}
	if cfg.raceAgents > cfg.users {
		return config{}, "", fmt.Errorf("-race-agents %d needs as many -users (%d)", cfg.raceAgents, cfg.users)
	}
	return cfg, quick.CommandLine(), nil
}
