package server_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/instance"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/tracing"
	"github.com/handoffdesk/desk/internal/webhook"
)

// testApp is a desk instance served on 127.0.0.1 over its own fresh database, stopped with the
// test.
type testApp struct {
	URL    string
	DBURL  string
	DB     *pgxpool.Pool
	Auth   *auth.Service
	Queues *queue.Service
	// MetricsURL is the /metrics of the instance started last, on its own listener.
	MetricsURL string

	cfg server.Config // what every instance is started with, besides its address
	// hooks is how every instance delivers webhooks.
	hooks webhook.Options
	// traces, when set, traces every instance and its pool (tracing_test.go).
	traces *tracing.Tracing
}

const testPassword = "correct-horse"

func setup(t *testing.T, frameAncestors ...string) *testApp {
	t.Helper()
	return setupWith(t, server.Config{FrameAncestors: frameAncestors})
}

// setupWith is setup with more of the server's configuration; each instance fills in its own
// Addr and BaseURL.
func setupWith(t *testing.T, cfg server.Config) *testApp {
	t.Helper()
	return setupHooks(t, cfg, webhook.Options{})
}

// setupHooks is setupWith that delivers webhooks as hooks says: a test's receiver listens on
// 127.0.0.1, which only AllowPrivate lets webhooks reach.
func setupHooks(t *testing.T, cfg server.Config, hooks webhook.Options) *testApp {
	t.Helper()
	dbURL := pgtest.URL(t)
	app := &testApp{DBURL: dbURL, cfg: cfg, hooks: hooks}
	app.DB = openPool(t, dbURL)
	app.Auth, app.Queues = auth.NewService(app.DB), queue.NewService(app.DB)
	app.URL, _ = app.start(t)
	return app
}

func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// start runs one more desk instance on the app's database and returns its URL and a function
// that stops it (the test's end stops it too); several instances share the database as they
// would behind a load balancer.
func (a *testApp) start(t *testing.T) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return a.serve(t, ln)
}

// serve is start on a listener of the caller's: a test that restarts an instance on the address
// browsers know listens there again.
func (a *testApp) serve(t *testing.T, ln net.Listener) (string, func()) {
	t.Helper()
	url := "http://" + ln.Addr().String()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	var db *pgxpool.Pool
	if a.traces != nil {
		db = openTracedPool(t, a.DBURL, a.traces)
	} else {
		db = openPool(t, a.DBURL)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	cfg := a.cfg
	cfg.Addr = ln.Addr().String()
	if cfg.BaseURL == "" { // a test of what an https address changes names one
		cfg.BaseURL = url
	}
	metricsLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.MetricsURL = "http://" + metricsLn.Addr().String() + "/metrics"
	opts := instance.Options{Server: cfg, DatabaseURL: a.DBURL, SweepInterval: 200 * time.Millisecond, Webhook: a.hooks, Metrics: metricsLn,
		Tracing: a.traces}
	go func() { done <- instance.Run(ctx, opts, logger, db, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return url, stop
}

// user creates a user with testPassword who works the named queues (created if missing).
func (a *testApp) user(t *testing.T, email string, role auth.Role, queues ...string) auth.User {
	t.Helper()
	ctx := context.Background()
	for _, name := range queues {
		if _, err := a.Queues.ByName(ctx, name); err != nil {
			if _, err := a.Queues.Create(ctx, queue.New{Name: name}); err != nil {
				t.Fatal(err)
			}
		}
	}
	u, err := a.Auth.CreateUser(ctx, auth.NewUser{Email: email, DisplayName: strings.Split(email, "@")[0], Role: role, Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Queues.AddMembers(ctx, u.ID, queues); err != nil {
		t.Fatal(err)
	}
	return u
}

// client is an HTTP client that keeps cookies and does not follow redirects, so tests see them.
func (a *testApp) client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// login logs a client in and fails the test if the desk does not answer with a redirect, which
// it follows as a browser does: the page it leads to takes the notice that says they logged in,
// so that the client's next page is as any other visit's.
func (a *testApp) login(t *testing.T, c *http.Client, email string) {
	t.Helper()
	resp, err := c.PostForm(a.URL+"/login", url.Values{"email": {email}, "password": {testPassword}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login %s: status %d, want 303", email, resp.StatusCode)
	}
	next, err := c.Get(a.URL + resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	next.Body.Close()
}

// waitDeadline bounds every wait of a test for a condition: long, for a busy 2-core machine,
// since a passing test never waits it out; a test that runs past it reports what it last saw.
const waitDeadline = 90 * time.Second

// pollEvery is how every chromedp.Poll of a test asks: on a timer. Its default asks on each
// animation frame, which keeps the page drawing 60 frames a second for as long as the test waits.
var pollEvery = chromedp.WithPollingInterval(50 * time.Millisecond)

// browser opens a tab for one test in a browser context of its own (its own cookies, storage
// and cache, as a fresh profile has) of the package's one Chromium. Starting Chromium costs
// about 4.5 s of CPU, most of what a short browser test spends: paid once, not once per browser.
// A test that watches the whole browser (the popups it opens) takes ownBrowser.
func browser(t *testing.T) context.Context {
	t.Helper()
	shared, err := chromium.get()
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return openTab(t, shared, chromedp.WithNewBrowserContext())
}

// ownBrowser starts a Chromium for one test: what another test's tabs do cannot reach it.
func ownBrowser(t *testing.T) context.Context {
	t.Helper()
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromiumOptions(t.TempDir())...)
	t.Cleanup(cancelAlloc)
	return openTab(t, allocCtx)
}

// openTab opens a tab in parent's browser that the test's end closes. Every tab has the page
// focus, as the one window of a person's browser does, whichever tab Chromium last put in front.
func openTab(t *testing.T, parent context.Context, opts ...chromedp.ContextOption) context.Context {
	t.Helper()
	ctx, cancelTab := chromedp.NewContext(parent, opts...)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTimeout()
		cancelTab()
	})
	focused := chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetFocusEmulationEnabled, emulation.SetFocusEmulationEnabledParams{Enabled: true})
		return err
	})
	if err := chromedp.Do(ctx, focused); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return ctx
}

func chromiumOptions(userDataDir string) []chromedp.ExecAllocatorOption {
	return append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath("/usr/bin/chromium"),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(userDataDir),
	)
}

// chromium is the package's shared Chromium, started by the first test that asks for a browser
// and stopped by TestMain once every test is done.
var chromium sharedChromium

type sharedChromium struct {
	once sync.Once
	ctx  context.Context
	err  error
	stop func()
}

func (c *sharedChromium) get() (context.Context, error) {
	c.once.Do(func() {
		dir, err := os.MkdirTemp("", "desk-chromium-")
		if err != nil {
			c.err = err
			return
		}
		allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), chromiumOptions(dir)...)
		ctx, cancelBrowser := chromedp.NewContext(allocCtx)
		c.ctx, c.err = ctx, chromedp.Do(ctx)
		c.stop = func() {
			cancelBrowser()
			cancelAlloc()
			_ = os.RemoveAll(dir)
		}
	})
	return c.ctx, c.err
}

// close stops the shared Chromium if a test started it. TestMain calls it once every test is
// done, so no get runs beside it.
func (c *sharedChromium) close() {
	if c.stop != nil {
		c.stop()
	}
}
