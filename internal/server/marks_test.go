package server_test

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/server"
)

// setupOn is setup over a database of the caller's, such as one on a private cluster.
func setupOn(t *testing.T, dbURL string) *testApp {
	t.Helper()
	app := &testApp{DBURL: dbURL}
	app.DB = openPool(t, dbURL)
	app.Auth, app.Queues = auth.NewService(app.DB), queue.NewService(app.DB)
	app.URL, _ = app.start(t)
	return app
}

// nextOf reads frames until one of type typ, failing on a frame of type not first.
func nextOf(t *testing.T, conn *websocket.Conn, typ, not string) wsFrame {
	t.Helper()
	for range 50 {
		f := readFrame(t, conn)
		if f.Type == typ {
			return f
		}
		if f.Type == not {
			t.Fatalf("a %s frame %+v before the %s frame", not, f, typ)
		}
	}
	t.Fatalf("no %s frame", typ)
	return wsFrame{}
}

// untilCard reads frames until one carries the card of the package id, and returns it: its mark
// is past the package's events.
func untilCard(t *testing.T, conn *websocket.Conn, id string) wsFrame {
	t.Helper()
	for range 50 {
		f := readFrame(t, conn)
		if f.Type == "reload" {
			t.Fatalf("a reload frame while waiting for card-%s", id)
		}
		for _, fr := range f.Fragments {
			if fr.Target == "card-"+id {
				return f
			}
		}
	}
	t.Fatalf("no frame with card-%s", id)
	return wsFrame{}
}

// commitEvents commits n events of the queue in one transaction, past the hub's notice: the hub
// reads them at its next look.
func commitEvents(t *testing.T, app *testApp, queueName string, n int) {
	t.Helper()
	q, err := app.Queues.ByName(context.Background(), queueName)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.DB.Exec(context.Background(),
		`INSERT INTO events (kind, queue_id) SELECT 'reserved', $1 FROM generate_series(1, $2)`, q.ID, n); err != nil {
		t.Fatal(err)
	}
}

// A browser that comes back is caught up on what it missed only from a mark this database handed
// out, and while that is within the catch-up window; otherwise it is told to reload, rather than
// replayed the whole history (since=0) or more than a page load costs. Garbage is a 400 that says
// what was wrong.
func TestSocketReloadsWhatItCannotCatchUp(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	agent := app.client(t)
	app.login(t, agent, "dana@example.com")
	open, _, err := app.dial(t, agent, "queues=billing_t2", "")
	if err != nil {
		t.Fatal(err)
	}
	hello := readFrame(t, open)
	incarnation, _, _ := strings.Cut(hello.Mark, ":")

	reloads := func(what, since string) {
		t.Helper()
		conn, _, err := app.dial(t, agent, "queues=billing_t2&since="+url.QueryEscape(since), "")
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if f := readFrame(t, conn); f.Type != "hello" {
			t.Fatalf("%s: first frame %+v, want hello", what, f)
		}
		if f := readFrame(t, conn); f.Type != "reload" || f.Mark == "" {
			t.Fatalf("%s: %+v, want a reload frame with the current mark", what, f)
		}
	}
	reloads("since=0, the whole history", "0")
	reloads("a mark in the format before incarnations", "741")
	reloads("a mark this database never handed out", incarnation+":18446744073709551615")
	reloads("a mark of another incarnation", "0f3a9c1d2e4b5a6c:741")

	for _, garbage := range []string{"not-a-mark", "abc:def", "0f3a:741:1", "18446744073709551616"} {
		if _, resp, err := app.dial(t, agent, "queues=billing_t2&since="+url.QueryEscape(garbage), ""); err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("since=%s: %v, want 400", garbage, err)
		}
		// The same request without the upgrade, for the whole answer.
		resp, body := get(t, agent, app.URL+"/ws?queues=billing_t2&since="+url.QueryEscape(garbage))
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "since") {
			t.Errorf("since=%s: %d, want a 400 that names since:\n%s", garbage, resp.StatusCode, body)
		}
	}

	// More events than the window while the browser was away: the hub has read them all once the
	// open socket shows a package submitted after them.
	commitEvents(t, app, "billing_t2", server.CatchUpWindow+1)
	pkg := harbor(t, nil)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	untilCard(t, open, pkg["handoff_id"].(string))
	reloads("a mark more events ago than the window", hello.Mark)
}

// A mark tells a browser where to catch up from only within one life of the database. After a
// crash the database hands out again the xids of transactions that never reached the disk, so
// events committed after the restart can lie below a mark handed out before it: an open page
// is told to reload, as is a browser that comes back with such a mark, while a mark of the
// database as it runs now is caught up from.
func TestSocketReloadsAfterTheDatabaseRestarts(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	app := setupOn(t, cluster.URL(t))
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	agent := app.client(t)
	app.login(t, agent, "dana@example.com")
	open, _, err := app.dial(t, agent, "queues=billing_t2", "")
	if err != nil {
		t.Fatal(err)
	}
	readFrame(t, open) // hello
	// Cold: a warm package would ring dana in a batch of its own after the card's, and the
	// restart could cut that batch's render short (a 1011 rather than the reload this is about).
	first := harbor(t, func(p map[string]any) { p["transfer_mode"] = "cold" })
	expect(t, "submit before the restart", app.submit(t, key, first), http.StatusCreated)
	before := untilCard(t, open, first["handoff_id"].(string)).Mark

	cluster.Stop("immediate")
	cluster.Start()
	reload := nextOf(t, open, "reload", "")
	if reload.Mark == before || reload.Mark == "" {
		t.Fatalf("the reload frame carries mark %q; want the restarted database's, not %q", reload.Mark, before)
	}

	again, _, err := app.dial(t, agent, "queues=billing_t2&since="+url.QueryEscape(before), "")
	if err != nil {
		t.Fatal(err)
	}
	readFrame(t, again) // hello
	if f := readFrame(t, again); f.Type != "reload" {
		t.Fatalf("coming back with the mark from before the restart: %+v, want a reload frame", f)
	}

	fresh, _, err := app.dial(t, agent, "queues=billing_t2", "")
	if err != nil {
		t.Fatal(err)
	}
	now := readFrame(t, fresh).Mark
	fresh.Close()
	second := harbor(t, func(p map[string]any) { p["contact"].(map[string]any)["id"] = "cust_2" })
	expect(t, "submit after the restart", app.submit(t, key, second), http.StatusCreated)
	back, _, err := app.dial(t, agent, "queues=billing_t2&since="+url.QueryEscape(now), "")
	if err != nil {
		t.Fatal(err)
	}
	untilCard(t, back, second["handoff_id"].(string))
}

// The browser loads a page afresh when told to reload, so that it shows the desk as it is; but not
// over what the agent is typing: then the banner offers the reload.
func TestBrowserReloadsAPageItCannotCatchUp(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	base, stop := app.serve(t, ln)
	ctx := browser(t)
	browserLogin(t, ctx, base, "dana@example.com")
	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)

	// The instance goes away while more happens than a catch-up replays, and comes back where
	// the browser looks for it.
	restart := func() {
		t.Helper()
		stop()
		if err := chromedp.Do(ctx, chromedp.WaitVisible(`[data-testid="offline"]`)); err != nil {
			t.Fatalf("no offline banner after the server stopped: %v", err)
		}
		commitEvents(t, app, "billing_t2", server.CatchUpWindow+1)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_, stop = app.serve(t, ln)
	}

	openQueue(t, ctx, base, "billing_t2")
	restart()
	// The reload may navigate while a poll runs, which ends that poll: poll again.
	for attempt := 0; ; attempt++ {
		err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](`window.sameDocument === undefined && document.body.dataset.live === "online"`, pollEvery))
		if err == nil {
			break
		}
		if attempt == 3 || ctx.Err() != nil {
			t.Fatalf("the queue page was not loaded afresh: %v", err)
		}
	}

	note := `[data-testid="resolve-form"] input[name="note"]`
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/handoffs/"+id),
		chromedp.Click(`[data-testid="accept"]`),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
		inMenu("resolve"),
		chromedp.WaitVisible(note),
		chromedp.WaitReady(`body[data-live="online"]`),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`),
		chromedp.SendKeys(note, "refund sent"),
	); err != nil {
		t.Fatalf("accept and start a resolution note: %v", err)
	}
	restart()
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`[data-testid="offline"][data-stale="true"]`)); err != nil {
		t.Fatalf("no out-of-date banner: %v", err)
	}
	kept, err := chromedp.Run(ctx, chromedp.Evaluate[bool](
		`window.sameDocument === true && document.querySelector('`+note+`').value === "refund sent"`))
	if err != nil || !kept {
		t.Fatalf("the page was reloaded over the agent's input (%v)", err)
	}
}
