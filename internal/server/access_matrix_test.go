package server_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/internal/metrics"
	"github.com/handoffdesk/desk/internal/server"
)

// The roles every route and subscription is tried as, in the order of a row's statuses.
const (
	anonymous = iota // no session, no key
	agentOut         // an agent who does not work the matrix's queue
	agentIn          // an agent who works it
	supervisor
	admin
	otherBot // the bearer key of a bot whose queue is another
	roles
)

var roleNames = [roles]string{"anonymous", "agent not in the queue", "agent in the queue", "supervisor", "admin", "bot of another queue"}

// byRole is the status each role gets, in the order above.
type byRole [roles]int

// Package states a row's request is made on: each request of a row with a state gets a package
// of its own in that state, so that one role's action does not change what the next one finds.
const (
	anyState = ""       // the shared package, queued; the request changes nothing
	queued   = "queued" // a fresh package, waiting in the queue
	held     = "held"   // a fresh package the agent in the queue accepted
)

// accessRow is one route and what each role gets from it. A route the desk registers without a
// row here fails the test: add the route's row with the statuses it must answer.
type accessRow struct {
	method, route string // as registered in echo, e.g. "POST /handoffs/:id/accept"
	state         string
	form          url.Values // a POST's form or, on the bot's API, its JSON body's fields
	query         string     // added to the path, e.g. "?contact_id=…"
	// body, if given, is the request's JSON body (the bot's API) rather than a form.
	body func(t *testing.T, queue string) any
	// ownSession makes the request with a session of its own: a logout must not end the session
	// the other rows use.
	ownSession bool
	want       byRole
}

// What redirecting to the login page, refusing and not finding look like.
const (
	login   = http.StatusSeeOther
	ok      = http.StatusOK
	denied  = http.StatusForbidden
	missing = http.StatusNotFound
	noKey   = http.StatusUnauthorized
	moved   = http.StatusSeeOther
)

func accessMatrix() []accessRow {
	return []accessRow{
		{method: "GET", route: "/healthz", want: byRole{ok, ok, ok, ok, ok, ok}},
		{method: "GET", route: "/readyz", want: byRole{ok, ok, ok, ok, ok, ok}},
		{method: "GET", route: "/static*", want: byRole{ok, ok, ok, ok, ok, ok}},
		{method: "GET", route: "/login", want: byRole{ok, moved, moved, moved, moved, ok}},
		{method: "POST", route: "/login", form: url.Values{"email": {"nobody@example.com"}, "password": {"wrong-horse"}},
			want: byRole{http.StatusUnauthorized, http.StatusUnauthorized, http.StatusUnauthorized, http.StatusUnauthorized, http.StatusUnauthorized, http.StatusUnauthorized}},
		{method: "POST", route: "/logout", ownSession: true, want: byRole{moved, moved, moved, moved, moved, moved}},

		{method: "GET", route: "/", want: byRole{login, ok, ok, ok, ok, login}},
		{method: "GET", route: "/queues/:name", want: byRole{login, denied, ok, ok, ok, login}},
		{method: "POST", route: "/queues/:name/next", state: queued, want: byRole{noKey, denied, moved, moved, moved, noKey}},
		{method: "GET", route: "/handoffs/:id", want: byRole{login, missing, ok, ok, ok, login}},
		{method: "GET", route: "/sidebar/:id", want: byRole{login, missing, ok, ok, ok, login}},
		{method: "POST", route: "/handoffs/:id/accept", state: queued, want: byRole{noKey, missing, moved, moved, moved, noKey}},
		// Supervisors may take a package out of an agent's hands; only its holder answers it.
		{method: "POST", route: "/handoffs/:id/reject", state: held, form: url.Values{"reason": {"not mine"}},
			want: byRole{noKey, missing, moved, moved, moved, noKey}},
		{method: "POST", route: "/handoffs/:id/return", state: held, form: url.Values{"reason": {"needs_more_info"}},
			want: byRole{noKey, missing, moved, moved, moved, noKey}},
		{method: "POST", route: "/handoffs/:id/transfer", state: held, form: url.Values{"queue": {"mx_other"}},
			want: byRole{noKey, missing, moved, moved, moved, noKey}},
		{method: "POST", route: "/handoffs/:id/resolve", state: held, form: url.Values{"code": {"solved"}},
			want: byRole{noKey, missing, moved, moved, moved, noKey}},
		{method: "POST", route: "/handoffs/:id/reply", state: held, form: url.Values{"text": {"We refunded the second charge."}},
			want: byRole{noKey, missing, moved, denied, denied, noKey}},
		{method: "GET", route: "/ws", want: byRole{login, http.StatusBadRequest, http.StatusBadRequest, http.StatusBadRequest, http.StatusBadRequest, login}},

		{method: "GET", route: "/dashboard", want: byRole{login, denied, denied, ok, ok, login}},
		{method: "GET", route: "/evals", want: byRole{login, denied, denied, ok, ok, login}},
		{method: "GET", route: "/evals/replies/:id", want: byRole{login, denied, denied, missing, missing, login}},
		{method: "GET", route: "/evals/export.jsonl", want: byRole{login, denied, denied, ok, ok, login}},
		{method: "GET", route: "/audit", want: byRole{login, denied, denied, ok, ok, login}},
		{method: "GET", route: "/audit/export.csv", want: byRole{login, denied, denied, ok, ok, login}},
		{method: "GET", route: "/audit/export.jsonl", want: byRole{login, denied, denied, ok, ok, login}},

		{method: "GET", route: "/api/v1/schema/handoff-v1.json", want: byRole{ok, ok, ok, ok, ok, ok}},
		{method: "GET", route: "/api/openapi.yaml", want: byRole{ok, ok, ok, ok, ok, ok}},
		{method: "POST", route: "/api/v1/handoffs", body: harborFor, want: byRole{noKey, noKey, noKey, noKey, noKey, denied}},
		{method: "GET", route: "/api/v1/handoffs", query: "?contact_id=cust_9912", want: byRole{noKey, noKey, noKey, noKey, noKey, ok}},
		{method: "GET", route: "/api/v1/handoffs/:id", want: byRole{noKey, noKey, noKey, noKey, noKey, missing}},
		{method: "POST", route: "/api/v1/handoffs/:id/cancel", state: queued, want: byRole{noKey, noKey, noKey, noKey, noKey, missing}},
		// SW4RM routes among the key's own queues: a to_agent naming another's is a field no route
		// matches (422), as for any queue the key does not have.
		{method: "POST", route: "/api/v1/sw4rm/handoff-requests", body: func(t *testing.T, q string) any {
			return sw4rmRequest(t, func(r map[string]any) { r["to_agent"] = q })
		}, want: byRole{noKey, noKey, noKey, noKey, noKey, http.StatusUnprocessableEntity}},

		// The console's wiring of rotation, SSO-only and the SSO settings: admins only. ":id" is
		// the matrix's package id, which names no key or user (404 once past the role check).
		{method: "POST", route: "/admin/keys/:id/rotate", form: url.Values{"overlap": {"1h"}},
			want: byRole{noKey, denied, denied, denied, missing, noKey}},
		{method: "POST", route: "/admin/users/:id/sso-only", form: url.Values{"sso_only": {"on"}},
			want: byRole{noKey, denied, denied, denied, missing, noKey}},
		{method: "GET", route: "/admin/settings", want: byRole{login, denied, denied, denied, ok, login}},
		{method: "POST", route: "/admin/settings", form: url.Values{"unknown_emails": {"refuse"}},
			want: byRole{noKey, denied, denied, denied, moved, noKey}},
	}
}

// wsRow is one websocket subscription and what each role gets: 101 when it opens.
type wsRow struct {
	query string // with {queue} and {id} for the matrix's queue and package
	want  byRole
}

func socketMatrix() []wsRow {
	const opens = http.StatusSwitchingProtocols
	return []wsRow{
		{query: "queues={queue}", want: byRole{noKey, denied, opens, opens, opens, noKey}},
		{query: "handoff={id}", want: byRole{noKey, missing, opens, opens, opens, noKey}},
		{query: "roster=true", want: byRole{noKey, denied, denied, opens, opens, noKey}},
		{query: "queues={queue}&handoff={id}&roster=true", want: byRole{noKey, denied, denied, opens, opens, noKey}},
	}
}

// Every route the desk registers, and every websocket subscription, answers each role as the
// table says; a route without a row fails.
func TestAccessMatrix(t *testing.T) {
	t.Parallel()
	app := setup(t)
	const q = "mx"
	key := app.botKey(t, "mx_bot", q)
	otherKey := app.botKey(t, "other_bot", "mx_other")
	emails := [roles]string{agentOut: "out@example.com", agentIn: "in@example.com", supervisor: "sup@example.com", admin: "adm@example.com"}
	app.user(t, emails[agentOut], auth.RoleAgent, "mx_other")
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET accepts_top_level_transfers = true WHERE name = 'mx_other'`); err != nil {
		t.Fatal(err)
	}
	app.user(t, emails[agentIn], auth.RoleAgent, q)
	app.user(t, emails[supervisor], auth.RoleSupervisor)
	app.user(t, emails[admin], auth.RoleAdmin)
	// Every role holds many of the matrix's packages at once.
	if _, err := app.DB.Exec(t.Context(), `UPDATE users SET capacity = 1000`); err != nil {
		t.Fatal(err)
	}
	clients := [roles]*http.Client{}
	for r := range roles {
		clients[r] = app.client(t)
		if emails[r] != "" {
			app.login(t, clients[r], emails[r])
		}
	}
	fresh := func(state string) string {
		t.Helper()
		pkg := harborFor(t, q).(map[string]any)
		expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
		id := pkg["handoff_id"].(string)
		if state == held {
			resp, _, _ := postForm(t, clients[agentIn], app.URL+"/handoffs/"+id+"/accept", nil)
			if resp != http.StatusSeeOther {
				t.Fatalf("accept %s as the agent in the queue: %d", id, resp)
			}
		}
		return id
	}
	shared := fresh(queued)

	rows := accessMatrix()
	known := map[string]bool{}
	for _, row := range rows {
		known[row.method+" "+row.route] = true
	}
	for _, r := range registeredRoutes(t, app) {
		if !known[r] {
			t.Errorf("route %s has no row in accessMatrix: add one with the status each role must get", r)
		}
	}

	for _, row := range rows {
		for r := range roles {
			id := shared
			if row.state != anyState {
				id = fresh(row.state)
			}
			path := strings.NewReplacer(":name", q, ":id", id, "*", "/css/app.css").Replace(row.route) + row.query
			var body io.Reader
			contentType := "application/x-www-form-urlencoded"
			if row.body != nil {
				body, contentType = strings.NewReader(string(mustJSON(t, row.body(t, q)))), "application/json"
			} else if row.form != nil {
				body = strings.NewReader(row.form.Encode())
			}
			req, err := http.NewRequest(row.method, app.URL+path, body)
			if err != nil {
				t.Fatal(err)
			}
			if body != nil {
				req.Header.Set("Content-Type", contentType)
			}
			if r == otherBot {
				req.Header.Set("Authorization", "Bearer "+otherKey)
			}
			c := clients[r]
			if row.ownSession && emails[r] != "" {
				c = app.client(t)
				app.login(t, c, emails[r])
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != row.want[r] {
				t.Errorf("%s %s as %s: %d, want %d", row.method, path, roleNames[r], resp.StatusCode, row.want[r])
			}
		}
	}

	for _, row := range socketMatrix() {
		query := strings.NewReplacer("{queue}", q, "{id}", shared).Replace(row.query)
		for r := range roles {
			if got := socketStatus(t, app, clients[r], query, r == otherBot, otherKey); got != row.want[r] {
				t.Errorf("socket %s as %s: %d, want %d", query, roleNames[r], got, row.want[r])
			}
		}
	}
}

// harborFor is the spec's example package for queue, with a contact of its own: the queue's guards
// allow a contact one open package.
func harborFor(t *testing.T, queue string) any {
	return harbor(t, func(p map[string]any) {
		p["target_profile"] = queue
		p["contact"].(map[string]any)["id"] = "cust_" + p["handoff_id"].(string)
	})
}

// registeredRoutes lists "METHOD path" of every route the desk's server registers, from echo's own
// list: a server built over the app's database, as the instance builds it, but not started.
func registeredRoutes(t *testing.T, app *testApp) []string {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	counts := metrics.New(app.DB)
	srv, err := server.New(server.Config{BaseURL: app.URL}, logger, app.DB, app.Auth, app.Queues,
		intake.New(app.DB, time.Now, func() {}), actions.New(app.DB, time.Now, func() {}, counts), board.New(app.DB),
		live.NewHub(app.DB, logger), live.NewPresence(app.DB, logger, func() {}), counts)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range srv.Routes() {
		if r.Method == echoRouteNotFound {
			continue // the 404 for every path no route has
		}
		out = append(out, r.Method+" "+r.Path)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// echoRouteNotFound is the method echo lists its RouteNotFound handlers under.
const echoRouteNotFound = "echo_route_not_found"

// socketStatus dials a subscription as one role and returns the status: 101 when it opened.
func socketStatus(t *testing.T, app *testApp, c *http.Client, query string, bot bool, key string) int {
	t.Helper()
	u, _ := url.Parse(app.URL)
	header := http.Header{"Origin": {app.URL}, "Accept": {"application/json"}}
	for _, ck := range c.Jar.Cookies(u) {
		header.Add("Cookie", ck.Name+"="+ck.Value)
	}
	if bot {
		header.Set("Authorization", "Bearer "+key)
	}
	conn, resp, err := websocket.DefaultDialer.Dial("ws://"+u.Host+"/ws?"+query, header)
	if err == nil {
		conn.Close()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		t.Fatalf("dial %s: %v", query, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
