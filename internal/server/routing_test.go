package server_test

import (
	"context"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
)

// goOnline opens a socket for the user and waits until their presence is written.
func (a *testApp) goOnline(t *testing.T, email, queue string) {
	t.Helper()
	c := a.client(t)
	a.login(t, c, email)
	if _, _, err := a.dial(t, c, "queues="+queue, ""); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var online bool
		if err := a.DB.QueryRow(context.Background(), `
			SELECT EXISTS (SELECT 1 FROM presence p JOIN users u ON u.id = p.user_id WHERE u.email = $1)`, email).Scan(&online); err != nil {
			t.Fatal(err)
		}
		if online {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never showed as online", email)
}

func TestOverflowPolicies(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2", "overflow")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	exec := func(sql string) {
		t.Helper()
		if _, err := app.DB.Exec(t.Context(), sql); err != nil {
			t.Fatal(err)
		}
	}
	contact := 0
	next := func() map[string]any {
		contact++
		return harbor(t, func(p map[string]any) { p["contact"].(map[string]any)["id"] = "c_over_" + strconv.Itoa(contact) })
	}

	expect(t, "default policy accepts with nobody online", app.submit(t, key, next()), http.StatusCreated)

	exec(`UPDATE queues SET overflow_policy = 'defer' WHERE name = 'billing_t2'`)
	deferred := app.submit(t, key, next())
	expect(t, "defer with nobody online", deferred, http.StatusServiceUnavailable)
	if deferred.Body["reason"] != "deferred" || deferred.Header.Get("Retry-After") == "" {
		t.Errorf("503 wants reason deferred and Retry-After: %v %s", deferred.Header, deferred.Raw)
	}

	app.goOnline(t, "dana@example.com", "billing_t2")
	expect(t, "defer policy with an agent online", app.submit(t, key, next()), http.StatusCreated)

	exec(`UPDATE handoffs SET enqueued_at = now() - interval '1 hour' WHERE status = 'queued'`)
	expect(t, "defer policy past the SLA", app.submit(t, key, next()), http.StatusServiceUnavailable)

	exec(`UPDATE queues SET overflow_policy = 'route', overflow_queue_id = (SELECT id FROM queues WHERE name = 'overflow') WHERE name = 'billing_t2'`)
	routed := app.submit(t, key, next())
	expect(t, "route policy past the SLA", routed, http.StatusCreated)
	if routed.Body["queue"] != "overflow" {
		t.Errorf("routed to %v, want overflow", routed.Body["queue"])
	}
}

func TestPreferredAgentIsOfferedFirst(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	ctx := t.Context()

	offline := harbor(t, func(p map[string]any) { p["preferred_agent"] = "dana@example.com" })
	expect(t, "preferred agent offline", app.submit(t, key, offline), http.StatusCreated)

	app.goOnline(t, "dana@example.com", "billing_t2")
	offered := harbor(t, func(p map[string]any) {
		p["preferred_agent"] = "DANA@example.com"
		p["contact"].(map[string]any)["id"] = "c_pref"
	})
	expect(t, "preferred agent online", app.submit(t, key, offered), http.StatusCreated)

	var offeredTo []*int64
	rows, err := app.DB.Query(ctx, `SELECT offered_to FROM handoffs ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id *int64
		_ = rows.Scan(&id)
		offeredTo = append(offeredTo, id)
	}
	if len(offeredTo) != 2 || offeredTo[0] != nil || offeredTo[1] == nil || *offeredTo[1] != dana.ID {
		t.Fatalf("offers %v: want none while Dana was offline, then Dana (%d)", offeredTo, dana.ID)
	}

	// Bea may not take Dana's offer while it lasts, and "next" passes it over for her.
	beaClient := app.client(t)
	app.login(t, beaClient, "bea@example.com")
	resp, err := beaClient.PostForm(app.URL+"/handoffs/"+offered["handoff_id"].(string)+"/accept", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("Bea accepting Dana's offer: %d, want 409", resp.StatusCode)
	}

}
