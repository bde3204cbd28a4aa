package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/server"
)

func get(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func TestLoginLogout(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	c := app.client(t)

	resp, _ := get(t, c, app.URL+"/")
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login?next=%2F" {
		t.Fatalf("anonymous GET / = %d to %q, want 303 to the login page", resp.StatusCode, resp.Header.Get("Location"))
	}

	resp, err := c.PostForm(app.URL+"/login", url.Values{"email": {"dana@example.com"}, "password": {"wrong-password"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(string(body), "email or password is wrong") {
		t.Fatalf("wrong password = %d, want 401 naming the problem\n%s", resp.StatusCode, body)
	}

	resp, err = c.PostForm(app.URL+"/login", url.Values{"email": {"DANA@example.com"}, "password": {testPassword}, "next": {"//evil.example/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/" {
		t.Fatalf("login = %d to %q, want 303 to / (never off-site)", resp.StatusCode, resp.Header.Get("Location"))
	}
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "desk_session" {
			session = ck
		}
	}
	if session == nil || !session.HttpOnly || !session.Secure || session.SameSite != http.SameSiteLaxMode {
		t.Fatalf("session cookie %+v, want HttpOnly, Secure, SameSite=Lax", session)
	}

	resp, body2 := get(t, c, app.URL+"/")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body2, `data-queue="billing_t2"`) {
		t.Fatalf("GET / after login = %d\n%s", resp.StatusCode, body2)
	}

	resp, err = c.PostForm(app.URL+"/logout", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	// The old token is dead in the database, not just dropped from this browser.
	replay := app.client(t)
	req, _ := http.NewRequest(http.MethodGet, app.URL+"/", nil)
	req.AddCookie(&http.Cookie{Name: "desk_session", Value: session.Value}) //nolint:gosec // G124: a request's Cookie header carries only name and value; the flags are the server's to set.
	resp, err = replay.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("replayed session after logout = %d, want 303 to login", resp.StatusCode)
	}
}

func TestCrossSiteRequestsRefused(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	c := app.client(t)
	app.login(t, c, "dana@example.com")

	for _, h := range []map[string]string{
		{"Sec-Fetch-Site": "cross-site"},
		{"Origin": "https://evil.example"},
	} {
		req, _ := http.NewRequest(http.MethodPost, app.URL+"/logout", nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "cross-site request refused") {
			t.Errorf("POST /logout with %v = %d, want 403 naming the reason", h, resp.StatusCode)
		}
	}
	// The session survived the forged logouts.
	if resp, _ := get(t, c, app.URL+"/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / = %d, want 200: a forged request must not log the user out", resp.StatusCode)
	}
}

func TestQueuesShownByRole(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "agent@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "other@example.com", auth.RoleAgent, "tech_t2")
	app.user(t, "sup@example.com", auth.RoleSupervisor)

	agent := app.client(t)
	app.login(t, agent, "agent@example.com")
	_, page := get(t, agent, app.URL+"/")
	if !strings.Contains(page, `data-queue="billing_t2"`) || strings.Contains(page, `data-queue="tech_t2"`) {
		t.Errorf("agent sees other queues or misses their own:\n%s", page)
	}
	sup := app.client(t)
	app.login(t, sup, "sup@example.com")
	_, page = get(t, sup, app.URL+"/")
	if !strings.Contains(page, `data-queue="billing_t2"`) || !strings.Contains(page, `data-queue="tech_t2"`) || !strings.Contains(page, "not a member") {
		t.Errorf("supervisor should oversee every queue:\n%s", page)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	app := setup(t)
	c := app.client(t)
	if resp, body := get(t, c, app.URL+"/healthz"); resp.StatusCode != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q", resp.StatusCode, body)
	}
	// The instance's own background work may hold the pool's connections at that moment: ready
	// either way, saying so.
	if resp, body := get(t, c, app.URL+"/readyz"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "ready") {
		t.Errorf("/readyz = %d %q", resp.StatusCode, body)
	}
	// A migration's or a maintenance job's lock on the migrations' table does not hold readiness:
	// the instance saw every migration in place, and they stay (migrations only go forward).
	tx, err := app.DB.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `LOCK TABLE goose_db_version IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	if resp, body := get(t, c, app.URL+"/readyz"); resp.StatusCode != http.StatusOK || !strings.HasPrefix(body, "ready") {
		t.Errorf("/readyz with the migrations' table locked = %d %q, want 200", resp.StatusCode, body)
	}
	if err := tx.Rollback(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A new instance (a new release's binary) whose migration the database lacks is not ready.
	if _, err := app.DB.Exec(t.Context(), `DELETE FROM goose_db_version WHERE version_id = (SELECT max(version_id) FROM goose_db_version)`); err != nil {
		t.Fatal(err)
	}
	fresh, _ := app.start(t)
	if resp, body := get(t, c, fresh+"/readyz"); resp.StatusCode != http.StatusServiceUnavailable || body != "migrations pending\n" {
		t.Errorf("/readyz of an instance started with a migration missing = %d %q, want 503", resp.StatusCode, body)
	}
	if resp, body := get(t, c, app.URL+"/no/such/page"); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "no such page") {
		t.Errorf("unknown page = %d", resp.StatusCode)
	}
}

func TestBrowserLogsInAndSeesMyQueues(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2", "tech_t2")
	ctx := browser(t)

	err := chromedp.Do(ctx,
		chromedp.Navigate(app.URL+"/"),
		chromedp.WaitVisible(`[data-testid="login-form"]`),
		chromedp.SendKeys(`input[name="email"]`, "dana@example.com"),
		chromedp.SendKeys(`input[name="password"]`, testPassword),
		chromedp.Submit(`[data-testid="login-form"]`),
		chromedp.WaitVisible(`[data-testid="my-queues"]`),
	)
	if err != nil {
		t.Fatal(err)
	}
	viewer, err := chromedp.Run(ctx, chromedp.Text(`[data-testid="viewer"]`))
	if err != nil {
		t.Fatal(err)
	}
	queues, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="queue-row"]')].map(r => r.dataset.queue)`))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(viewer, "dana") || strings.Join(queues, ",") != "billing_t2,tech_t2" {
		t.Fatalf("viewer %q queues %v, want dana with billing_t2,tech_t2", viewer, queues)
	}
}

func TestSidebarFramableOnlyByConfiguredOrigins(t *testing.T) {
	t.Parallel()
	app := setup(t, "https://crm.example.com")
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	pkg := harbor(t, nil)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	c := app.client(t)
	resp, err := c.PostForm(app.URL+"/login", url.Values{"email": {"dana@example.com"}, "password": {testPassword}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var session *http.Cookie
	for _, ck := range resp.Cookies() {
		if ck.Name == "desk_session" {
			session = ck
		}
	}
	if session == nil || session.SameSite != http.SameSiteNoneMode || !session.Secure || !session.Partitioned {
		t.Fatalf("embedded desk session cookie %+v, want SameSite=None; Secure; Partitioned", session)
	}
	for path, want := range map[string]string{
		"/sidebar/" + pkg["handoff_id"].(string): "frame-ancestors https://crm.example.com;",
		"/":                                      "frame-ancestors 'none'",
		"/handoffs/" + pkg["handoff_id"].(string): "frame-ancestors 'none'",
	} {
		resp, body := get(t, c, app.URL+path)
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, want) {
			t.Errorf("%s: CSP %q, want %q", path, csp, want)
		}
		if resp.Header.Get("X-Frame-Options") != "" {
			t.Errorf("%s sets X-Frame-Options, which would override frame-ancestors", path)
		}
		if strings.HasPrefix(path, "/sidebar/") && (!strings.Contains(body, `data-testid="handoff"`) || strings.Contains(body, `data-testid="viewer"`)) {
			t.Errorf("sidebar should show the package without the desk's navigation")
		}
	}
	// The login page inside the CRM's frame may be framed by it, and signs in through a popup: no
	// password form in the frame. At the top level it may not be framed.
	for dest, want := range map[string]string{"iframe": "frame-ancestors https://crm.example.com;", "document": "frame-ancestors 'none'"} {
		req, err := http.NewRequest(http.MethodGet, app.URL+"/login?next=%2Fmine", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Sec-Fetch-Dest", dest)
		resp, err := app.client(t).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, want) {
			t.Errorf("/login as %s: CSP %q, want %q", dest, csp, want)
		}
		framed := dest == "iframe"
		if hasPassword := strings.Contains(string(body), `type="password"`); hasPassword == framed {
			t.Errorf("/login as %s: a password form %v, want %v", dest, hasPassword, !framed)
		}
		if framed && !strings.Contains(string(body), `href="/login?next=%2Fmine&amp;popup=1"`) {
			t.Errorf("/login in a frame does not offer the popup's sign-in:\n%s", body)
		}
	}
}

func TestLoginThrottledAfterRepeatedFailures(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	c := app.client(t)
	attempt := func(password string) (*http.Response, string) {
		t.Helper()
		resp, err := c.PostForm(app.URL+"/login", url.Values{"email": {"Dana@example.com"}, "password": {password}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, string(body)
	}
	for i := range 10 {
		if resp, _ := attempt("guess-" + strconv.Itoa(i)); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i, resp.StatusCode)
		}
	}
	resp, body := attempt(testPassword)
	if resp.StatusCode != http.StatusTooManyRequests || !strings.Contains(body, "too many failed logins") || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("the right password after 10 failures: %d, want 429 naming the reason", resp.StatusCode)
	}
	// Another account is not affected.
	app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	app.login(t, app.client(t), "bea@example.com")
}

// TestLoginRedirectStaysOnSite asks a logged-in GET /login to send the browser on to each known
// open-redirect bypass: it must answer 303 to a path on this site.
func TestLoginRedirectStaysOnSite(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	c := app.client(t)
	app.login(t, c, "dana@example.com")
	for query, want := range map[string]string{
		"next=%2F%09%2F127.0.0.1%3A18998%2Fx":                   "/", // the report's "/\t/127.0.0.1:18998/x"
		"next=" + url.QueryEscape("/\\evil.example"):            "/",
		"next=" + url.QueryEscape("\\/evil.example"):            "/",
		"next=" + url.QueryEscape("//evil.example"):             "/",
		"next=" + url.QueryEscape("/\r\n/evil.example"):         "/",
		"next=" + url.QueryEscape("/%2F%2Fevil.example"):        "/",
		"next=" + url.QueryEscape("https://evil.example"):       "/",
		"next=" + url.QueryEscape("javascript:alert(1)"):        "/",
		"next=" + url.QueryEscape("/queues/billing_t2?after=5"): "/queues/billing_t2?after=5",
	} {
		resp, _ := get(t, c, app.URL+"/login?"+query)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != want {
			t.Errorf("GET /login?%s = %d to %q, want 303 to %q", query, resp.StatusCode, resp.Header.Get("Location"), want)
		}
	}
}

// TestBrowserLoginRedirectStaysOnSite repeats the report in Chromium: logged in, it opens
// /login?next=… with paths that a browser reads as another server, which is running, and must
// still be on the desk afterwards.
func TestBrowserLoginRedirectStaysOnSite(t *testing.T) {
	t.Parallel()
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "evil") }))
	t.Cleanup(evil.Close)
	evilHost := strings.TrimPrefix(evil.URL, "http://")
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")
	desk, _ := url.Parse(app.URL)
	for _, next := range []string{"/\t/" + evilHost + "/x", "/\\" + evilHost + "/x", "/\t\\" + evilHost + "/x"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+"/login?next="+url.QueryEscape(next))); err != nil {
			t.Fatal(err)
		}
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		if u, err := url.Parse(loc); err != nil || u.Host != desk.Host {
			t.Errorf("next=%q took the browser to %s, want a page of %s", next, loc, desk.Host)
		}
	}
}

// postLogin posts the login form with extra headers and answers the status, Retry-After and body.
func postLogin(t *testing.T, c *http.Client, base, email, password string, header map[string]string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/login", strings.NewReader(url.Values{"email": {email}, "password": {password}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), string(body)
}

// TestParallelWrongPasswordsAnswer429 is the report's race: many wrong passwords for one email
// from one client at once. At most the limit may be checked and answered 401; every other one is
// 429 with a Retry-After.
func TestParallelWrongPasswordsAnswer429(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	c := app.client(t)
	const attempts, limit = 40, 10
	type answer struct {
		status           int
		retryAfter, body string
	}
	answers := make([]answer, attempts)
	var wg sync.WaitGroup
	for i := range attempts {
		wg.Go(func() {
			status, retryAfter, body := postLogin(t, c, app.URL, "dana@example.com", "guess-"+strconv.Itoa(i), nil)
			answers[i] = answer{status, retryAfter, body}
		})
	}
	wg.Wait()
	var unauthorized, limited int
	for _, a := range answers {
		switch {
		case a.status == http.StatusUnauthorized:
			unauthorized++
		case a.status == http.StatusTooManyRequests && a.retryAfter != "" && strings.Contains(a.body, "too many failed logins"):
			limited++
		default:
			t.Errorf("answer %d (Retry-After %q), want 401, or 429 with a Retry-After naming the reason", a.status, a.retryAfter)
		}
	}
	if unauthorized > limit || unauthorized+limited != attempts {
		t.Fatalf("%d answered 401 and %d answered 429 of %d parallel wrong passwords, want at most %d 401s and the rest 429",
			unauthorized, limited, attempts, limit)
	}
}

// TestClientAddressFromTrustedProxiesOnly looks at the address a failed login is counted under:
// X-Forwarded-For is believed only from a configured proxy, and loopback or private peers are
// not proxies unless listed.
func TestClientAddressFromTrustedProxiesOnly(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		trusted []string
		header  map[string]string
		want    string
	}{
		{"no proxies: a spoofed XFF", nil, map[string]string{"X-Forwarded-For": "6.6.6.6"}, "127.0.0.1"},
		{"no proxies: a spoofed X-Real-IP", nil, map[string]string{"X-Real-IP": "6.6.6.6"}, "127.0.0.1"},
		{"an untrusted loopback peer", []string{"10.0.0.0/8"}, map[string]string{"X-Forwarded-For": "6.6.6.6"}, "127.0.0.1"},
		{"a trusted peer", []string{"127.0.0.1/32"}, map[string]string{"X-Forwarded-For": "6.6.6.6"}, "6.6.6.6"},
		{"a trusted peer under a client's own XFF", []string{"127.0.0.1/32"}, map[string]string{"X-Forwarded-For": "1.1.1.1, 6.6.6.6"}, "6.6.6.6"},
		{"a chain of trusted proxies", []string{"127.0.0.1/32", "10.0.0.0/8"}, map[string]string{"X-Forwarded-For": "1.1.1.1, 6.6.6.6, 10.1.2.3"}, "6.6.6.6"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var cfg server.Config
			for _, p := range tc.trusted {
				cfg.TrustedProxies = append(cfg.TrustedProxies, netip.MustParsePrefix(p))
			}
			app := setupWith(t, cfg)
			if status, _, _ := postLogin(t, app.client(t), app.URL, "nobody@example.com", "guess", tc.header); status != http.StatusUnauthorized {
				t.Fatalf("login = %d, want 401", status)
			}
			var got string
			if err := app.DB.QueryRow(t.Context(), `SELECT address FROM login_failures WHERE email = 'nobody@example.com'`).Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("the failure was counted for %s, want %s", got, tc.want)
			}
		})
	}
}

// TestFailuresFromOneAddressDoNotLockOthersOut: behind a trusted proxy, a stranger's wrong
// passwords for an email throttle the stranger, not the email's owner at another address.
// Without a trusted proxy, changing X-Forwarded-For does not escape the throttle.
func TestFailuresFromOneAddressDoNotLockOthersOut(t *testing.T) {
	t.Parallel()
	app := setupWith(t, server.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	c := app.client(t)
	stranger := map[string]string{"X-Forwarded-For": "6.6.6.6"}
	for i := range 10 {
		if status, _, _ := postLogin(t, c, app.URL, "dana@example.com", "guess-"+strconv.Itoa(i), stranger); status != http.StatusUnauthorized {
			t.Fatalf("the stranger's wrong password %d: %d, want 401", i, status)
		}
	}
	if status, retryAfter, _ := postLogin(t, c, app.URL, "dana@example.com", testPassword, stranger); status != http.StatusTooManyRequests || retryAfter == "" {
		t.Fatalf("the stranger after 10 failures: %d (Retry-After %q), want 429 with a Retry-After", status, retryAfter)
	}
	if status, _, _ := postLogin(t, app.client(t), app.URL, "dana@example.com", testPassword, map[string]string{"X-Forwarded-For": "7.7.7.7"}); status != http.StatusSeeOther {
		t.Fatalf("dana from her own address: %d, want 303: a stranger locked her out", status)
	}

	direct := setup(t)
	direct.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	for i := range 10 {
		spoof := map[string]string{"X-Forwarded-For": "6.6.6." + strconv.Itoa(i)}
		if status, _, _ := postLogin(t, c, direct.URL, "dana@example.com", "guess-"+strconv.Itoa(i), spoof); status != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d, want 401", i, status)
		}
	}
	if status, _, _ := postLogin(t, c, direct.URL, "dana@example.com", testPassword, map[string]string{"X-Forwarded-For": "7.7.7.7"}); status != http.StatusTooManyRequests {
		t.Fatalf("a fresh X-Forwarded-For from an untrusted peer: %d, want 429: it must not count as another address", status)
	}
}
