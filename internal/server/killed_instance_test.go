package server_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/instance"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// childInstanceEnv, set to a database URL, makes this test binary a desk instance over that
// database instead of running tests, so that a test can kill an instance with SIGKILL: what an
// in-process instance cannot show, since its goroutines, connections and deferred clean-ups go
// on with the test.
const childInstanceEnv = "DESK_TEST_CHILD_INSTANCE"

func TestMain(m *testing.M) {
	if dbURL := os.Getenv(childInstanceEnv); dbURL != "" {
		if err := runChildInstance(dbURL); err != nil {
			fmt.Fprintf(os.Stderr, "child instance: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	chromium.close()
	os.Exit(code)
}

// runChildInstance serves a desk instance on a free loopback port, whose URL it prints first,
// until it is killed.
func runChildInstance(dbURL string) error {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	url := "http://" + ln.Addr().String()
	fmt.Println(url)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts := instance.Options{Server: server.Config{Addr: ln.Addr().String(), BaseURL: url}, DatabaseURL: dbURL,
		SweepInterval: 200 * time.Millisecond, Webhook: webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond}}
	return instance.Run(ctx, opts, logger, db, ln)
}

// killable starts one more instance on the app's database in a child process, and returns it
// and a kill -9 of it, which waits until the process is gone.
func (a *testApp) killable(t *testing.T) (*testApp, func()) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe) //nolint:gosec // G204: this test binary, as the child instance.
	cmd.Env = append(os.Environ(), childInstanceEnv+"="+a.DBURL)
	cmd.Stderr = os.Stderr
	// Should the test binary die first, the kernel kills the child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	kill := func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
		}
	}
	t.Cleanup(kill)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("the child instance's address: %v", err)
	}
	child := *a
	child.URL = strings.TrimSpace(line)
	waitReady(t, child.URL)
	return &child, kill
}

// The agents whose only sockets are on an instance killed with kill -9 stop being rung within the
// instance's lease, not after their presence goes stale or their ring's minute-long window: the
// package that rang one of them rings the next agent, the package that rang the other, who was
// the last one left, tells its bot agent_gone, and a package sent after the death rings nobody on
// the dead instance.
func TestKilledInstanceRingsNoMore(t *testing.T) {
	t.Parallel()
	app := setupHooks(t, server.Config{}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	ctx := t.Context()
	alex := app.user(t, "alex@example.com", auth.RoleAgent, "billing_t2")
	bea := app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	if _, err := app.Queues.Create(ctx, queue.New{Name: "billing_t2_disputes", Parent: "billing_t2"}); err != nil {
		t.Fatal(err)
	}
	cy := app.user(t, "cy@example.com", auth.RoleAgent, "billing_t2_disputes")
	for _, q := range []string{"billing_t2", "billing_t2_disputes"} {
		app.setWarm(t, q, time.Minute, 2*time.Minute)
	}
	key, ear := app.warmBot(t, "billing_t2", "billing_t2_disputes")

	doomed, kill := app.killable(t)
	ac, bc, cc := app.client(t), app.client(t), app.client(t)
	app.login(t, ac, "alex@example.com")
	app.login(t, bc, "bea@example.com")
	app.login(t, cc, "cy@example.com")
	doomed.dialed(t, ac, "")
	doomed.dialed(t, cc, "")
	beaConn, _ := app.dialed(t, bc, "")
	app.waitOnline(t, alex, bea, cy)

	first, p := warmPackageFor(t, "billing_t2")
	if ans := app.submit(t, key, p); ans.Status != http.StatusCreated || ans.Body["offered_to"] != "alex" {
		t.Fatalf("first package: %d %s, want it to ring alex", ans.Status, ans.Raw)
	}
	second, p := warmPackageFor(t, "billing_t2_disputes")
	if ans := app.submit(t, key, p); ans.Status != http.StatusCreated || ans.Body["offered_to"] != "cy" {
		t.Fatalf("second package: %d %s, want it to ring cy", ans.Status, ans.Raw)
	}

	kill()
	killed := time.Now()
	if html := readUntil(t, beaConn, "ring"); !strings.Contains(html, `data-handoff="`+first+`"`) {
		t.Fatalf("bea's ring frame %s, want %s", html, first)
	}
	t.Logf("bea rang %s after the kill", time.Since(killed).Round(time.Millisecond))
	ear.warmEnd(t, app, second, "warm_timeout:agent_gone")
	formOK(t, bc, app.URL+"/handoffs/"+first+"/accept", nil)
	ear.warmEnd(t, app, first, "accepted")

	for _, u := range []auth.User{alex, cy} {
		var outcome string
		if err := app.DB.QueryRow(ctx, `SELECT outcome FROM offers WHERE user_id = $1`, u.ID).Scan(&outcome); err != nil || outcome != "withdrawn" {
			t.Errorf("%s's ring ended %q, %v; want withdrawn, long before its window", u.DisplayName, outcome, err)
		}
	}
	// Once the dead instance's lease is reaped, its rows go with it.
	waitFor(t, "the dead instance's presence rows to go", func() bool {
		var n int
		_ = app.DB.QueryRow(ctx, `SELECT count(*) FROM presence WHERE user_id = ANY($1)`, []int64{alex.ID, cy.ID}).Scan(&n)
		return n == 0
	})
	third, p := warmPackageFor(t, "billing_t2_disputes")
	if ans := app.submit(t, key, p); ans.Status != http.StatusCreated || ans.Body["offered_to"] != nil {
		t.Fatalf("a package after the death: %d %s, want it to ring nobody", ans.Status, ans.Raw)
	}
	ear.warmEnd(t, app, third, "warm_timeout:no_agent_online")
}
