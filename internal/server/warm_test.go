package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// warmPackage is the Harbor package, which is warm, without a preferred agent.
func warmPackage(t *testing.T) map[string]any {
	t.Helper()
	return harbor(t, func(p map[string]any) {
		p["transfer_mode"] = "warm"
		delete(p, "preferred_agent")
	})
}

// waitOnline waits until every user has a fresh presence: their sockets' instances wrote it.
func (a *testApp) waitOnline(t *testing.T, users ...auth.User) {
	t.Helper()
	ids := make([]int64, len(users))
	for i, u := range users {
		ids[i] = u.ID
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		if err := a.DB.QueryRow(t.Context(), `SELECT count(DISTINCT user_id) FROM presence WHERE user_id = ANY($1) AND NOT away`, ids).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == len(ids) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d users online after 10s", n, len(ids))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// setWarm gives the queue a short accept window for a test.
func (a *testApp) setWarm(t *testing.T, queueName string, window, wait time.Duration) {
	t.Helper()
	if err := a.Queues.SetWarm(t.Context(), queueName, window, wait); err != nil {
		t.Fatal(err)
	}
}

// The ring in Chromium: a warm package rings agent 1, who lets it time out; it then rings agent 2,
// who accepts with A; the bot's receiver hears accepted naming agent 2; agent 1's card goes away
// without a reload.
func TestBrowserWarmRingTimesOutThenTheNextAgentAccepts(t *testing.T) {
	t.Parallel()
	app := setupHooks(t, server.Config{}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	hookURL, hooks := receiver(t)
	alex := app.user(t, "alex@example.com", auth.RoleAgent, "billing_t2")
	bea := app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	q, err := app.Queues.ByName(t.Context(), "billing_t2")
	if err != nil {
		t.Fatal(err)
	}
	app.setWarm(t, "billing_t2", 2*time.Second, time.Minute)
	k, err := app.Auth.CreateAPIKey(t.Context(), auth.NewAPIKey{Name: "tier1", QueueIDs: []int64{q.ID}, WebhookURL: hookURL, AllowPrivateWebhook: true})
	if err != nil {
		t.Fatal(err)
	}

	first, second := browser(t), browser(t)
	browserLogin(t, first, app.URL, "alex@example.com")
	browserLogin(t, second, app.URL, "bea@example.com")
	for _, ctx := range []context.Context{first, second} {
		// Set once on the page: a reload would lose it.
		if err := chromedp.Do(ctx, chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`)); err != nil {
			t.Fatal(err)
		}
	}
	app.waitOnline(t, alex, bea)

	pkg := warmPackage(t)
	id := pkg["handoff_id"].(string)
	ans := app.submit(t, k.Key, pkg)
	expect(t, "submit a warm package", ans, http.StatusCreated)
	// Neither has had an offer or an accept: the tie goes to the lower id, alex.
	if ans.Body["offered_to"] != "alex" || ans.Body["estimated_wait_seconds"] != nil {
		t.Fatalf("201 %s, want offered_to alex and no estimate", ans.Raw)
	}
	ring := fmt.Sprintf(`#ring [data-testid="ring"][data-handoff=%q]`, id)
	if err := chromedp.Do(first, chromedp.WaitVisible(ring)); err != nil {
		t.Fatalf("alex's ring: %v", err)
	}
	if got := evalString(t, first, `document.querySelector("#ring [role=alert] [data-countdown]").textContent`); !regexp.MustCompile(`^[0-2]s$`).MatchString(got) {
		t.Errorf("alex's countdown reads %q, want the seconds left of a 2s window", got)
	}
	if got := evalString(t, first, `[...document.querySelectorAll("#ring button")].map(b => b.textContent.trim() + "/" + b.getAttribute("aria-keyshortcuts")).join(",")`); got != "Accept A/a,Decline X/x" {
		t.Errorf("the ring's buttons read %q", got)
	}
	// alex lets it ring out: it goes to bea, and leaves alex's page without a reload.
	if err := chromedp.Do(second, chromedp.WaitVisible(ring)); err != nil {
		t.Fatalf("bea's ring after alex's timed out: %v", err)
	}
	if err := chromedp.Do(first, chromedp.WaitNotPresent(ring)); err != nil {
		t.Fatalf("alex's ring after it timed out: %v", err)
	}
	if got := evalString(t, first, `String(window.notReloaded)`); got != "true" {
		t.Errorf("alex's page reloaded to drop the ring")
	}
	// A, whatever has the focus.
	if err := chromedp.Do(second,
		chromedp.KeyEvent("a"),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
	); err != nil {
		t.Fatalf("bea accepts with A: %v", err)
	}
	deadline := time.After(waitDeadline)
	for {
		select {
		case body := <-hooks:
			var h map[string]any
			if err := json.Unmarshal(body, &h); err != nil {
				t.Fatal(err)
			}
			if h["event"] != "accepted" {
				continue
			}
			if h["handoff_id"] != id || h["assignee"] != "bea" {
				t.Fatalf("accepted webhook %s, want bea on %s", body, id)
			}
			if s, ok := h["seconds_to_accept"].(float64); !ok || s < 2 {
				t.Errorf("accepted webhook %s: seconds_to_accept should count the 2s alex let it ring", body)
			}
			return
		case <-deadline:
			t.Fatal("no accepted webhook within 10s")
		}
	}
}

// warm_timeout over the API: with nobody online the 201 carries an estimate instead of an agent,
// and the bot hears why.
func TestWarmTimeoutWhenNobodyIsOnlineAnswersAnEstimate(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "alex@example.com", auth.RoleAgent, "billing_t2")
	pkg := warmPackage(t)
	ans := app.submit(t, key, pkg)
	expect(t, "submit", ans, http.StatusCreated)
	// No accepts yet: the estimate is the queue's SLA, 15 minutes.
	if ans.Body["offered_to"] != nil || ans.Body["estimated_wait_seconds"] != float64(900) {
		t.Fatalf("201 %s, want estimated_wait_seconds 900 and no offered_to", ans.Raw)
	}
	var reason string
	if err := app.DB.QueryRow(t.Context(), `SELECT payload->>'reason' FROM webhook_outbox WHERE handoff_id = $1 AND event = 'warm_timeout'`,
		pkg["handoff_id"]).Scan(&reason); err != nil || reason != "no_agent_online" {
		t.Fatalf("warm_timeout reason %q, %v; want no_agent_online", reason, err)
	}
}

// The race: 10 warm packages and 5 agents on two instances, agents accepting, declining or
// letting rings time out at random. Read back from the event log, no agent ever rings for two
// packages at once and no package rings two agents at once.
func TestWarmOffersNeverDoubleAcrossTwoInstances(t *testing.T) {
	t.Parallel()
	app := setup(t)
	other := twoInstances(t, app)
	key := app.botKey(t, "tier1", "billing_t2")
	app.setWarm(t, "billing_t2", 300*time.Millisecond, 8*time.Second)
	type agent struct {
		user   auth.User
		client *http.Client
		on     *testApp
		conn   *websocket.Conn
	}
	var agents []agent
	var users []auth.User
	for i := range 5 {
		on := app
		if i%2 == 1 {
			on = other
		}
		email := fmt.Sprintf("agent%d@example.com", i)
		u := app.user(t, email, auth.RoleAgent, "billing_t2")
		c := app.client(t)
		on.login(t, c, email)
		conn, _ := on.dialed(t, c, "")
		agents = append(agents, agent{user: u, client: c, on: on, conn: conn})
		users = append(users, u)
	}
	app.waitOnline(t, users...)

	ringOf := regexp.MustCompile(`data-testid="ring" data-handoff="([^"]+)"`)
	var wg sync.WaitGroup
	for i, a := range agents {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 15)) //nolint:gosec // G404: a seeded choice of what each agent does, repeatable, no secret
			for {
				var f struct {
					Fragments []struct{ Target, HTML string } `json:"fragments"`
				}
				if err := a.conn.ReadJSON(&f); err != nil {
					return // closed at the end of the test
				}
				for _, fr := range f.Fragments {
					m := ringOf.FindStringSubmatch(fr.HTML)
					if fr.Target != "ring" || m == nil {
						continue
					}
					switch rng.IntN(3) {
					case 0:
						resp, err := a.client.PostForm(a.on.URL+"/handoffs/"+m[1]+"/accept", url.Values{})
						if err == nil {
							resp.Body.Close()
						}
					case 1:
						resp, err := a.client.PostForm(a.on.URL+"/handoffs/"+m[1]+"/decline", url.Values{})
						if err == nil {
							resp.Body.Close()
						}
					}
				}
			}
		})
	}

	var ids []string
	var submits sync.WaitGroup
	var mu sync.Mutex
	for i := range 10 {
		on := app
		if i%2 == 1 {
			on = other
		}
		pkg := warmPackage(t)
		pkg["contact"].(map[string]any)["id"] = fmt.Sprintf("cust_warm_%d", i)
		ids = append(ids, pkg["handoff_id"].(string))
		submits.Go(func() {
			ans := on.api(t, http.MethodPost, "/api/v1/handoffs", key, pkg)
			mu.Lock()
			defer mu.Unlock()
			if ans.Status != http.StatusCreated {
				t.Errorf("submit: %d %s", ans.Status, ans.Raw)
			}
		})
	}
	submits.Wait()

	// Every package ends its warm phase: accepted, or warm_timeout.
	deadline := time.Now().Add(30 * time.Second)
	for {
		var warm int
		if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM handoffs WHERE handoff_id = ANY($1)
			AND (warm_until IS NOT NULL OR EXISTS (SELECT 1 FROM offers o WHERE o.handoff_id = handoffs.id AND o.ended_at IS NULL))`, ids).Scan(&warm); err != nil {
			t.Fatal(err)
		}
		if warm == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d packages still warm after 30s", warm)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for _, a := range agents {
		a.conn.Close()
	}
	wg.Wait()

	// The log in commit order: an offer's row is written after the row that ended the offer it
	// waited for, so a second live offer would show as two offers without an end between.
	rows, err := app.DB.Query(t.Context(), `SELECT kind, handoff_id, subject_user FROM events
		WHERE kind IN ('offered', 'offer_ended') ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	ringing := map[int64]int64{} // agent → package
	rung := map[int64]int64{}    // package → agent
	offers, ends := 0, 0
	for rows.Next() {
		var kind string
		var pkgID, userID int64
		if err := rows.Scan(&kind, &pkgID, &userID); err != nil {
			t.Fatal(err)
		}
		switch kind {
		case "offered":
			offers++
			if p, ok := ringing[userID]; ok {
				t.Errorf("agent %d rang for package %d while still ringing for %d", userID, pkgID, p)
			}
			if u, ok := rung[pkgID]; ok {
				t.Errorf("package %d rang agent %d while still ringing agent %d", pkgID, userID, u)
			}
			ringing[userID], rung[pkgID] = pkgID, userID
		case "offer_ended":
			ends++
			if ringing[userID] != pkgID || rung[pkgID] != userID {
				t.Errorf("an end of package %d's ring for agent %d, which was not ringing", pkgID, userID)
			}
			delete(ringing, userID)
			delete(rung, pkgID)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if offers < 10 || offers != ends {
		t.Errorf("%d offers and %d ends; want every package rung at least once, and every ring ended", offers, ends)
	}
	var settled int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(DISTINCT handoff_id) FROM webhook_outbox
		WHERE handoff_id = ANY($1) AND event IN ('accepted', 'warm_timeout')`, ids).Scan(&settled); err != nil {
		t.Fatal(err)
	}
	if settled != 10 {
		t.Errorf("%d of 10 packages told their bot accepted or warm_timeout", settled)
	}
	t.Logf("%d offers across 10 packages and 5 agents", offers)
}

// axe-core finds no serious or critical violation on a page with a ring on it, the ring being an
// alert whose buttons are labelled.
func TestBrowserRingIsAccessible(t *testing.T) {
	t.Parallel()
	source, err := os.ReadFile(axePath)
	if err != nil {
		t.Fatalf("axe-core is missing: run `npm install` (make generate does): %v", err)
	}
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")
	openQueue(t, ctx, app.URL, "billing_t2")
	app.waitOnline(t, dana)
	pkg := warmPackage(t)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#ring [role="alert"][data-handoff="`+pkg["handoff_id"].(string)+`"]`)); err != nil {
		t.Fatalf("the ring: %v", err)
	}
	checkA11y(t, ctx, string(source), "the queue page with a ring")
}

// An agent whose last socket closes loses their ring at once, not at the end of its window: the
// next agent's socket, on the other instance, rings, and the first offer ended withdrawn rather
// than timed out.
func TestRingMovesOnWhenTheAgentsLastSocketCloses(t *testing.T) {
	t.Parallel()
	app := setup(t)
	other := twoInstances(t, app)
	key := app.botKey(t, "tier1", "billing_t2")
	alex := app.user(t, "alex@example.com", auth.RoleAgent, "billing_t2")
	bea := app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	ac, bc := app.client(t), app.client(t)
	app.login(t, ac, "alex@example.com")
	other.login(t, bc, "bea@example.com")
	alexConn, _ := app.dialed(t, ac, "")
	beaConn, _ := other.dialed(t, bc, "")
	app.waitOnline(t, alex, bea)

	pkg := warmPackage(t)
	id := pkg["handoff_id"].(string)
	ans := app.submit(t, key, pkg)
	expect(t, "submit", ans, http.StatusCreated)
	if ans.Body["offered_to"] != "alex" {
		t.Fatalf("201 %s, want offered_to alex", ans.Raw)
	}
	if html := readUntil(t, alexConn, "ring"); !strings.Contains(html, `data-handoff="`+id+`"`) {
		t.Fatalf("alex's ring frame %s", html)
	}
	alexConn.Close()
	if html := readUntil(t, beaConn, "ring"); !strings.Contains(html, `data-handoff="`+id+`"`) {
		t.Fatalf("bea's ring frame %s", html)
	}
	var outcome string
	if err := app.DB.QueryRow(t.Context(), `SELECT outcome FROM offers WHERE user_id = $1`, alex.ID).Scan(&outcome); err != nil || outcome != "withdrawn" {
		t.Errorf("alex's offer ended %q, %v; want withdrawn", outcome, err)
	}
}
