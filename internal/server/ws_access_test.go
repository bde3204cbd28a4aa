package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/auth"
)

// closeAccessChanged is the code the desk closes a socket with when its user's access changed.
const closeAccessChanged = 4001

// expectClosed reads past any frames until the socket closes, and fails unless it closes with
// code.
func expectClosed(t *testing.T, conn *websocket.Conn, code int, what string) {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		_, _, err := conn.ReadMessage()
		if err == nil {
			continue
		}
		if !websocket.IsCloseError(err, code) {
			t.Fatalf("%s: the socket ended with %v, want close %d", what, err, code)
		}
		return
	}
}

// twoInstances starts a second instance on app's database and returns it: a user logs in on one
// and has their socket on the other, as behind a load balancer.
func twoInstances(t *testing.T, app *testApp) *testApp {
	t.Helper()
	other := *app
	other.URL, _ = app.start(t)
	return &other
}

// dialed opens a socket, fails the test if it is refused, and reads the hello.
func (a *testApp) dialed(t *testing.T, c *http.Client, query string) (*websocket.Conn, wsFrame) {
	t.Helper()
	conn, resp, err := a.dial(t, c, query, "")
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", query, err, resp)
	}
	hello := readFrame(t, conn)
	if hello.Type != "hello" {
		t.Fatalf("first frame %+v, want hello", hello)
	}
	return conn, hello
}

// refused dials a socket that the desk must refuse, asking for errors as JSON, and returns the
// status and the error's text.
func (a *testApp) refused(t *testing.T, c *http.Client, query string) (int, string) {
	t.Helper()
	u, _ := url.Parse(a.URL)
	header := http.Header{"Origin": {a.URL}, "Accept": {"application/json"}}
	for _, ck := range c.Jar.Cookies(u) {
		header.Add("Cookie", ck.Name+"="+ck.Value)
	}
	conn, resp, err := websocket.DefaultDialer.Dial("ws://"+u.Host+"/ws?"+query, header)
	if err == nil {
		conn.Close()
		t.Fatalf("dial %.80s: upgraded, want a refusal", query)
	}
	if resp == nil {
		t.Fatalf("dial %.80s: %v, want an HTTP refusal", query, err)
	}
	defer resp.Body.Close()
	var body struct {
		Error string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("dial %.80s: %d with a body that is not an error: %v", query, resp.StatusCode, err)
	}
	return resp.StatusCode, body.Error
}

func TestLogoutClosesTheUsersSocketsOnEveryInstance(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "lee@example.com", auth.RoleAgent, "billing_t2")
	other := twoInstances(t, app)
	dana, lee := app.client(t), app.client(t)
	app.login(t, dana, "dana@example.com")
	app.login(t, lee, "lee@example.com")
	conn, _ := other.dialed(t, dana, "queues=billing_t2")
	bystander, _ := other.dialed(t, lee, "queues=billing_t2")

	resp, err := dana.PostForm(app.URL+"/logout", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	expectClosed(t, conn, closeAccessChanged, "dana's socket on the other instance after she logged out")

	// Someone else's socket goes on following the queue.
	pkg := harbor(t, nil)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	readUntil(t, bystander, "card-"+pkg["handoff_id"].(string))
}

// A session runs out with no event to say so: its socket closes when it does, as for a logout,
// rather than following the queue for as long as the page stays open.
func TestSocketClosesWhenItsSessionRunsOut(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	c := app.client(t)
	app.login(t, c, "dana@example.com")
	if _, err := app.DB.Exec(context.Background(), `UPDATE sessions SET expires_at = now() + interval '1 second'`); err != nil {
		t.Fatal(err)
	}
	conn, _ := app.dialed(t, c, "queues=billing_t2")
	expectClosed(t, conn, closeAccessChanged, "a socket whose session ran out")
}

func TestDisablingClosesSocketsAndEndsSessionsAtOnce(t *testing.T) {
	t.Parallel()
	app := setup(t)
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	other := twoInstances(t, app)
	c := app.client(t)
	app.login(t, c, "dana@example.com")
	conn, _ := other.dialed(t, c, "queues=billing_t2")
	// The other instance has verified and cached dana's session with her socket.
	if resp, _ := get(t, c, other.URL+"/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET / on the other instance = %d, want 200", resp.StatusCode)
	}

	if err := access.New(app.DB, app.Auth).Disable(context.Background(), dana.ID, 0); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, conn, closeAccessChanged, "a disabled user's socket")
	// By the time her socket closed, the instance forgot her cached session: the very next request
	// is refused, not served from the cache.
	if resp, _ := get(t, c, other.URL+"/"); resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Errorf("a disabled user's next request on the other instance = %d to %q, want 303 to the login page",
			resp.StatusCode, resp.Header.Get("Location"))
	}
	if _, resp, err := other.dial(t, c, "queues=billing_t2", ""); err == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		t.Error("a disabled user opened a socket")
	}
}

func TestDemotionClosesTheSocketAndTheReconnectIsMasked(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	sam := app.user(t, "sam@example.com", auth.RoleSupervisor, "billing_t2")
	other := twoInstances(t, app)
	c := app.client(t)
	app.login(t, c, "sam@example.com")
	conn, hello := other.dialed(t, c, "queues=billing_t2")

	first := harbor(t, nil)
	expect(t, "submit", app.submit(t, key, first), http.StatusCreated)
	if card := readUntil(t, conn, "card-"+first["handoff_id"].(string)); !strings.Contains(card, "Dana Whitfield") {
		t.Fatalf("the supervisor's card lacks the contact's name:\n%s", card)
	}

	if err := access.New(app.DB, app.Auth).SetRole(context.Background(), sam.ID, auth.RoleAgent, 0); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, conn, closeAccessChanged, "a demoted supervisor's socket")

	// Catching up from a mark before the demotion would bring a page rendered for the supervisor
	// up to date: the browser is told to reload it instead.
	stale, _ := other.dialed(t, c, "queues=billing_t2&since="+hello.Mark)
	expectClosed(t, stale, closeAccessChanged, "a catch-up across the demotion")

	again, _ := other.dialed(t, c, "queues=billing_t2")
	second := harbor(t, func(p map[string]any) { p["contact"].(map[string]any)["id"] = "cust_2" })
	expect(t, "submit", app.submit(t, key, second), http.StatusCreated)
	card := readUntil(t, again, "card-"+second["handoff_id"].(string))
	if strings.Contains(card, "Whitfield") || !strings.Contains(card, "D. W.") {
		t.Errorf("after the demotion the card shows the contact as a supervisor sees them:\n%s", card)
	}
}

// TestSocketOpensWithTheRoleTheDatabaseHasNow opens a socket while the instance still caches the
// user's old role, as between a role change's commit and the instance reading it from the log:
// the socket is rendered for the role the database has.
func TestSocketOpensWithTheRoleTheDatabaseHasNow(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	sam := app.user(t, "sam@example.com", auth.RoleSupervisor, "billing_t2")
	c := app.client(t)
	app.login(t, c, "sam@example.com")
	if _, page := get(t, c, app.URL+"/"); !strings.Contains(page, "supervisor") {
		t.Fatalf("sam's page before the change does not say supervisor:\n%s", page)
	}
	// Written behind the desk's back, so that no instance hears of it.
	if _, err := app.DB.Exec(context.Background(), `UPDATE users SET role = 'agent' WHERE id = $1`, sam.ID); err != nil {
		t.Fatal(err)
	}
	conn, _ := app.dialed(t, c, "queues=billing_t2")
	pkg := harbor(t, nil)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	if card := readUntil(t, conn, "card-"+pkg["handoff_id"].(string)); strings.Contains(card, "Whitfield") {
		t.Errorf("a socket opened after the demotion shows the contact as a supervisor sees them:\n%s", card)
	}
}

func TestMembershipRemovalStopsTheQueuesFrames(t *testing.T) {
	t.Parallel()
	app := setup(t)
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2", "tech_t2")
	other := twoInstances(t, app)
	c := app.client(t)
	app.login(t, c, "dana@example.com")
	conn, _ := other.dialed(t, c, "queues=billing_t2")

	q, err := app.Queues.ByName(context.Background(), "billing_t2")
	if err != nil {
		t.Fatal(err)
	}
	people := access.New(app.DB, app.Auth)
	if err := people.RemoveMember(context.Background(), dana.ID, q, 0); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, conn, closeAccessChanged, "the socket of a queue its user no longer works")
	if code, body := other.refused(t, c, "queues=billing_t2"); code != http.StatusNotFound || !strings.Contains(body, `queue "billing_t2" does not exist, or you do not work it`) {
		t.Errorf("watching the queue again: %d %s, want the 404 of a missing queue", code, body)
	}
	other.dialed(t, c, "queues=tech_t2") // the queue she still works
	if err := people.RemoveMember(context.Background(), dana.ID, q, 0); err == nil || !strings.Contains(err.Error(), "does not work") {
		t.Errorf("removing a membership that is gone: %v, want an error saying so", err)
	}
}

func TestSocketsPerUserAreCappedPerInstance(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "lee@example.com", auth.RoleAgent, "billing_t2")
	dana, lee := app.client(t), app.client(t)
	app.login(t, dana, "dana@example.com")
	app.login(t, lee, "lee@example.com")
	var open []*websocket.Conn
	for range 20 {
		conn, _ := app.dialed(t, dana, "queues=billing_t2")
		open = append(open, conn)
	}
	code, body := app.refused(t, dana, "queues=billing_t2")
	if code != http.StatusTooManyRequests || !strings.Contains(body, "20 live connections") {
		t.Fatalf("dana's 21st socket: %d %s, want 429 naming the cap", code, body)
	}
	app.dialed(t, lee, "queues=billing_t2")                   // the cap is dana's, not everyone's
	twoInstances(t, app).dialed(t, dana, "queues=billing_t2") // and this instance's

	// A socket that closes gives its place back.
	open[0].Close()
	for attempt := 0; ; attempt++ {
		conn, resp, err := app.dial(t, dana, "queues=billing_t2", "")
		if err == nil {
			conn.Close()
			break
		}
		if resp == nil || resp.StatusCode != http.StatusTooManyRequests || attempt == 100 {
			t.Fatalf("after a socket closed, another: %v, want it opened", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSocketRefusesTooManyQueueNames(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2", "tech_t2")
	c := app.client(t)
	app.login(t, c, "dana@example.com")

	// Fifty thousand names, none of which exists: refused for their number, before any is looked up.
	names := make([]string, 50000)
	for i := range names {
		names[i] = "q" + strconv.Itoa(i)
	}
	code, body := app.refused(t, c, "queues="+strings.Join(names, ","))
	if code != http.StatusBadRequest || !strings.Contains(body, "at most 100 queues") || !strings.Contains(body, "asks for 50000") {
		t.Fatalf("50,000 queue names: %d %.300s, want 400 naming the cap", code, body)
	}
	// At the cap, names are looked up and checked as ever.
	within := make([]string, 100)
	for i := range within {
		within[i] = []string{"billing_t2", "tech_t2"}[i%2]
	}
	app.dialed(t, c, "queues="+strings.Join(within, ","))
	within[99] = "nowhere"
	if code, body := app.refused(t, c, "queues="+strings.Join(within, ",")); code != http.StatusNotFound || !strings.Contains(body, `queue "nowhere" does not exist`) {
		t.Errorf("an unknown name among 100: %d %s, want 404 naming it", code, body)
	}
}

// TestBrowserLeavesAPageWhoseAccessEnded has a queue page open in Chromium when its user logs out
// in another tab: the page reloads, which lands it on the login page.
func TestBrowserLeavesAPageWhoseAccessEnded(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	other := twoInstances(t, app)
	ctx := browser(t)
	browserLogin(t, ctx, other.URL, "dana@example.com")
	openQueue(t, ctx, other.URL, "billing_t2")

	// Logging out is a form POST from another tab of the same browser, on the first instance.
	tab, cancel := chromedp.NewContext(ctx)
	defer cancel()
	if err := chromedp.Do(tab, chromedp.Navigate(app.URL+"/login"),
		chromedp.Evaluate[chromedp.Void](`fetch("/logout", {method: "POST"})`)); err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(ctx, waitDeadline)
	defer stop()
	if err := chromedp.Do(wait, chromedp.WaitVisible(`[data-testid="login-form"]`)); err != nil {
		t.Fatalf("the queue page never left for the login page: %v", err)
	}
}

// A page that was offline while its session ended is refused when it reconnects. A browser cannot
// read why an upgrade failed, so the page asks for itself, is sent to login, and follows.
func TestBrowserOfflineWhenItsSessionEndedGoesToLogin(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")
	// Keeps the page's sockets within reach, to cut them as a network would.
	if err := chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, target *chromedp.Target) error {
		_, err := cdp.Call(ctx, target, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `(() => {
				const Native = window.WebSocket;
				window.sockets = [];
				window.WebSocket = function (url) { const s = new Native(url); window.sockets.push(s); return s; };
				window.WebSocket.prototype = Native.prototype;
			})()`,
		})
		return err
	})); err != nil {
		t.Fatal(err)
	}
	openQueue(t, ctx, app.URL, "billing_t2")

	// The session ends with no event to say so while the page is cut off.
	if _, err := app.DB.Exec(context.Background(), `DELETE FROM sessions`); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.sockets.forEach(s => s.close())`)); err != nil {
		t.Fatal(err)
	}
	wait, stop := context.WithTimeout(ctx, waitDeadline)
	defer stop()
	if err := chromedp.Do(wait, chromedp.WaitVisible(`[data-testid="login-form"]`)); err != nil {
		t.Fatalf("the offline page never left for the login page: %v", err)
	}
}
