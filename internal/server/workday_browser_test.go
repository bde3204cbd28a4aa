package server_test

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/workday"
)

// An agent's working day, end to end in Chromium (internal/workday): a warm ring, accept, a note,
// an edited reply, a refund approval asked for and granted by a supervisor in a browser of their
// own, and a refunded resolve, with My work following every step live in another tab; once on
// the 1440 px package page, once in the 380 px sidebar framed by a CRM on another site, signed in
// through its popup. axe-core finds nothing serious on any page of it, nor in the frame; the bot
// hears the package resolved as refunded.
func TestBrowserAgentsDay(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	var mu sync.Mutex
	framed := map[string]string{}
	crmURL := crmPage(t, func() string { mu.Lock(); defer mu.Unlock(); return framed["src"] })
	app := setup(t, crmURL)
	// An agent for each walk: the first one's desk, closed, is not the second one's.
	agents := map[workday.Surface]string{workday.Page: "dana@example.com", workday.Frame: "eli@example.com"}
	for _, email := range agents {
		app.user(t, email, auth.RoleAgent, "billing_t2")
	}
	app.user(t, "sam@example.com", auth.RoleSupervisor, "billing_t2")
	// A wide accept window: the walk answers the ring at once, on a machine as busy as it may be.
	app.setWarm(t, "billing_t2", 2*time.Minute, time.Minute)
	key := app.botKey(t, "tier1", "billing_t2")

	for _, surface := range []workday.Surface{workday.Page, workday.Frame} {
		t.Run(string(surface), func(t *testing.T) {
			pkg := harbor(t, func(p map[string]any) {
				p["handoff_id"], p["transfer_mode"] = "ho_day_"+string(surface), "warm"
				p["contact"].(map[string]any)["id"] = "cust_day_" + string(surface)
				p["refund"] = map[string]any{"amount": "150.00", "currency": "USD"}
				delete(p, "preferred_agent")
			})
			id := pkg["handoff_id"].(string)
			desk := workday.Desk{URL: app.URL, BotKey: key, Queue: "billing_t2", Password: testPassword,
				Agent: agents[surface], AgentName: strings.Split(agents[surface], "@")[0], Super: "sam@example.com", Package: pkg, Wait: waitDeadline,
				CRM: func(id string) string {
					mu.Lock()
					defer mu.Unlock()
					framed["src"] = app.URL + "/sidebar/" + id
					return crmURL
				}}
			var steps []string
			err := workday.Walk(t.Context(), desk, surface, workday.Browsers{Agent: browser(t), Super: browser(t)}, func(s workday.Step) error {
				steps = append(steps, s.Name)
				checkA11y(t, s.Document, axe, string(surface)+": "+s.Name)
				return nil
			})
			if err != nil {
				t.Fatalf("the day on the %s, after %v: %v", surface, steps, err)
			}
			if rec := app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, key, nil); rec.Body["status"] != "resolved" || rec.Body["outcome"] != "refunded" {
				t.Errorf("after the day the bot reads %s", rec.Raw)
			}
		})
		// The agent's desk closes with the walk: the next walk's ring is for its own agent.
		waitFor(t, agents[surface]+" offline", func() bool {
			var online bool
			_ = app.DB.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM presence p JOIN users u ON u.id = p.user_id WHERE u.email = $1)`, agents[surface]).Scan(&online)
			return !online
		})
	}
}
