package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// botEar is a bot's webhook endpoint on the loopback: what each package's bot heard, in the
// order it heard it, as event or warm_timeout:reason, each event once however often redelivered.
type botEar struct {
	mu    sync.Mutex
	seen  map[string]bool
	heard map[string][]string
}

func listenAsBot(t *testing.T) (string, *botEar) {
	t.Helper()
	b := &botEar{seen: map[string]bool{}, heard: map[string][]string{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var h struct {
			EventID   string `json:"event_id"`
			Event     string `json:"event"`
			HandoffID string `json:"handoff_id"`
			Reason    string `json:"reason"`
		}
		if err := json.Unmarshal(body, &h); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.seen[h.EventID] {
			return
		}
		b.seen[h.EventID] = true
		if h.Event == "warm_timeout" {
			h.Event += ":" + h.Reason
		}
		b.heard[h.HandoffID] = append(b.heard[h.HandoffID], h.Event)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, b
}

// warmBot makes an API key for the queues whose webhooks go to a loopback ear.
func (a *testApp) warmBot(t *testing.T, queues ...string) (string, *botEar) {
	t.Helper()
	hookURL, ear := listenAsBot(t)
	var ids []int64
	for _, name := range queues {
		q, err := a.Queues.ByName(t.Context(), name)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, q.ID)
	}
	k, err := a.Auth.CreateAPIKey(t.Context(), auth.NewAPIKey{Name: "warm-bot", QueueIDs: ids, WebhookURL: hookURL, AllowPrivateWebhook: true})
	if err != nil {
		t.Fatal(err)
	}
	return k.Key, ear
}

// warmEnd waits until the package's warm phase is over and its bot has been sent every webhook,
// and then checks that the bot heard exactly one end of it, want: accepted or warm_timeout:reason.
func (b *botEar) warmEnd(t *testing.T, app *testApp, id, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var open bool
		if err := app.DB.QueryRow(t.Context(), `
			SELECT EXISTS (SELECT 1 FROM handoffs h WHERE h.handoff_id = $1 AND (h.warm_until IS NOT NULL
				OR EXISTS (SELECT 1 FROM offers o WHERE o.handoff_id = h.id AND o.ended_at IS NULL)))
			OR EXISTS (SELECT 1 FROM webhook_outbox WHERE handoff_id = $1 AND state = 'pending')`, id).Scan(&open); err != nil {
			t.Fatal(err)
		}
		b.mu.Lock()
		heard := slices.Clone(b.heard[id])
		b.mu.Unlock()
		var ends []string
		for _, e := range heard {
			if e == "accepted" || strings.HasPrefix(e, "warm_timeout") {
				ends = append(ends, e)
			}
		}
		if !open {
			if len(ends) != 1 || ends[0] != want {
				t.Errorf("%s: the bot heard %v; want exactly one end of the warm phase, %s", id, heard, want)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still warm or undelivered after 30s; the bot heard %v", id, heard)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// warmPackageFor is a warm Harbor package for the queue, from a contact of its own.
func warmPackageFor(t *testing.T, queueName string) (string, map[string]any) {
	t.Helper()
	p := warmPackage(t)
	p["target_profile"] = queueName
	p["contact"].(map[string]any)["id"] = "cust_" + p["handoff_id"].(string)
	return p["handoff_id"].(string), p
}

// formOK posts a desk form and fails the test unless the desk answers with a redirect.
func formOK(t *testing.T, c *http.Client, u string, form url.Values) {
	t.Helper()
	if status, _, body := postForm(t, c, u, form); status != http.StatusSeeOther {
		t.Fatalf("POST %s: %d %s", u, status, body)
	}
}

// Every way a warm package can go, over HTTP with a bot listening on the loopback: the bot hears
// exactly one accepted or warm_timeout for each, and the right one.
func TestEveryWarmPackageEndsItsWarmPhaseOnce(t *testing.T) {
	t.Parallel()
	app := setupHooks(t, server.Config{}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	ctx := t.Context()
	// alex is online and rung; bea works the queue from "next" with no desk open; cy works the
	// child queue a package is transferred to.
	alex := app.user(t, "alex@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	if _, err := app.Queues.Create(ctx, queue.New{Name: "billing_t2_disputes", Parent: "billing_t2"}); err != nil {
		t.Fatal(err)
	}
	cy := app.user(t, "cy@example.com", auth.RoleAgent, "billing_t2_disputes")
	key, ear := app.warmBot(t, "billing_t2", "billing_t2_disputes")
	ac, bc, cc := app.client(t), app.client(t), app.client(t)
	app.login(t, ac, "alex@example.com")
	app.login(t, bc, "bea@example.com")
	app.login(t, cc, "cy@example.com")
	app.dialed(t, ac, "")
	app.dialed(t, cc, "")
	app.waitOnline(t, alex, cy)

	// alex holds one package; at a capacity of one he is online but cannot be rung.
	held := harbor(t, func(p map[string]any) { p["transfer_mode"] = "cold"; delete(p, "preferred_agent") })
	expect(t, "a cold package", app.submit(t, key, held), http.StatusCreated)
	formOK(t, ac, app.URL+"/handoffs/"+held["handoff_id"].(string)+"/accept", nil)
	capacity := func(n int) {
		t.Helper()
		if _, err := app.DB.Exec(ctx, `UPDATE users SET capacity = $2 WHERE id = $1`, alex.ID, n); err != nil {
			t.Fatal(err)
		}
	}
	warm := func(window, wait time.Duration) (string, apiAnswer) {
		t.Helper()
		app.setWarm(t, "billing_t2", window, wait)
		id, p := warmPackageFor(t, "billing_t2")
		ans := app.submit(t, key, p)
		expect(t, "a warm package", ans, http.StatusCreated)
		return id, ans
	}
	// next reserves for bea the package that rings nobody, and answers which.
	next := func(want string) {
		t.Helper()
		// A claim skips a row another transaction holds, and each sweep locks the warm packages
		// that ring nobody for a moment: "nothing is waiting" may be that moment.
		for range 50 {
			status, got, body := postForm(t, bc, app.URL+"/queues/billing_t2/next", nil)
			if got == "/handoffs/"+want {
				return
			}
			if status != http.StatusNotFound {
				t.Fatalf("bea's next: %d to %q, want the warm package %s\n%s", status, got, want, body)
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Fatalf("bea's next never found %s", want)
	}

	t.Run("rung and accepted", func(t *testing.T) {
		capacity(3)
		id, ans := warm(time.Minute, time.Minute)
		if ans.Body["offered_to"] != "alex" {
			t.Fatalf("201 %s, want offered_to alex", ans.Raw)
		}
		// Not by "next": only the agent it rings may take it.
		if status, got, _ := postForm(t, bc, app.URL+"/queues/billing_t2/next", nil); status == http.StatusSeeOther {
			t.Fatalf("bea's next took the package that rings alex: %s", got)
		}
		formOK(t, ac, app.URL+"/handoffs/"+id+"/accept", nil)
		ear.warmEnd(t, app, id, "accepted")
		formOK(t, ac, app.URL+"/handoffs/"+id+"/resolve", url.Values{"code": {"solved"}})
	})
	t.Run("the rung agent takes it with next", func(t *testing.T) {
		capacity(3)
		id, ans := warm(time.Minute, time.Minute)
		if ans.Body["offered_to"] != "alex" {
			t.Fatalf("201 %s, want offered_to alex", ans.Raw)
		}
		if status, got, body := postForm(t, ac, app.URL+"/queues/billing_t2/next", nil); got != "/handoffs/"+id {
			t.Fatalf("alex's next: %d to %q, want the package that rings him\n%s", status, got, body)
		}
		formOK(t, ac, app.URL+"/handoffs/"+id+"/accept", nil)
		ear.warmEnd(t, app, id, "accepted")
		var outcome string
		if err := app.DB.QueryRow(ctx, `SELECT o.outcome FROM offers o JOIN handoffs h ON h.id = o.handoff_id WHERE h.handoff_id = $1`, id).Scan(&outcome); err != nil || outcome != "taken" {
			t.Errorf("the ring ended %q, %v; want taken", outcome, err)
		}
		formOK(t, ac, app.URL+"/handoffs/"+id+"/resolve", url.Values{"code": {"solved"}})
	})
	t.Run("reserved by next and accepted", func(t *testing.T) {
		capacity(1)
		id, _ := warm(time.Minute, time.Minute)
		next(id)
		formOK(t, bc, app.URL+"/handoffs/"+id+"/accept", nil)
		ear.warmEnd(t, app, id, "accepted")
	})
	t.Run("reserved by next, the reservation lapses", func(t *testing.T) {
		capacity(1)
		if _, err := app.DB.Exec(ctx, `UPDATE queues SET reservation_timeout = '500 milliseconds' WHERE name = 'billing_t2'`); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := app.DB.Exec(ctx, `UPDATE queues SET reservation_timeout = '2 minutes' WHERE name = 'billing_t2'`); err != nil {
				t.Fatal(err)
			}
		}()
		id, _ := warm(time.Minute, 2*time.Second)
		next(id)
		ear.warmEnd(t, app, id, "warm_timeout:waited_too_long")
		// It waits like any other now: out of the way of the next case.
		next(id)
		formOK(t, bc, app.URL+"/handoffs/"+id+"/return", url.Values{"reason": {"duplicate"}})
	})
	t.Run("reserved by next and rejected: it rings again", func(t *testing.T) {
		capacity(1)
		id, _ := warm(time.Minute, time.Minute)
		next(id)
		capacity(3)
		formOK(t, bc, app.URL+"/handoffs/"+id+"/reject", url.Values{"reason": {"not mine"}})
		formOK(t, ac, app.URL+"/handoffs/"+id+"/accept", nil)
		ear.warmEnd(t, app, id, "accepted")
		formOK(t, ac, app.URL+"/handoffs/"+id+"/resolve", url.Values{"code": {"solved"}})
	})
	t.Run("transferred while ringing: it rings the other queue", func(t *testing.T) {
		capacity(3)
		id, ans := warm(time.Minute, time.Minute)
		if ans.Body["offered_to"] != "alex" {
			t.Fatalf("201 %s, want offered_to alex", ans.Raw)
		}
		formOK(t, bc, app.URL+"/handoffs/"+id+"/transfer", url.Values{"queue": {"billing_t2_disputes"}})
		waitFor(t, fmt.Sprintf("%s to ring cy", id), func() bool { return app.rings(t, id, cy) })
		formOK(t, cc, app.URL+"/handoffs/"+id+"/accept", nil)
		ear.warmEnd(t, app, id, "accepted")
	})
	t.Run("canceled while ringing", func(t *testing.T) {
		capacity(3)
		id, _ := warm(time.Minute, time.Minute)
		expect(t, "cancel", app.api(t, http.MethodPost, "/api/v1/handoffs/"+id+"/cancel", key, nil), http.StatusOK)
		ear.warmEnd(t, app, id, "warm_timeout:canceled")
	})
	t.Run("returned to the bot while it rings nobody", func(t *testing.T) {
		capacity(1)
		id, _ := warm(time.Minute, time.Minute)
		formOK(t, bc, app.URL+"/handoffs/"+id+"/return", url.Values{"reason": {"wrong_escalation"}})
		ear.warmEnd(t, app, id, "warm_timeout:returned_to_bot")
	})
	t.Run("returned to the bot from the reservation", func(t *testing.T) {
		capacity(1)
		id, _ := warm(time.Minute, time.Minute)
		next(id)
		formOK(t, bc, app.URL+"/handoffs/"+id+"/return", url.Values{"reason": {"wrong_escalation"}})
		ear.warmEnd(t, app, id, "warm_timeout:returned_to_bot")
	})
	t.Run("expired while warm", func(t *testing.T) {
		capacity(1)
		if _, err := app.DB.Exec(ctx, `UPDATE queues SET ttl = '1 second' WHERE name = 'billing_t2'`); err != nil {
			t.Fatal(err)
		}
		id, _ := warm(time.Minute, time.Minute)
		ear.warmEnd(t, app, id, "warm_timeout:expired")
	})
}

// rings reports whether the package rings the user now; a failed read (the database restarting)
// is a no.
func (a *testApp) rings(t *testing.T, handoffID string, u auth.User) bool {
	t.Helper()
	var ringing bool
	_ = a.DB.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM offers o JOIN handoffs h ON h.id = o.handoff_id
		WHERE h.handoff_id = $1 AND o.user_id = $2 AND o.ended_at IS NULL)`, handoffID, u.ID).Scan(&ringing)
	return ringing
}

// A database restart loses no end of a warm phase: an agent whose last socket closed while the
// database was down is written offline once it is back (not when their presence would have gone
// stale), their ring goes to the next agent at once, though every lease lapsed during the
// outage (not agent_gone: the next agent's instance is alive), and the bot hears exactly one
// accepted.
func TestWarmRingSurvivesADatabaseRestart(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	app := &testApp{DBURL: cluster.URL(t), hooks: webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond}}
	app.DB = openPool(t, app.DBURL)
	app.Auth, app.Queues = auth.NewService(app.DB), queue.NewService(app.DB)
	app.URL, _ = app.start(t)
	ctx := t.Context()
	alex := app.user(t, "alex@example.com", auth.RoleAgent, "billing_t2")
	bea := app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	app.setWarm(t, "billing_t2", time.Minute, 2*time.Minute)
	key, ear := app.warmBot(t, "billing_t2")
	ac, bc := app.client(t), app.client(t)
	app.login(t, ac, "alex@example.com")
	app.login(t, bc, "bea@example.com")
	alexConn, _ := app.dialed(t, ac, "")
	app.dialed(t, bc, "")
	app.waitOnline(t, alex, bea)
	id, p := warmPackageFor(t, "billing_t2")
	if ans := app.submit(t, key, p); ans.Status != http.StatusCreated || ans.Body["offered_to"] != "alex" {
		t.Fatalf("submit: %d %s, want it to ring alex", ans.Status, ans.Raw)
	}

	cluster.Stop("immediate")
	alexConn.Close()
	// The instance notices and fails to write it: the write is tried again while the database is
	// down, longer than a lease, so that every lease has lapsed when it is back.
	time.Sleep(live.LeaseFor + time.Second)
	cluster.Start()
	// Well before alex's presence would have gone stale (30s after its last heartbeat).
	waitFor(t, "the ring to move to bea", func() bool { return app.rings(t, id, bea) })
	var outcome string
	if err := app.DB.QueryRow(ctx, `SELECT outcome FROM offers WHERE user_id = $1`, alex.ID).Scan(&outcome); err != nil || outcome != "withdrawn" {
		t.Errorf("alex's ring ended %q, %v; want withdrawn", outcome, err)
	}
	formOK(t, bc, app.URL+"/handoffs/"+id+"/accept", nil)
	ear.warmEnd(t, app, id, "accepted")
}
