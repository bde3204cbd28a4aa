package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/auth"
)

type wsFrame struct {
	Type      string `json:"type"`
	Mark      string `json:"mark"`
	Fragments []struct {
		Target, Op, List, Sort, HTML string
	} `json:"fragments"`
	Urgent []string `json:"urgent"`
}

// dial opens the desk's websocket as a logged-in client would, from the desk's own origin
// unless told otherwise.
func (a *testApp) dial(t *testing.T, c *http.Client, query, origin string) (*websocket.Conn, *http.Response, error) {
	t.Helper()
	u, _ := url.Parse(a.URL)
	header := http.Header{}
	if origin == "" {
		origin = a.URL
	}
	header.Set("Origin", origin)
	for _, ck := range c.Jar.Cookies(u) {
		header.Add("Cookie", ck.Name+"="+ck.Value)
	}
	conn, resp, err := websocket.DefaultDialer.Dial("ws://"+u.Host+"/ws?"+query, header)
	if err == nil {
		t.Cleanup(func() { conn.Close() })
	}
	return conn, resp, err
}

func readFrame(t *testing.T, conn *websocket.Conn) wsFrame {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var f wsFrame
	if err := conn.ReadJSON(&f); err != nil {
		t.Fatalf("read frame: %v", err)
	}
	return f
}

// readUntil reads frames until one has a fragment for target.
func readUntil(t *testing.T, conn *websocket.Conn, target string) string {
	t.Helper()
	for range 50 {
		for _, fr := range readFrame(t, conn).Fragments {
			if fr.Target == target {
				return fr.HTML
			}
		}
	}
	t.Fatalf("no fragment for %s", target)
	return ""
}

func TestSocketRefusesOtherOrigins(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	c := app.client(t)
	app.login(t, c, "dana@example.com")
	if _, resp, err := app.dial(t, c, "queues=billing_t2", "https://evil.example"); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("upgrade from another origin: %v %v, want 403", err, resp)
	}
	if _, resp, err := app.dial(t, app.client(t), "queues=billing_t2", ""); err == nil || resp.StatusCode == http.StatusSwitchingProtocols {
		t.Fatal("upgrade without a session succeeded")
	}
	app.user(t, "stranger@example.com", auth.RoleAgent, "tech_t2")
	s := app.client(t)
	app.login(t, s, "stranger@example.com")
	if _, resp, err := app.dial(t, s, "queues=billing_t2", ""); err == nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a non-member watching the queue: %v, want the 404 of a missing queue", err)
	}
}

func TestSocketCatchesUpAndMasksPerReceiver(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	agent, sup := app.client(t), app.client(t)
	app.login(t, agent, "dana@example.com")
	app.login(t, sup, "sam@example.com")

	conn, _, err := app.dial(t, agent, "queues=billing_t2", "")
	if err != nil {
		t.Fatal(err)
	}
	hello := readFrame(t, conn)
	if hello.Type != "hello" || hello.Mark == "" {
		t.Fatalf("first frame %+v, want hello with a mark", hello)
	}
	conn.Close() // the agent goes offline...

	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	expect(t, "submit while offline", app.submit(t, key, pkg), http.StatusCreated)

	// ...and comes back with the mark it had: the missed package arrives in the catch-up.
	again, _, err := app.dial(t, agent, "queues=billing_t2&since="+hello.Mark, "")
	if err != nil {
		t.Fatal(err)
	}
	agentCard := readUntil(t, again, "card-"+id)
	supConn, _, err := app.dial(t, sup, "queues=billing_t2&since="+hello.Mark, "")
	if err != nil {
		t.Fatal(err)
	}
	supCard := readUntil(t, supConn, "card-"+id)
	if strings.Contains(agentCard, "Whitfield") || !strings.Contains(agentCard, "D. W.") {
		t.Errorf("the agent's frame carries the customer's name:\n%s", agentCard)
	}
	if !strings.Contains(supCard, "Dana Whitfield") {
		t.Errorf("the supervisor's frame lacks the name they may see:\n%s", supCard)
	}
	if _, resp, err := app.dial(t, agent, "queues=billing_t2&since=not-a-mark", ""); err == nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a bad mark: %v, want 400", err)
	}
}

func TestRosterShowsPresenceLive(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	agent, sup := app.client(t), app.client(t)
	app.login(t, agent, "dana@example.com")
	app.login(t, sup, "sam@example.com")
	if _, resp, err := app.dial(t, agent, "roster=true", ""); err == nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("an agent asking for the roster: %v, want 403", err)
	}
	_, page := get(t, sup, app.URL+"/dashboard")
	if !strings.Contains(page, `data-agent="dana" data-status="offline"`) {
		t.Fatalf("dashboard before the agent connects:\n%s", page)
	}
	roster, _, err := app.dial(t, sup, "roster=true", "")
	if err != nil {
		t.Fatal(err)
	}
	readFrame(t, roster) // hello
	agentConn, _, err := app.dial(t, agent, "queues=billing_t2", "")
	if err != nil {
		t.Fatal(err)
	}
	waitStatus := func(want string) {
		t.Helper()
		for range 50 {
			for _, f := range readFrame(t, roster).Fragments {
				if f.Target == "roster" && strings.Contains(f.HTML, `data-agent="dana" data-status="`+want+`"`) {
					return
				}
			}
		}
		t.Fatalf("the roster never showed dana %s", want)
	}
	waitStatus("available")
	if status, _, body := postForm(t, agent, app.URL+"/me/status", url.Values{"status": {"break"}}); status != http.StatusSeeOther {
		t.Fatalf("choosing a break: %d %s", status, body)
	}
	waitStatus("break")
	agentConn.Close()
	waitStatus("offline")

}

func TestSocketSaysGoingAwayOnShutdown(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	c := app.client(t)
	app.login(t, c, "dana@example.com")
	other := *app
	var stop func()
	other.URL, stop = app.start(t)
	conn, _, err := other.dial(t, c, "queues=billing_t2", "")
	if err != nil {
		t.Fatal(err)
	}
	readFrame(t, conn) // hello
	stop()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = conn.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("after the server stopped: %v, want close 1001 (going away)", err)
	}
}
