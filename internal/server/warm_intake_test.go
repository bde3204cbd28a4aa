package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// submitAll posts the packages at once, as bots do, so that intake takes them in batches, and
// returns the answers in the packages' order.
func (a *testApp) submitAll(t *testing.T, key string, packages []map[string]any) []apiAnswer {
	t.Helper()
	answers := make([]apiAnswer, len(packages))
	var wg sync.WaitGroup
	for i, p := range packages {
		wg.Go(func() { answers[i] = a.api(t, http.MethodPost, "/api/v1/handoffs", key, p) })
	}
	wg.Wait()
	for i, ans := range answers {
		expect(t, fmt.Sprintf("submit package %d", i), ans, http.StatusCreated)
	}
	return answers
}

// Warm packages that come in together are rung by intake with their batch, over HTTP: with two
// agents available, two of them ring, one each, and their 201s name them; the others' 201s carry
// the queue's estimate, and they wait until an agent is free. An agent who chose away, or has no
// desk open, is not rung. Each ring reaches its agent's socket once committed, and the next
// waiting package rings the agent who declined.
func TestWarmPackagesComingInTogetherRingEachAgentOnce(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	alex := app.user(t, "alex@example.com", auth.RoleAgent, "billing_t2")
	bea := app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	carl := app.user(t, "carl@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	clients := map[string]*http.Client{}
	for _, name := range []string{"alex", "bea", "carl"} {
		c := app.client(t)
		app.login(t, c, name+"@example.com")
		clients[name] = c
	}
	ac, _ := app.dialed(t, clients["alex"], "")
	bc, _ := app.dialed(t, clients["bea"], "")
	cc, _ := app.dialed(t, clients["carl"], "")
	defer cc.Close()
	formOK(t, clients["carl"], app.URL+"/me/status", url.Values{"status": {"away"}})
	app.waitOnline(t, alex, bea, carl)

	var packages []map[string]any
	for range 6 {
		_, p := warmPackageFor(t, "billing_t2")
		packages = append(packages, p)
	}
	answers := app.submitAll(t, key, packages)
	rung := map[string]string{} // agent → handoff id
	var waiting []string
	for i, ans := range answers {
		id := packages[i]["handoff_id"].(string)
		agent, rings := ans.Body["offered_to"].(string)
		wait, estimated := ans.Body["estimated_wait_seconds"].(float64)
		switch {
		case rings && !estimated:
			if rung[agent] != "" {
				t.Errorf("%s rings for %s and %s at once", agent, rung[agent], id)
			}
			rung[agent] = id
		case estimated && !rings && wait == 900:
			waiting = append(waiting, id)
		default:
			t.Errorf("201 %s: want offered_to or the SLA's 900s as estimated_wait_seconds, not both", ans.Raw)
		}
	}
	if len(rung) != 2 || rung["alex"] == "" || rung["bea"] == "" {
		t.Fatalf("rang %v, want alex and bea once each (carl is away, dana offline)", rung)
	}
	var live int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM offers o JOIN handoffs h ON h.id = o.handoff_id
		WHERE o.ended_at IS NULL AND h.offered_to = o.user_id AND o.user_id = ANY($1)`, []int64{alex.ID, bea.ID}).Scan(&live); err != nil || live != 2 {
		t.Fatalf("%d live offers (%v), want alex's and bea's", live, err)
	}
	for name, conn := range map[string]*websocket.Conn{"alex": ac, "bea": bc} {
		if html := readUntil(t, conn, "ring"); !strings.Contains(html, `data-handoff="`+rung[name]+`"`) {
			t.Fatalf("%s's ring frame %s, want %s", name, html, rung[name])
		}
	}

	// A replay answers as the first answer did: who it rings now.
	for i, p := range packages {
		if p["handoff_id"] == rung["bea"] {
			again := app.submit(t, key, p)
			expect(t, "send the package again", again, http.StatusOK)
			if again.Body["offered_to"] != "bea" || again.Body["estimated_wait_seconds"] != nil {
				t.Errorf("replay of package %d: %s, want offered_to bea", i, again.Raw)
			}
		}
	}

	// alex declines: his package waits for bea, and a waiting package rings alex.
	formOK(t, clients["alex"], app.URL+"/handoffs/"+rung["alex"]+"/decline", url.Values{})
	deadline := time.Now().Add(waitDeadline)
	for {
		html := readUntil(t, ac, "ring")
		if i := strings.Index(html, `data-handoff="`); i >= 0 {
			id := strings.SplitN(html[i+len(`data-handoff="`):], `"`, 2)[0]
			if !slices.Contains(waiting, id) {
				t.Fatalf("alex rings for %s, want one of the packages that waited, %v", id, waiting)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no waiting package rang alex after he declined")
		}
	}
}

// Warm packages that come in together when nobody of their queue is online: each 201 carries the
// queue's estimate, and each bot hears exactly one warm_timeout no_agent_online, after queued.
func TestWarmPackagesComingInTogetherWithNobodyOnline(t *testing.T) {
	t.Parallel()
	app := setupHooks(t, server.Config{}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	key, ear := app.warmBot(t, "billing_t2")
	var packages []map[string]any
	for range 6 {
		_, p := warmPackageFor(t, "billing_t2")
		packages = append(packages, p)
	}
	for i, ans := range app.submitAll(t, key, packages) {
		if ans.Body["offered_to"] != nil || ans.Body["estimated_wait_seconds"] != float64(900) {
			t.Errorf("package %d: 201 %s, want estimated_wait_seconds 900 and no offered_to", i, ans.Raw)
		}
	}
	// A replay answers as the first answer did: the estimate.
	again := app.submit(t, key, packages[0])
	expect(t, "send a package again", again, http.StatusOK)
	if again.Body["offered_to"] != nil || again.Body["estimated_wait_seconds"] != float64(900) {
		t.Errorf("replay: %s, want estimated_wait_seconds 900", again.Raw)
	}
	for _, p := range packages {
		id := p["handoff_id"].(string)
		ear.warmEnd(t, app, id, "warm_timeout:no_agent_online")
		// A bot orders its webhooks by occurred_at: queued comes first.
		var ordered bool
		if err := app.DB.QueryRow(t.Context(), `
			SELECT (q.payload->>'occurred_at')::timestamptz < (w.payload->>'occurred_at')::timestamptz AND q.id < w.id
			FROM webhook_outbox q, webhook_outbox w
			WHERE q.handoff_id = $1 AND q.event = 'queued' AND w.handoff_id = $1 AND w.event = 'warm_timeout'`, id).Scan(&ordered); err != nil || !ordered {
			t.Errorf("%s: queued is not before warm_timeout (%v)", id, err)
		}
		ear.mu.Lock()
		heard := slices.Clone(ear.heard[id])
		ear.mu.Unlock()
		if !slices.Contains(heard, "queued") {
			t.Errorf("%s: the bot heard %v, want queued too", id, heard)
		}
	}
}
