package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// env builds a getenv over a fresh database.
func env(t *testing.T, extra ...string) func(string) string {
	vars := map[string]string{"DATABASE_URL": pgtest.URL(t), "ADDR": "127.0.0.1:0", "DRAIN_PERIOD": "0s"}
	for i := 0; i+1 < len(extra); i += 2 {
		vars[extra[i]] = extra[i+1]
	}
	return func(k string) string { return vars[k] }
}

func runCommand(t *testing.T, getenv func(string) string, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	err := run(context.Background(), append([]string{"web"}, args...), getenv, &out)
	return out.String(), err
}

func TestCommandsSucceed(t *testing.T) {
	t.Parallel()
	getenv := env(t)
	steps := []struct {
		args []string
		want string
	}{
		{[]string{"migrate"}, ""},
		{[]string{"queue", "add", "--name", "billing_t2", "--ttl", "12h", "--reservation-timeout", "90s", "--refund-threshold", "75.50"}, "queue billing_t2 added (ttl 12h0m0s, reservation timeout 1m30s, refund threshold 75.5000 USD, approval timeout 4h0m0s, accept window 20s, warm wait 1m0s, away after 2 missed rings)"},
		{[]string{"queue", "add", "--name", "billing_escalations", "--parent", "billing_t2"}, "queue billing_escalations added"},
		{[]string{"queue", "add", "--name", "tech_t2", "--accepts-top-level-transfers"}, "queue tech_t2 added (ttl 24h0m0s, reservation timeout 2m0s, refund threshold 50.0000 USD, approval timeout 4h0m0s, accept window 20s, warm wait 1m0s, away after 2 missed rings, accepts top-level transfers)"},
		{[]string{"queue", "add", "--name", "warm_t2", "--accept-window", "15s", "--warm-wait", "90s", "--missed-rings", "3"}, "accept window 15s, warm wait 1m30s, away after 3 missed rings)"},
		{[]string{"user", "add", "--email", "dana@example.com", "--name", "Dana", "--role", "agent", "--password", "long-enough", "--queues", "billing_t2,billing_escalations"}, "user dana@example.com (agent) added"},
		{[]string{"apikey", "add", "--name", "tier1", "--queues", "billing_t2", "--webhook-url", "https://bot.example.com/hooks"}, "key:            hdk_"},
		{[]string{"user", "role", "--email", "dana@example.com", "--role", "supervisor"}, "user dana@example.com is supervisor (was agent)"},
		{[]string{"queue", "remove-member", "--name", "billing_escalations", "--email", "dana@example.com"}, "dana@example.com no longer works billing_escalations"},
		{[]string{"user", "disable", "--email", "dana@example.com"}, "user dana@example.com disabled"},
		{[]string{"user", "enable", "--email", "DANA@example.com"}, "user dana@example.com enabled"},
		{[]string{"user", "disable", "--email", "dana@example.com"}, "user dana@example.com disabled"},
		{[]string{"seed-demo"}, "agent@example.com"},
		{[]string{"seed-demo"}, "Demo bot key"}, // a second seed finds everything in place
		{[]string{"help"}, "usage: web"},
	}
	for _, s := range steps {
		out, err := runCommand(t, getenv, s.args...)
		if err != nil {
			t.Fatalf("web %s: %v\n%s", strings.Join(s.args, " "), err, out)
		}
		if !strings.Contains(out, s.want) {
			t.Errorf("web %s printed %q, want it to contain %q", strings.Join(s.args, " "), out, s.want)
		}
	}
	// The demo's replies are there once, however often it is seeded: an edited draft, one sent as
	// is, one written from scratch, each package resolved. (The history beside them has its own
	// test, TestSeedDemoGivesTheDashboardAHistory.)
	db, err := pgx.Connect(context.Background(), getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	var replies, asIs, scratch, resolves int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE kind = 'reply'),
		count(*) FILTER (WHERE accepted_as_is), count(*) FILTER (WHERE draft = ''), count(*) FILTER (WHERE kind = 'resolve')
		FROM evals e JOIN handoffs h ON h.id = e.handoff_id WHERE h.handoff_id LIKE 'ho\_demo\_reply\_%'`).Scan(&replies, &asIs, &scratch, &resolves); err != nil {
		t.Fatal(err)
	}
	if replies != 3 || asIs != 1 || scratch != 1 || resolves != 3 {
		t.Errorf("seeded %d replies (%d as is, %d from scratch) and %d resolves; want 3 (1, 1) and 3", replies, asIs, scratch, resolves)
	}
	// And a package over billing_t2's refund threshold waits in the queue, another on /approvals.
	var queued, pending int
	if err := db.QueryRow(context.Background(), `SELECT
		count(*) FILTER (WHERE status = 'queued' AND (package->'refund'->>'amount')::numeric > 50),
		(SELECT count(*) FROM approvals WHERE state = 'pending')
		FROM handoffs`).Scan(&queued, &pending); err != nil {
		t.Fatal(err)
	}
	if queued != 1 || pending != 1 {
		t.Errorf("seeded %d queued packages over the threshold and %d pending approvals; want 1 and 1", queued, pending)
	}
}

func TestCommandsRejectBadInput(t *testing.T) {
	t.Parallel()
	getenv := env(t)
	if _, err := runCommand(t, getenv, "queue", "add", "--name", "billing_t2"); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"user"}, `want "user add"`},
		{[]string{"user", "add", "--bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"user", "add", "--email", "a@example.com", "--name", "A", "--role", "agent"}, "--password is required"},
		{[]string{"user", "add", "--email", "a@example.com", "--name", "A", "--role", "king", "--password", "long-enough"}, `role "king" is not one of`},
		{[]string{"user", "add", "--email", "not-an-email", "--name", "A", "--role", "agent", "--password", "long-enough"}, "is not a valid address"},
		{[]string{"user", "add", "--email", "a@example.com", "--name", "A", "--role", "agent", "--password", "short"}, "at least 8 characters"},
		{[]string{"user", "add", "--email", "a@example.com", "--name", "A", "--role", "agent", "--password", "long-enough", "--queues", "nope"}, `queue "nope" does not exist`},
		{[]string{"queue", "add"}, "--name is required"},
		{[]string{"queue", "add", "--name", "Bad Name"}, "must be 1-63 of a-z"},
		{[]string{"queue", "add", "--name", "billing_t2"}, `queue "billing_t2" already exists`},
		{[]string{"queue", "add", "--name", "x", "--ttl", "soon"}, `invalid value "soon" for flag -ttl`},
		{[]string{"queue", "add", "--name", "x", "--parent", "nope"}, `parent queue "nope" does not exist`},
		{[]string{"queue", "add", "--name", "x", "--refund-threshold", "-5"}, "is not a decimal amount"},
		{[]string{"queue", "add", "--name", "x", "--accept-window", "500ms"}, "accept window 500ms is shorter than a second"},
		{[]string{"queue", "add", "--name", "x", "--warm-wait", "-1s"}, "warm wait -1s is shorter than a second"},
		{[]string{"queue", "add", "--name", "x", "--missed-rings", "-1"}, "missed rings -1 is not a whole number from 1 to 10000"},
		{[]string{"queue", "add", "--name", "x", "--parent", "billing_t2", "--accepts-top-level-transfers"}, "is not top-level"},
		{[]string{"apikey", "add", "--name", "k"}, "--queues is required"},
		{[]string{"apikey", "add", "--name", "k", "--queues", "billing_t2", "--webhook-url", "ftp://x"}, "must be an absolute https URL"},
		{[]string{"migrate", "extra"}, `unexpected argument "extra"`},
		{[]string{"user", "remove"}, `want "user add", "user disable", "user enable", "user role" or "user sso-only"`},
		{[]string{"user", "disable"}, "--email is required"},
		{[]string{"user", "disable", "--email", "nobody@example.com"}, "no enabled user has email nobody@example.com"},
		{[]string{"user", "enable", "--email", "nobody@example.com"}, "no user has email nobody@example.com"},
		{[]string{"user", "role", "--email", "nobody@example.com", "--role", "emperor"}, `role "emperor" is not one of`},
		{[]string{"queue", "remove-member", "--name", "billing_t2"}, "--email is required"},
		{[]string{"queue", "remove-member", "--name", "nope", "--email", "a@example.com"}, `queue "nope" does not exist`},
	}
	for _, c := range cases {
		_, err := runCommand(t, getenv, c.args...)
		if err == nil {
			t.Errorf("web %s succeeded, want an error containing %q", strings.Join(c.args, " "), c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("web %s: error %q, want one line containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	if _, err := runCommand(t, getenv, "user", "add", "--email", "A@example.com", "--name", "A", "--role", "agent", "--password", "long-enough"); err != nil {
		t.Fatal(err)
	}
	if _, err := runCommand(t, getenv, "user", "add", "--email", "a@EXAMPLE.com", "--name", "A", "--role", "agent", "--password", "long-enough"); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("same email in another case: %v, want already exists", err)
	}
	if _, err := runCommand(t, getenv, "queue", "remove-member", "--name", "billing_t2", "--email", "a@example.com"); err == nil || err.Error() != "queue remove-member: a@example.com does not work billing_t2" { // stored as auth.NormalizeEmail writes it
		t.Errorf("removing a member who is not one: %v, want an error saying so", err)
	}
}

func TestServeRefusesUnreachableDatabase(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string {
		return map[string]string{"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"}[k]
	}
	_, err := runCommand(t, getenv, "serve")
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("serve on a dead database: %v, want an error naming it", err)
	}
}

func TestServeRejectsBadDurations(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"REQUEST_TIMEOUT", "DRAIN_PERIOD", "DATABASE_ACQUIRE_TIMEOUT"} {
		for _, value := range []string{"soon", "-1s"} {
			getenv := func(k string) string {
				return map[string]string{name: value, "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"}[k]
			}
			if _, err := runCommand(t, getenv, "serve"); err == nil || !strings.HasPrefix(err.Error(), name+": ") {
				t.Errorf("serve with %s=%s: %v, want an error naming %s", name, value, err, name)
			}
		}
	}
}

func TestServeRejectsABadHSTSPreload(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string {
		return map[string]string{"HSTS_PRELOAD": "sometimes", "DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"}[k]
	}
	if _, err := runCommand(t, getenv, "serve"); err == nil || !strings.HasPrefix(err.Error(), "HSTS_PRELOAD: ") {
		t.Errorf("serve with HSTS_PRELOAD=sometimes: %v, want an error naming HSTS_PRELOAD", err)
	}
}

// syncBuffer lets a test read what a running server writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var listenLine = regexp.MustCompile(`msg=listening addr=(\S+)`)

// startServe runs `web serve` until the test ends and returns its base URL.
// The returned function stops it and returns what run returned.
func startServe(t *testing.T, getenv func(string) string) (string, func() error) {
	t.Helper()
	return startServeTo(t, getenv, &syncBuffer{})
}

// startServeTo is startServe that logs to out, with serve's flags.
func startServeTo(t *testing.T, getenv func(string) string, out *syncBuffer, flags ...string) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var runErr error
	go func() {
		runErr = run(ctx, append([]string{"web", "serve"}, flags...), getenv, out)
		close(done)
	}()
	stop := func() error {
		cancel()
		<-done
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if m := listenLine.FindStringSubmatch(out.String()); m != nil {
			return "http://" + m[1], stop
		}
		select {
		case <-done:
			t.Fatalf("serve stopped: %v\n%s", runErr, out)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("serve did not start:\n%s", out)
	return "", nil
}

func TestServeLoginAndShutdown(t *testing.T) {
	t.Parallel()
	getenv := env(t)
	if out, err := runCommand(t, getenv, "seed-demo"); err != nil {
		t.Fatalf("seed-demo: %v\n%s", err, out)
	}
	base, stop := startServe(t, getenv)

	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ready"} {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want) {
			t.Errorf("GET %s = %d %q, want 200 %q", path, resp.StatusCode, body, want)
		}
	}

	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	resp, err := client.PostForm(base+"/login", url.Values{"email": {"agent@example.com"}, "password": {"handoff-demo"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), `data-testid="my-queues"`) || !strings.Contains(string(page), "billing_t2") {
		t.Fatalf("after login: %d\n%s", resp.StatusCode, page)
	}

	// A request in flight when the stop signal arrives still gets its answer: this login form
	// takes 300ms to upload, and the stop comes after 100ms.
	slow, err := http.NewRequest(http.MethodPost, base+"/login", &slowBody{body: "email=agent%40example.com&password=wrong-password"})
	if err != nil {
		t.Fatal(err)
	}
	slow.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	conn := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(slow)
		if err != nil {
			t.Errorf("in-flight request: %v", err)
		}
		conn <- resp
	}()
	time.Sleep(100 * time.Millisecond)
	if err := stop(); err != nil {
		t.Fatalf("serve returned %v after shutdown, want nil", err)
	}
	if resp := <-conn; resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("in-flight request was not answered: %v", resp)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("server still answers after shutdown")
	}
}

// slowBody is a request body that takes 300ms to arrive, keeping a request in flight.
type slowBody struct {
	body string
	sent bool
}

func (b *slowBody) Read(p []byte) (int, error) {
	if b.sent {
		return 0, io.EOF
	}
	time.Sleep(300 * time.Millisecond)
	b.sent = true
	return copy(p, b.body), nil
}
