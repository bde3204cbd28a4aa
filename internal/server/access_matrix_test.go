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
	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/internal/metrics"
	"github.com/handoffdesk/desk/internal/queue"
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
	// refundHeld is a fresh package whose refund is above the queue's threshold, accepted by the
	// agent in the queue.
	refundHeld = "refund held"
	// pending is a refundHeld package whose holder asked for approval: the row's :approval_id is
	// that request.
	pending = "pending"
	// pendingOfSupervisor is a refund package the supervisor accepted and asked approval for:
	// the supervisor is the requester and the holder (four eyes).
	pendingOfSupervisor = "pending of the supervisor"
	// ringing is a fresh warm package ringing the agent in the queue, the one agent online.
	ringing = "ringing"
)

// What a row's :id names when it is not a package: the admin console's fixtures.
const (
	pkgTarget   = ""      // a package (the row's state)
	queueTarget = "queue" // the queue mx_admin, which holds no packages
	userTarget  = "user"  // the agent target@example.com
	keyTarget   = "key"   // the bot key mx_spare
)

// accessRow is one route and what each role gets from it. A route the desk registers without a
// row here fails the test: add the route's row with the statuses it must answer.
type accessRow struct {
	method, route string // as registered in echo, e.g. "POST /handoffs/:id/accept"
	state         string
	target        string // what :id names
	// form is a POST's form; {queue_id} and {user_id} in its values are the admin fixtures' ids.
	form  url.Values
	query string // added to the path, e.g. "?contact_id=…"
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
	created = http.StatusCreated
	invalid = http.StatusUnprocessableEntity
	clash   = http.StatusConflict
)

// adminOnly is what the admin console's routes answer: a browser without a session is sent to log
// in (GET) or refused (POST), agents and supervisors are refused, and the admin gets want.
func adminOnly(method string, want int) byRole {
	if method == "GET" {
		return byRole{login, denied, denied, denied, want, login}
	}
	return byRole{noKey, denied, denied, denied, want, noKey}
}

// adminRows are the admin console's routes, in an order that keeps their fixtures usable: the
// queue is disabled before it is enabled, the key revoked last.
func adminRows() []accessRow {
	queueForm := url.Values(queue.Values(queue.Defaults()))
	newQueue, savedQueue := cloneValues(queueForm), cloneValues(queueForm)
	newQueue.Set("name", "mx_created")
	savedQueue.Set("name", "mx_admin")
	row := func(method, route, target string, form url.Values, want int) accessRow {
		return accessRow{method: method, route: route, target: target, form: form, want: adminOnly(method, want)}
	}
	return []accessRow{
		row("GET", "/admin", pkgTarget, nil, moved), // to its first page
		row("GET", "/admin/queues", pkgTarget, nil, ok),
		row("POST", "/admin/queues", pkgTarget, newQueue, moved),
		row("GET", "/admin/queues/:id", queueTarget, nil, ok),
		row("POST", "/admin/queues/:id", queueTarget, savedQueue, moved),
		row("POST", "/admin/queues/:id/disable", queueTarget, url.Values{"move_to": {""}}, moved),
		row("POST", "/admin/queues/:id/enable", queueTarget, nil, moved),
		row("POST", "/admin/queues/:id/members", queueTarget, url.Values{"user": {"{user_id}"}}, moved),
		row("POST", "/admin/queues/:id/members/:user/remove", queueTarget, nil, moved),
		row("POST", "/admin/queues/:id/saved-replies", queueTarget, url.Values{"title": {"Matrix"}, "body": {"Hi ⟦first name⟧."}}, moved),
		row("POST", "/admin/queues/:id/saved-replies/:reply/remove", queueTarget, nil, moved),
		row("GET", "/admin/users", pkgTarget, nil, ok),
		row("POST", "/admin/users", pkgTarget, url.Values{"email": {"created@example.com"}, "name": {"Created"}, "role": {"agent"},
			"password": {"a long enough one"}, "capacity": {"3"}, "queues": {"{queue_id}"}}, moved),
		row("GET", "/admin/users/:id", userTarget, nil, ok),
		row("POST", "/admin/users/:id", userTarget, url.Values{"name": {"Target"}, "role": {"agent"}, "capacity": {"4"}, "queues": {"{queue_id}"}}, moved),
		// Disabling and revoking first answer with what they will do, and act once confirmed.
		row("POST", "/admin/users/:id/disable", userTarget, nil, ok),
		row("POST", "/admin/users/:id/disable", userTarget, url.Values{"confirm": {"yes"}}, moved),
		row("POST", "/admin/users/:id/enable", userTarget, nil, moved),
		// The temporary password is shown once, on the answer's page.
		row("POST", "/admin/users/:id/reset-password", userTarget, nil, ok),
		// The new key and its secret are shown once, on the answer's page.
		row("POST", "/admin/keys", pkgTarget, url.Values{"name": {"mx_created_key"}, "queues": {"{queue_id}"}}, created),
		row("GET", "/admin/keys", pkgTarget, nil, ok),
		row("GET", "/admin/keys/:id", keyTarget, nil, ok),
		row("POST", "/admin/keys/:id", keyTarget, url.Values{"queues": {"{queue_id}"}, "webhook_url": {""}}, moved),
		row("POST", "/admin/keys/:id/deliveries/:delivery/redeliver", keyTarget, nil, moved),
		// The new signing secret is shown once, on the answer's page; before the revoke, which
		// ends the key.
		row("POST", "/admin/keys/:id/rotate", keyTarget, url.Values{"overlap": {"1h"}}, ok),
		row("POST", "/admin/keys/:id/revoke", keyTarget, nil, ok),
		row("POST", "/admin/keys/:id/revoke", keyTarget, url.Values{"confirm": {"yes"}}, moved),
		// Turning password login back on: turning it off needs an identity provider (409 here).
		row("POST", "/admin/users/:id/sso-only", userTarget, url.Values{"sso_only": {"off"}}, moved),
		row("GET", "/admin/settings", pkgTarget, nil, ok),
		row("POST", "/admin/settings", pkgTarget, url.Values{"unknown_emails": {"refuse"}}, moved),
	}
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = slices.Clone(vs)
	}
	return out
}

func accessMatrix() []accessRow {
	return append([]accessRow{
		{method: "GET", route: "/healthz", want: byRole{ok, ok, ok, ok, ok, ok}},
		{method: "GET", route: "/readyz", want: byRole{ok, ok, ok, ok, ok, ok}},
		{method: "GET", route: "/static*", want: byRole{ok, ok, ok, ok, ok, ok}},
		{method: "GET", route: "/favicon.ico", want: byRole{http.StatusMovedPermanently, http.StatusMovedPermanently, http.StatusMovedPermanently,
			http.StatusMovedPermanently, http.StatusMovedPermanently, http.StatusMovedPermanently}},
		{method: "GET", route: "/login", want: byRole{ok, moved, moved, moved, moved, ok}},
		{method: "POST", route: "/login", form: url.Values{"email": {"nobody@example.com"}, "password": {"wrong-horse"}},
			want: byRole{http.StatusUnauthorized, http.StatusUnauthorized, http.StatusUnauthorized, http.StatusUnauthorized, http.StatusUnauthorized, http.StatusUnauthorized}},
		{method: "POST", route: "/logout", ownSession: true, want: byRole{moved, moved, moved, moved, moved, moved}},

		{method: "GET", route: "/", want: byRole{login, ok, ok, ok, ok, login}},
		// "My work" is everyone's own: what they hold, whatever queues they work.
		{method: "GET", route: "/mine", want: byRole{login, ok, ok, ok, ok, login}},
		// A queue the agent does not work answers as a missing one (queue.Unknown).
		{method: "GET", route: "/queues/:name", want: byRole{login, missing, ok, ok, ok, login}},
		{method: "POST", route: "/queues/:name/next", state: queued, want: byRole{noKey, missing, moved, moved, moved, noKey}},
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
		// A note at any time, by anyone who works the queue and by supervisors, whoever holds it.
		{method: "POST", route: "/handoffs/:id/notes", state: held, form: url.Values{"text": {"Customer prefers email."}},
			want: byRole{noKey, missing, moved, moved, moved, noKey}},
		{method: "POST", route: "/handoffs/:id/notes", form: url.Values{"text": {""}}, want: byRole{noKey, missing, invalid, invalid, invalid, noKey}},
		{method: "GET", route: "/ws", want: byRole{login, http.StatusBadRequest, http.StatusBadRequest, http.StatusBadRequest, http.StatusBadRequest, login}},
		// Search lists only what each may see: an agent out of the queue finds nothing, and no one
		// is refused the page.
		{method: "GET", route: "/packages", query: "?q=duplicate", want: byRole{login, ok, ok, ok, ok, login}},
		{method: "GET", route: "/packages/export.csv", want: byRole{login, denied, denied, ok, ok, login}},
		// Supervisors reassign; the form names the supervisor, which is their take-over and, for
		// the admin, a person who does not work the queue (422).
		{method: "POST", route: "/handoffs/:id/reassign", state: held, form: url.Values{"to": {"sup@example.com"}},
			want: byRole{noKey, missing, denied, moved, invalid, noKey}},
		// A ring is its agent's alone to turn down: supervisors and admins are not rung (409).
		{method: "POST", route: "/handoffs/:id/decline", state: ringing, want: byRole{noKey, missing, moved, clash, clash, noKey}},
		// Available: what everyone is already, so that the rows after it find the agents as they were.
		{method: "POST", route: "/me/status", form: url.Values{"status": {"available"}}, want: byRole{noKey, moved, moved, moved, moved, noKey}},

		// Refund approvals: only the holder asks, only the requester withdraws; supervisors who
		// step in take the package first.
		{method: "POST", route: "/handoffs/:id/approval", state: refundHeld, form: url.Values{"note": {"double charge"}},
			want: byRole{noKey, missing, moved, denied, denied, noKey}},
		{method: "POST", route: "/handoffs/:id/approval/withdraw", state: pending, want: byRole{noKey, missing, moved, denied, denied, noKey}},
		{method: "GET", route: "/approvals", want: byRole{login, denied, denied, ok, ok, login}},
		{method: "POST", route: "/approvals/:approval_id/approve", state: pending, form: url.Values{"note": {"approved"}},
			want: byRole{noKey, denied, denied, moved, moved, noKey}},
		{method: "POST", route: "/approvals/:approval_id/deny", state: pending, form: url.Values{"note": {"denied"}},
			want: byRole{noKey, denied, denied, moved, moved, noKey}},
		// Four eyes: the supervisor who asked, and holds the package, decides neither way.
		{method: "POST", route: "/approvals/:approval_id/approve", state: pendingOfSupervisor, form: url.Values{"note": {"mine"}},
			want: byRole{noKey, denied, denied, denied, moved, noKey}},
		{method: "POST", route: "/approvals/:approval_id/deny", state: pendingOfSupervisor, form: url.Values{"note": {"mine"}},
			want: byRole{noKey, denied, denied, denied, moved, noKey}},

		// Anyone signed in may change their own password; a wrong current one is named (422) and
		// changes nothing, so the other rows' sessions live on.
		{method: "GET", route: "/password", want: byRole{login, ok, ok, ok, ok, login}},
		{method: "POST", route: "/password", form: url.Values{"current": {"not-the-password"}, "password": {"a new long one"}},
			want: byRole{noKey, invalid, invalid, invalid, invalid, noKey}},
		// Single sign-on is not configured here (no OIDC issuer): its routes are not found for anyone.
		{method: "GET", route: "/sso/start", want: byRole{missing, missing, missing, missing, missing, missing}},
		{method: "GET", route: "/sso/callback", query: "?state=x&code=y", want: byRole{missing, missing, missing, missing, missing, missing}},
		// A popup's ticket, from a password or single sign-on, traded for a session: an unknown one
		// is refused to everyone; the popup's last page without a ticket starts the popup again.
		{method: "POST", route: "/login/complete", form: url.Values{"ticket": {"x"}}, want: byRole{noKey, noKey, noKey, noKey, noKey, noKey}},
		{method: "GET", route: "/login/popup", want: byRole{login, login, login, login, login, login}},

		{method: "GET", route: "/dashboard", want: byRole{login, denied, denied, ok, ok, login}},
		{method: "GET", route: "/evals", want: byRole{login, denied, denied, ok, ok, login}},
		{method: "GET", route: "/evals/replies/:id", want: byRole{login, denied, denied, missing, missing, login}},
		{method: "GET", route: "/evals/export.jsonl", want: byRole{login, denied, denied, ok, ok, login}},
		{method: "GET", route: "/audit", want: byRole{login, denied, denied, ok, ok, login}},
		{method: "GET", route: "/audit/export.csv", want: byRole{login, denied, denied, ok, ok, login}},
		{method: "GET", route: "/audit/export.jsonl", want: byRole{login, denied, denied, ok, ok, login}},

		{method: "GET", route: "/api/v1/schema/handoff-v1.json", want: byRole{ok, ok, ok, ok, ok, ok}},
		{method: "GET", route: "/api/openapi.yaml", want: byRole{ok, ok, ok, ok, ok, ok}},
		{method: "HEAD", route: "/api/v1/schema/handoff-v1.json", want: byRole{ok, ok, ok, ok, ok, ok}},
		{method: "HEAD", route: "/api/openapi.yaml", want: byRole{ok, ok, ok, ok, ok, ok}},
		{method: "POST", route: "/api/v1/handoffs", body: harborFor, want: byRole{noKey, noKey, noKey, noKey, noKey, denied}},
		{method: "GET", route: "/api/v1/handoffs", query: "?contact_id=cust_9912", want: byRole{noKey, noKey, noKey, noKey, noKey, ok}},
		{method: "GET", route: "/api/v1/handoffs/:id", want: byRole{noKey, noKey, noKey, noKey, noKey, missing}},
		{method: "POST", route: "/api/v1/handoffs/:id/cancel", state: queued, want: byRole{noKey, noKey, noKey, noKey, noKey, missing}},
		// The conversation after the handoff: only the key whose queue has the package.
		{method: "POST", route: "/api/v1/handoffs/:id/messages", body: func(*testing.T, string) any {
			return map[string]any{"message_id": "mx_1", "role": "user", "text": "hello?"}
		}, want: byRole{noKey, noKey, noKey, noKey, noKey, missing}},
		{method: "GET", route: "/api/v1/handoffs/:id/messages", want: byRole{noKey, noKey, noKey, noKey, noKey, missing}},
		// The customer's verdict: only the key whose queue has the package (another's: not found).
		{method: "POST", route: "/api/v1/handoffs/:id/csat", body: func(*testing.T, string) any {
			return map[string]any{"score": 5, "leg": "bot"}
		}, want: byRole{noKey, noKey, noKey, noKey, noKey, missing}},
		// MCP: every call needs a bot's key. A bot gets in, and is then answered by the protocol:
		// without the Accept an MCP client sends (JSON and an event stream) a call is refused
		// (400), and a stateless server opens no stream (GET) nor session to end (DELETE); the
		// calls themselves are mcp_test.go's.
		{method: "POST", route: "/mcp", body: func(*testing.T, string) any {
			return map[string]any{"jsonrpc": "2.0", "id": 1, "method": "ping"}
		}, want: byRole{noKey, noKey, noKey, noKey, noKey, http.StatusBadRequest}},
		{method: "GET", route: "/mcp", want: byRole{noKey, noKey, noKey, noKey, noKey, http.StatusMethodNotAllowed}},
		{method: "DELETE", route: "/mcp", want: byRole{noKey, noKey, noKey, noKey, noKey, http.StatusMethodNotAllowed}},
		// SW4RM routes among the key's own queues: a to_agent naming another's is a field no route
		// matches (422), as for any queue the key does not have.
		{method: "POST", route: "/api/v1/sw4rm/handoff-requests", body: func(t *testing.T, q string) any {
			return sw4rmRequest(t, func(r map[string]any) { r["to_agent"] = q })
		}, want: byRole{noKey, noKey, noKey, noKey, noKey, http.StatusUnprocessableEntity}},
	}, adminRows()...)
}

// wsRow is one websocket subscription and what each role gets: 101 when it opens.
type wsRow struct {
	query string // with {queue} and {id} for the matrix's queue and package
	want  byRole
}

func socketMatrix() []wsRow {
	const opens = http.StatusSwitchingProtocols
	return []wsRow{
		{query: "queues={queue}", want: byRole{noKey, missing, opens, opens, opens, noKey}},
		{query: "handoff={id}", want: byRole{noKey, missing, opens, opens, opens, noKey}},
		{query: "roster=true", want: byRole{noKey, denied, denied, opens, opens, noKey}},
		{query: "queues={queue}&handoff={id}&roster=true", want: byRole{noKey, denied, denied, opens, opens, noKey}},
		{query: "approvals=true", want: byRole{noKey, denied, denied, opens, opens, noKey}},
		{query: "mine=true", want: byRole{noKey, opens, opens, opens, opens, noKey}},
		{query: "summaries=true", want: byRole{noKey, opens, opens, opens, opens, noKey}},
	}
}

// Every route the desk registers, and every websocket subscription, answers each role as the
// table says; a route without a row fails. A refused request changes nothing: it logs no event
// of the person or bot who sent it.
func TestAccessMatrix(t *testing.T) {
	t.Parallel()
	app := setup(t)
	const q = "mx"
	key := app.botKey(t, "mx_bot", q)
	otherKey := app.botKey(t, "other_bot", "mx_other")
	emails := [roles]string{agentOut: "out@example.com", agentIn: "in@example.com", supervisor: "sup@example.com", admin: "adm@example.com"}
	var userIDs [roles]int64
	userIDs[agentOut] = app.user(t, emails[agentOut], auth.RoleAgent, "mx_other").ID
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET accepts_top_level_transfers = true WHERE name = 'mx_other'`); err != nil {
		t.Fatal(err)
	}
	userIDs[agentIn] = app.user(t, emails[agentIn], auth.RoleAgent, q).ID
	userIDs[supervisor] = app.user(t, emails[supervisor], auth.RoleSupervisor).ID
	userIDs[admin] = app.user(t, emails[admin], auth.RoleAdmin).ID
	// Every role holds many of the matrix's packages at once.
	if _, err := app.DB.Exec(t.Context(), `UPDATE users SET capacity = 1000`); err != nil {
		t.Fatal(err)
	}
	fx := adminFixtures(t, app)
	var otherBotID int64
	if err := app.DB.QueryRow(t.Context(), `SELECT id FROM api_keys WHERE name = 'other_bot'`).Scan(&otherBotID); err != nil {
		t.Fatal(err)
	}
	clients := [roles]*http.Client{}
	for r := range roles {
		clients[r] = app.client(t)
		if emails[r] != "" {
			app.login(t, clients[r], emails[r])
		}
	}

	mustPost := func(who int, path string, form url.Values, want ...int) {
		t.Helper()
		status, _, body := postForm(t, clients[who], app.URL+path, form)
		if !slices.Contains(want, status) {
			t.Fatalf("POST %s as %s: %d, want %v\n%.2000s", path, roleNames[who], status, want, body)
		}
	}
	var lastRing string
	var online *websocket.Conn
	// fresh submits a package for a row's request and brings it to state; it returns the package's
	// id and, for a pending request, the request's.
	fresh := func(state string) (id, approvalID string) {
		t.Helper()
		pkg := harborFor(t, q).(map[string]any)
		// A warm package rings the agent in the queue, who is online: only the ringing rows' are.
		pkg["transfer_mode"] = string(handoff.TransferModeCold)
		switch state {
		case refundHeld, pending, pendingOfSupervisor:
			pkg["refund"] = map[string]any{"amount": "120.00", "currency": "USD"}
		case ringing:
			// The agent in the queue goes online for the ringing rows, after the logout row (a
			// logout closes all of a person's sockets). The socket is read, as a browser's is.
			if online == nil {
				online, _ = app.dialed(t, clients[agentIn], "")
				collectFrames(t, online)
				app.waitOnline(t, auth.User{ID: userIDs[agentIn]})
			}
			// An agent is rung one package at a time, and not while holding a reservation (the
			// next row leaves one): end the last ring, if it still rings, and accept what they hold.
			if lastRing != "" {
				mustPost(agentIn, "/handoffs/"+lastRing+"/decline", nil, http.StatusSeeOther, http.StatusConflict)
			}
			rows, err := app.DB.Query(t.Context(), `SELECT handoff_id FROM handoffs WHERE assignee_id = $1 AND status = 'reserved'`, userIDs[agentIn])
			if err != nil {
				t.Fatal(err)
			}
			reserved, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range reserved {
				mustPost(agentIn, "/handoffs/"+r+"/accept", nil, http.StatusSeeOther)
			}
			pkg["transfer_mode"] = string(handoff.TransferModeWarm)
			delete(pkg, "preferred_agent")
		}
		ans := app.submit(t, key, pkg)
		expect(t, "submit", ans, http.StatusCreated)
		id = pkg["handoff_id"].(string)
		switch state {
		case held, refundHeld, pending:
			mustPost(agentIn, "/handoffs/"+id+"/accept", nil, http.StatusSeeOther)
		case pendingOfSupervisor:
			mustPost(supervisor, "/handoffs/"+id+"/accept", nil, http.StatusSeeOther)
		case ringing:
			if ans.Body["offered_to"] != "in" {
				t.Fatalf("the warm package rings %v, want the agent in the queue: %s", ans.Body["offered_to"], ans.Raw)
			}
			lastRing = id
		}
		switch state {
		case pending:
			mustPost(agentIn, "/handoffs/"+id+"/approval", url.Values{"note": {"double charge"}}, http.StatusSeeOther)
		case pendingOfSupervisor:
			mustPost(supervisor, "/handoffs/"+id+"/approval", url.Values{"note": {"double charge"}}, http.StatusSeeOther)
		}
		if state == pending || state == pendingOfSupervisor {
			if err := app.DB.QueryRow(t.Context(), `
				SELECT a.id::text FROM approvals a JOIN handoffs h ON h.id = a.handoff_id
				WHERE h.handoff_id = $1 AND a.state = 'pending'`, id).Scan(&approvalID); err != nil {
				t.Fatalf("the pending request of %s: %v", id, err)
			}
		}
		return id, approvalID
	}
	shared, _ := fresh(queued)

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

	formIDs := strings.NewReplacer("{queue_id}", fx.queueID, "{user_id}", fx.userID)
	for _, row := range rows {
		for r := range roles {
			id, approvalID := shared, ""
			if row.state != anyState {
				id, approvalID = fresh(row.state)
			}
			switch row.target {
			case queueTarget:
				id = fx.queueID
			case userTarget:
				id = fx.userID
			case keyTarget:
				id = fx.keyID
			}
			path := strings.NewReplacer(":name", q, ":id", id, ":approval_id", approvalID, ":user", fx.userID, ":delivery", fx.deliveryID,
				"*", "/css/app.css", ":reply", fx.savedReplyID).Replace(row.route) + row.query
			var body io.Reader
			contentType := "application/x-www-form-urlencoded"
			if row.body != nil {
				body, contentType = strings.NewReader(string(mustJSON(t, row.body(t, q)))), "application/json"
			} else if row.form != nil {
				form := url.Values{}
				for k, vs := range row.form {
					for _, v := range vs {
						form.Add(k, formIDs.Replace(v))
					}
				}
				body = strings.NewReader(form.Encode())
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
			var before int64
			if err := app.DB.QueryRow(t.Context(), `SELECT coalesce(max(seq), 0) FROM events`).Scan(&before); err != nil {
				t.Fatal(err)
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
			if resp.StatusCode < http.StatusBadRequest {
				continue
			}
			var botID int64
			if r == otherBot {
				botID = otherBotID
			}
			var logged []string
			if err := app.DB.QueryRow(t.Context(), `
				SELECT coalesce(array_agg(kind ORDER BY seq), '{}') FROM events
				WHERE seq > $1 AND (actor_user = $2 OR actor_bot = $3)`, before, userIDs[r], botID).Scan(&logged); err != nil {
				t.Fatal(err)
			}
			if len(logged) > 0 {
				t.Errorf("%s %s as %s was refused (%d) but logged %v", row.method, path, roleNames[r], resp.StatusCode, logged)
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

// matrixFixtures are what the admin console's rows act on, apart from the roles' own: a queue
// without packages, an agent, and a bot key with a dead webhook delivery.
type matrixFixtures struct {
	queueID, userID, keyID, deliveryID, savedReplyID string
}

func adminFixtures(t *testing.T, app *testApp) matrixFixtures {
	t.Helper()
	var fx matrixFixtures
	fx.userID = itoa(app.user(t, "target@example.com", auth.RoleAgent, "mx_admin").ID)
	app.botKey(t, "mx_spare", "mx_admin")
	if err := app.DB.QueryRow(t.Context(), `
		SELECT (SELECT id FROM queues WHERE name = 'mx_admin')::text, (SELECT id FROM api_keys WHERE name = 'mx_spare')::text`).
		Scan(&fx.queueID, &fx.keyID); err != nil {
		t.Fatal(err)
	}
	// A delivery that ran out of attempts, as the deliverer leaves one, for the admin to send again.
	if err := app.DB.QueryRow(t.Context(), `
		INSERT INTO webhook_outbox (event_id, api_key_id, handoff_id, event, payload, state, attempts, last_status, last_error)
		VALUES ('evt_mx_dead', $1, 'h_mx_dead', 'queued', '{}', 'dead', 8, 503, 'the bot answered 503')
		RETURNING id::text`, fx.keyID).Scan(&fx.deliveryID); err != nil {
		t.Fatal(err)
	}
	// A saved reply of the queue, for the admin to remove.
	if err := app.DB.QueryRow(t.Context(), `INSERT INTO saved_replies (queue_id, title, body) VALUES ($1, 'Matrix spare', 'Hello.')
		RETURNING id::text`, fx.queueID).Scan(&fx.savedReplyID); err != nil {
		t.Fatal(err)
	}
	return fx
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
		intake.New(app.DB, time.Now, func() {}, nil), actions.New(app.DB, time.Now, func() {}, counts, nil, app.URL), board.New(app.DB),
		live.NewHub(app.DB, logger), live.NewPresence(app.DB, logger, func() {}), counts, nil)
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
