package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/auth"
)

// A look-alike of a user's address is refused at the login form, with the admin's own password,
// and by the admin console: the database's lower() used to fold "admİn" (U+0130) into "admin"
// and the Kelvin sign into k, which logged the look-alike in as the admin.
func TestLookAlikeEmailsDoNotLogIn(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "admin@example.com", auth.RoleAdmin)
	app.user(t, "kate@example.com", auth.RoleAgent)

	for _, email := range []string{"admİn@example.com", "ADMİN@example.com", "\u212Aate@example.com", "\uff4bate@example.com"} {
		c := app.client(t)
		got := fetch(t, c, http.MethodPost, app.URL+"/login", url.Values{"email": {email}, "password": {testPassword}})
		if got.status != http.StatusUnprocessableEntity || !strings.Contains(got.body, "could pass for another address") {
			t.Errorf("login as %q: %d, want 422 saying why:\n%s", email, got.status, got.body)
		}
		if name := who(t, app, c); name != "" {
			t.Errorf("login as %q is logged in as %s", email, name)
		}
	}
	app.login(t, app.client(t), "  Admin@EXAMPLE.com") // ASCII case and surrounding space still do not matter

	admin := app.client(t)
	app.login(t, admin, "admin@example.com")
	got := fetch(t, admin, http.MethodPost, app.URL+"/admin/users", url.Values{"email": {"adm\u0131n@example.com"}, "name": {"Mallory"},
		"role": {"admin"}, "password": {"long-enough"}})
	if got.status != http.StatusUnprocessableEntity || !strings.Contains(got.body, `data-testid="error-email"`) || !strings.Contains(got.body, "U+0131") {
		t.Errorf("the admin console creating a look-alike: %d, want 422 on the email field naming U+0131:\n%s", got.status, got.body)
	}
	got = fetch(t, admin, http.MethodPost, app.URL+"/admin/users", url.Values{"email": {" Erin@Example.COM"}, "name": {"Erin"},
		"role": {"agent"}, "password": {"long-enough"}})
	if got.status != http.StatusSeeOther {
		t.Fatalf("the admin console creating erin: %d:\n%s", got.status, got.body)
	}
	var stored string
	if err := app.DB.QueryRow(context.Background(), `SELECT email FROM users WHERE display_name = 'Erin'`).Scan(&stored); err != nil || stored != "erin@example.com" {
		t.Errorf("erin is stored as %q (%v), want erin@example.com", stored, err)
	}
}

// Two admins demoting each other at once: one wins, the other is refused with a 409 saying the
// desk would be left without an admin (or, arriving after the change, a 403: they are no admin
// any more). Never a 500: the edit used to lock its target before the admins, in id order, so the
// two transactions each held the row the other wanted next ("deadlock detected"). Rounds repeat
// until the race is met, each from two admins again.
func TestAdminsDemotingEachOtherAtOnceKeepOne(t *testing.T) {
	t.Parallel()
	app := setup(t)
	ctx := context.Background()
	admins := []auth.User{app.user(t, "ada@example.com", auth.RoleAdmin), app.user(t, "bo@example.com", auth.RoleAdmin)}
	clients := []*http.Client{app.client(t), app.client(t)}
	for i, c := range clients {
		app.login(t, c, admins[i].Email)
	}
	people := access.New(app.DB, app.Auth)
	const rounds = 40
	raced := 0
	for round := range rounds {
		// Both are admins again, and their sessions say so (each instance forgets a session whose
		// role changed when it reads the log).
		for i, u := range admins {
			if err := people.SetRole(ctx, u.ID, auth.RoleAdmin, 0); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "an admin's page for "+u.Email, func() bool {
				return fetch(t, clients[i], http.MethodGet, app.URL+"/admin/users", nil).status == http.StatusOK
			})
		}
		var answers [2]ssoAnswer
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range admins {
			wg.Go(func() {
				<-start
				other := admins[1-i]
				answers[i] = fetch(t, clients[i], http.MethodPost, app.URL+"/admin/users/"+itoa(other.ID),
					url.Values{"name": {other.DisplayName}, "role": {"agent"}, "capacity": {"3"}})
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for i, a := range answers {
			switch {
			case a.status == http.StatusSeeOther && a.location == "/admin/users/"+itoa(admins[1-i].ID):
				won++
			case a.status == http.StatusConflict && strings.Contains(a.body, "the last enabled admin"):
				raced++
			case a.status == http.StatusForbidden:
			default:
				t.Fatalf("round %d: %s demoting %s = %d, want 303, 409 or 403:\n%s", round, admins[i].Email, admins[1-i].Email, a.status, a.body)
			}
		}
		var left int
		if err := app.DB.QueryRow(ctx, `SELECT count(*) FROM users WHERE role = 'admin' AND NOT disabled`).Scan(&left); err != nil || left != 1 || won != 1 {
			t.Fatalf("round %d: %d demotions went through and %d admins are left (%v); want one and one", round, won, left, err)
		}
	}
	t.Logf("%d of %d rounds met in the transaction and were refused with 409", raced, rounds)
}

// waitFor polls cond until it holds, failing the test after waitDeadline: long, for a busy
// machine, since a passing test never waits it out.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitDeadline)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("still waiting after %s for %s", waitDeadline, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A bot's preferred_agent that is a look-alike of an agent's address names nobody: a cold
// package goes to the queue rather than be offered to that agent (the lookup used lower() too).
// The same address in other ASCII capitals is the agent.
func TestLookAlikePreferredAgentIsOfferedToNobody(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	kim := app.user(t, "kim@example.com", auth.RoleAgent, "billing_t2")
	lee := app.user(t, "lee@example.com", auth.RoleAgent, "billing_t2")
	app.goOnline(t, "kim@example.com", "billing_t2")
	app.goOnline(t, "lee@example.com", "billing_t2")

	for i, c := range []struct {
		preferred string
		want      *int64
	}{{"k\u0130m@example.com", nil}, {"LEE@example.com", &lee.ID}} {
		pkg := harbor(t, func(p map[string]any) {
			p["transfer_mode"] = "cold"
			p["preferred_agent"] = c.preferred
			p["contact"].(map[string]any)["id"] = "c_" + itoa(int64(i))
		})
		expect(t, "preferred agent "+c.preferred, app.submit(t, key, pkg), http.StatusCreated)
		var offeredTo *int64
		if err := app.DB.QueryRow(t.Context(), `SELECT offered_to FROM handoffs WHERE handoff_id = $1`, pkg["handoff_id"]).Scan(&offeredTo); err != nil {
			t.Fatal(err)
		}
		if (offeredTo == nil) != (c.want == nil) || (offeredTo != nil && *offeredTo != *c.want) {
			t.Errorf("preferred_agent %q: offered to user %v, want %v (kim is %d)", c.preferred, deref(offeredTo), deref(c.want), kim.ID)
		}
	}
}

func deref(id *int64) any {
	if id == nil {
		return "nobody"
	}
	return *id
}
