package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/internal/postgres/cluster"
)

const (
	// appStartLimit bounds an instance's start: migrations, then /readyz answering 200.
	appStartLimit = 30 * time.Second
	// appStopGrace is how long a stopping instance may take to finish in-flight requests.
	appStopGrace = 30 * time.Second
	// password is every agent's; the agents exist only in the run's own cluster.
	password = "soak-password"
	// webPackage is the desk's binary, built when -web names none.
	webPackage = "github.com/handoffdesk/desk/cmd/web"
)

// soak is one run: its directory, its cluster, the web binary and what was started, to undo.
type soak struct {
	cfg     config
	out     io.Writer
	dir     string
	web     string
	pg      *postmaster
	example map[string]any // the example package, as JSON
	client  *http.Client
	cleanup loadtest.Cleanup
}

// scenario is one fault run: its title, and a function that runs it and returns its report.
type scenario struct {
	n     int
	title string
	run   func(s *soak, ctx context.Context) (*section, error)
}

var scenarios = []scenario{
	{1, "kill -9 PostgreSQL under intake", (*soak).pgKill},
	{2, "kill -9 an app instance under claims", (*soak).appKill},
	{3, "a slow webhook receiver beside a fast one", (*soak).slowHook},
	{4, "pool exhaustion", (*soak).poolExhaustion},
	{5, "warm transfers and approvals under kill -9", (*soak).warm},
}

// soakAll sets the run up, runs the scenarios asked for, and tears everything down, also when
// it fails or is interrupted. It returns each scenario's report; their failed invariants decide
// the exit status.
func soakAll(ctx context.Context, cfg config, out io.Writer) (sections []*section, err error) {
	s := &soak{cfg: cfg, out: out, client: newClient()}
	defer func() {
		err = errors.Join(err, s.cleanup.Run())
	}()
	raw, err := os.ReadFile(cfg.examplePath)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, &s.example); err != nil {
		return nil, fmt.Errorf("%s: %w", cfg.examplePath, err)
	}
	if s.dir, err = os.MkdirTemp("", "soak-"); err != nil {
		return nil, err
	}
	s.cleanup.Add(func() error {
		if cfg.keep {
			fmt.Fprintf(out, "kept %s (cluster in pgdata, logs beside it)\n", s.dir)
			return nil
		}
		return os.RemoveAll(s.dir)
	})
	if s.web, err = s.buildWeb(cfg.web); err != nil {
		return nil, err
	}
	t := time.Now()
	if s.pg, err = newPostmaster(ctx, s.dir); err != nil {
		return nil, err
	}
	// Registered first: a start that fails half-way may leave a postmaster running.
	s.cleanup.Add(func() error { return s.pg.stop() })
	if err := s.pg.start(ctx); err != nil {
		return nil, err
	}
	version, err := s.pg.describe(ctx)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "PostgreSQL: %s\n            private cluster on 127.0.0.1:%d in %s, ready in %s\n",
		version, s.pg.Port, s.dir, time.Since(t).Round(time.Millisecond))
	fmt.Fprintf(out, "web:        %s serve, pool_max_conns=%d, DRAIN_PERIOD=0s, WEBHOOK_ALLOW_PRIVATE=1\n", s.web, cfg.poolConns)

	for _, sc := range scenarios {
		if !cfg.runs(sc.n) {
			continue
		}
		fmt.Fprintf(out, "\n== %d. %s ==\n", sc.n, sc.title)
		t := time.Now()
		sec, err := sc.run(s, ctx)
		if err != nil {
			return nil, fmt.Errorf("scenario %d: %w", sc.n, err)
		}
		sec.n, sec.title, sec.took = sc.n, sc.title, time.Since(t)
		sec.print(out)
		sections = append(sections, sec)
	}
	fmt.Fprintf(out, "\nsummary (the exit status is 1 if an invariant FAILs; \"MISS\" marks an expectation not met, informational)\n")
	for _, sec := range sections {
		sec.summary(out)
	}
	return sections, nil
}

// buildWeb returns the web binary to run: the one given, or a fresh build of ./cmd/web.
func (s *soak) buildWeb(given string) (string, error) {
	if given != "" {
		if _, err := os.Stat(given); err != nil {
			return "", fmt.Errorf("-web: %w (make build writes bin/web)", err)
		}
		return filepath.Abs(given)
	}
	path := filepath.Join(s.dir, "web")
	// By its import path, which builds from any directory of the module (a test runs in cmd/soak).
	if _, err := runCommand("go build", "go", []string{"build", "-o", path, webPackage}, os.Environ(), nil); err != nil {
		return "", err
	}
	return path, nil
}

// webEnv is the environment of every web process: the tool's own, with the settings it chose
// written after it, where they win.
func (s *soak) webEnv(dbURL string, extra ...string) ([]string, error) {
	u, err := loadtest.PoolURL(dbURL, s.cfg.poolConns)
	if err != nil {
		return nil, err
	}
	// Receivers run on loopback, which the webhook target check refuses unless told otherwise.
	env := append(os.Environ(), "DATABASE_URL="+u.String(), "LOG_FORMAT=json", "DRAIN_PERIOD=0s", "WEBHOOK_ALLOW_PRIVATE=1")
	return append(env, extra...), nil
}

// cli runs a web command (migrate, queue add, user add, apikey add) on the database.
func (s *soak) cli(dbURL string, args ...string) (string, error) {
	env, err := s.webEnv(dbURL)
	if err != nil {
		return "", err
	}
	return runCommand("web "+strings.Join(args, " "), s.web, args, env, nil)
}

var keyLine = regexp.MustCompile(`key:\s+(hdk_\S+)`)

// apiKey creates a bot key for queue, with a webhook URL or none, and returns the key.
func (s *soak) apiKey(dbURL, name, queue, webhookURL string) (string, error) {
	args := []string{"apikey", "add", "--name", name, "--queues", queue}
	if webhookURL != "" {
		args = append(args, "--webhook-url", webhookURL)
	}
	out, err := s.cli(dbURL, args...)
	if err != nil {
		return "", err
	}
	m := keyLine.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("apikey add printed no key: %q", out)
	}
	return m[1], nil
}

// app is one `web serve` instance.
type app struct {
	name    string
	port    int
	base    string
	env     []string
	logPath string
	*proc
}

// startApp starts an instance on a free loopback port and waits until /readyz answers 200.
func (s *soak) startApp(ctx context.Context, name, dbURL string, extraEnv ...string) (*app, error) {
	port, err := cluster.FreePort()
	if err != nil {
		return nil, err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	env, err := s.webEnv(dbURL, append([]string{"ADDR=127.0.0.1:" + strconv.Itoa(port), "BASE_URL=" + base}, extraEnv...)...)
	if err != nil {
		return nil, err
	}
	a := &app{name: name, port: port, base: base, env: env, logPath: filepath.Join(s.dir, name+".log")}
	if _, err := s.restartApp(ctx, a); err != nil {
		return nil, err
	}
	return a, nil
}

// restartApp starts a's process (again, after a kill: same address, same log, appended) and
// returns how long it took to answer /readyz with 200.
func (s *soak) restartApp(ctx context.Context, a *app) (time.Duration, error) {
	t := time.Now()
	p, err := startProc(a.name, s.web, []string{"serve"}, a.env, a.logPath, nil)
	if err != nil {
		return 0, err
	}
	a.proc = p
	s.cleanup.Add(func() error { return p.stop(syscall.SIGTERM, appStopGrace) })
	deadline := t.Add(appStartLimit)
	for {
		if status, _, err := s.get(ctx, a.base+"/readyz"); err == nil && status == http.StatusOK {
			return time.Since(t), nil
		}
		if !p.running() {
			return 0, fmt.Errorf("%s exited (%v); the end of %s:\n%s", a.name, p.err, a.logPath, tail(a.logPath, 5))
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%s: /readyz did not answer 200 within %s; the end of %s:\n%s", a.name, appStartLimit, a.logPath, tail(a.logPath, 5))
		}
		if err := loadtest.Sleep(ctx, 20*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// newDatabase creates a scenario's database on the cluster, migrated as a deploy does, with one
// queue (flags: queue add's after the name), and opens a small pool of the tool's own on it, to
// check what it holds.
func (s *soak) newDatabase(ctx context.Context, name, queue string, flags ...string) (dbURL string, db *pgxpool.Pool, err error) {
	if dbURL, err = s.pg.createDatabase(ctx, name); err != nil {
		return "", nil, err
	}
	if _, err := s.cli(dbURL, "migrate"); err != nil {
		return "", nil, err
	}
	if _, err := s.cli(dbURL, append([]string{"queue", "add", "--name", queue}, flags...)...); err != nil {
		return "", nil, err
	}
	u, err := loadtest.PoolURL(dbURL, 2)
	if err != nil {
		return "", nil, err
	}
	db, err = pgxpool.New(ctx, u.String())
	return dbURL, db, err
}

// wrapUp ends a scenario's load: it stops the instances as a deployment does (SIGTERM), so that
// their logs are complete, compares what each intake's bots were told with what db holds, and
// reads the instances' logs.
func wrapUp(ctx context.Context, db *pgxpool.Pool, apps []*app, intakes ...*intake) ([]durability, logSummary, error) {
	var stopErrs []error
	paths := make([]string, len(apps))
	for i, a := range apps {
		stopErrs = append(stopErrs, a.stop(syscall.SIGTERM, appStopGrace))
		paths[i] = a.logPath
	}
	if err := errors.Join(stopErrs...); err != nil {
		return nil, logSummary{}, err
	}
	ds := make([]durability, len(intakes))
	for i, in := range intakes {
		var err error
		if ds[i], err = in.check(ctx, db); err != nil {
			return nil, logSummary{}, err
		}
	}
	logs, err := readLogs(paths...)
	return ds, logs, err
}

// newClient is the HTTP client of the bots and agents: enough idle connections for every
// concurrent client, and redirects returned rather than followed, since an action's 303 is its
// answer.
func newClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 256, IdleConnTimeout: 30 * time.Second},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
