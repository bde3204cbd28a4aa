package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
)

// The customer's verdict is taken once per leg, after the package closed, and only on the legs it
// had; every refusal names what was wrong.
func TestCSATOncePerLegAfterTheClose(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	path := "/api/v1/handoffs/" + d.id + "/csat"
	human := map[string]any{"score": 4, "comment": "Quick, but I had to repeat myself.", "leg": "human"}

	if ans := d.api(t, http.MethodPost, path, d.key, human); ans.Status != http.StatusConflict || ans.Body["reason"] != "handoff_open" ||
		ans.Body["status"] != "queued" {
		t.Errorf("a verdict on an open package: %d %s", ans.Status, ans.Raw)
	}
	bad := d.api(t, http.MethodPost, path, d.key, map[string]any{"score": 0, "leg": "agent", "comment": strings.Repeat("x", 2001), "stars": 5})
	var fields []string
	for _, f := range bad.Body["fields"].([]any) {
		fields = append(fields, f.(map[string]any)["field"].(string))
	}
	if bad.Status != http.StatusUnprocessableEntity || !strings.Contains(bad.Raw, "the survey is invalid") {
		t.Errorf("an invalid survey: %d %s", bad.Status, bad.Raw)
	}
	for _, want := range []string{"score", "leg", "comment", "stars"} {
		if !slices.Contains(fields, want) {
			t.Errorf("the 422 names %v, not %s", fields, want)
		}
	}

	d.act(t, "accept", nil)
	d.act(t, "return", url.Values{"reason": {"resolved_by_policy"}})
	if ans := d.api(t, http.MethodPost, path, d.botKey(t, "other-bot", "sales"), human); ans.Status != http.StatusNotFound {
		t.Errorf("another key's package: %d %s", ans.Status, ans.Raw)
	}
	got := d.api(t, http.MethodPost, path, d.key, human)
	expect(t, "the human leg", got, http.StatusCreated)
	if got.Body["handoff_id"] != d.id || got.Body["leg"] != "human" || got.Body["score"] != 4.0 || got.Body["comment"] != human["comment"] {
		t.Errorf("the verdict reads %s", got.Raw)
	}
	if again := d.api(t, http.MethodPost, path, d.key, human); again.Status != http.StatusConflict || again.Body["reason"] != "csat_given" ||
		again.Body["given_at"] == nil {
		t.Errorf("the human leg again: %d %s", again.Status, again.Raw)
	}
	expect(t, "the bot's leg", d.api(t, http.MethodPost, path, d.key, map[string]any{"score": 2, "leg": "bot"}), http.StatusCreated)
	var agent *int64
	var queue string
	if err := d.DB.QueryRow(t.Context(), `SELECT c.agent_id, q.name FROM csat c JOIN queues q ON q.id = c.queue_id JOIN handoffs h ON h.id = c.handoff_id
		WHERE h.handoff_id = $1 AND c.leg = 'human'`, d.id).Scan(&agent, &queue); err != nil || agent == nil || queue != "billing_t2" {
		t.Errorf("the human leg rates agent %v in %q (%v)", agent, queue, err)
	}

	// A package canceled before anyone took it has no human leg; its bot's leg may be rated.
	pkg := harbor(t, func(p map[string]any) {
		p["contact"].(map[string]any)["id"] = "cust_left"
		p["transfer_mode"] = "cold"
	})
	expect(t, "submit", d.submit(t, d.key, pkg), http.StatusCreated)
	left := "/api/v1/handoffs/" + pkg["handoff_id"].(string)
	expect(t, "cancel", d.api(t, http.MethodPost, left+"/cancel", d.key, nil), http.StatusOK)
	if ans := d.api(t, http.MethodPost, left+"/csat", d.key, human); ans.Status != http.StatusConflict || ans.Body["reason"] != "no_human_leg" {
		t.Errorf("the human leg of a package nobody took: %d %s", ans.Status, ans.Raw)
	}
	expect(t, "the bot's leg of a canceled package", d.api(t, http.MethodPost, left+"/csat", d.key, map[string]any{"score": 1, "leg": "bot"}), http.StatusCreated)
}

// In Chromium: the dashboard shows the customer's verdicts per queue and per agent, the agents'
// leg and the bot's apart, each beside the window before with its sample; clicking an agent's
// sample lands on /packages listing exactly the packages behind it. axe-core finds nothing
// serious on the dashboard.
func TestBrowserCSATOnTheDashboard(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	app.user(t, "ann@example.com", auth.RoleAgent, "billing_t2")
	ann := app.client(t)
	app.login(t, ann, "ann@example.com")
	verdict := func(id string, leg string, score int) {
		t.Helper()
		expect(t, "csat", app.api(t, http.MethodPost, "/api/v1/handoffs/"+id+"/csat", key, map[string]any{"score": score, "leg": leg}), http.StatusCreated)
	}
	handOver := func(id string, worked bool) {
		t.Helper()
		pkg := harbor(t, func(p map[string]any) {
			p["handoff_id"], p["transfer_mode"] = id, "cold"
			p["contact"].(map[string]any)["id"] = "cust_" + id
		})
		expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
		if !worked {
			expect(t, "cancel", app.api(t, http.MethodPost, "/api/v1/handoffs/"+id+"/cancel", key, nil), http.StatusOK)
			return
		}
		for _, step := range []struct {
			action string
			form   url.Values
		}{{"accept", nil}, {"return", url.Values{"reason": {"resolved_by_policy"}}}} {
			if status, _, body := postForm(t, ann, app.URL+"/handoffs/"+id+"/"+step.action, step.form); status != http.StatusSeeOther {
				t.Fatalf("%s %s: %d\n%.300s", step.action, id, status, body)
			}
		}
	}
	handOver("ho_csat_old", true)
	verdict("ho_csat_old", "human", 1)
	// It arrived in the window before this one.
	if _, err := app.DB.Exec(t.Context(), `UPDATE handoffs SET created_at = now() - interval '30 hours' WHERE handoff_id = 'ho_csat_old'`); err != nil {
		t.Fatal(err)
	}
	handOver("ho_csat_1", true)
	handOver("ho_csat_2", true)
	handOver("ho_csat_3", false)
	verdict("ho_csat_1", "human", 5)
	verdict("ho_csat_2", "human", 2)
	verdict("ho_csat_1", "bot", 4)
	verdict("ho_csat_3", "bot", 1)

	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "sam@example.com")
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+"/dashboard?window=24h"), chromedp.WaitVisible(`[data-testid="csat-queues"]`)); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, ctx, axeSource(t), "/dashboard with the verdicts")
	for sel, want := range map[string]string{
		`[data-testid="csat-queues"] [data-name="billing_t2"] [data-testid="csat-human"]`:        "3.50 (2)",
		`[data-testid="csat-queues"] [data-name="billing_t2"] [data-testid="csat-human-before"]`: "1.00 (1)",
		`[data-testid="csat-queues"] [data-name="billing_t2"] [data-testid="csat-bot"]`:          "2.50 (2)",
		`[data-testid="csat-queues"] [data-name="billing_t2"] [data-testid="csat-bot-before"]`:   "— (0)",
		`[data-testid="csat-agents"] [data-testid="csat-row"] [data-testid="csat-human"]`:        "3.50 (2)",
		`[data-testid="csat-agents"] [data-testid="csat-row"] [data-testid="csat-human-before"]`: "1.00 (1)",
	} {
		if got := text(t, ctx, sel); got != want {
			t.Errorf("%s reads %q, want %q", sel, got, want)
		}
	}
	evalString(t, ctx, `(() => { const a = document.querySelector('[data-testid="csat-agents"] [data-testid="csat-human"] a[data-drill]'); a.click(); return a.textContent })()`)
	acrossPages(t, ctx, "the agent's verdicts opening /packages", `location.pathname === "/packages" && !!document.querySelector('[data-testid="search-count"]')`)
	if got := listed(t, ctx); !slices.Equal(got, []string{"ho_csat_2", "ho_csat_1"}) {
		t.Errorf("the agent's verdicts list %v", got)
	}
}

// The eval records of a package carry how it ended (its status, a reopen, the customer back within
// 7 days, the verdict on each leg) and a return's hand-back; the export filters on them, so a team
// trains on the replies that ended well.
func TestEvalRecordsCarryHowThePackageEnded(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	d.user(t, "sam@example.com", auth.RoleSupervisor)
	sam := d.client(t)
	d.login(t, sam, "sam@example.com")
	d.act(t, "accept", nil)
	d.act(t, "reply", url.Values{"text": {"Refunded."}})
	d.act(t, "return", url.Values{"reason": {"resolved_by_policy"}, "instruction": {"Do not escalate this charge again."}})
	expect(t, "csat", d.api(t, http.MethodPost, "/api/v1/handoffs/"+d.id+"/csat", d.key, map[string]any{"score": 5, "leg": "human", "comment": "Great"}), http.StatusCreated)

	records := func(query string) []map[string]any {
		t.Helper()
		var out []map[string]any
		for line := range strings.Lines(mustGet(t, sam, d.URL+"/evals/export.jsonl?"+query)) {
			var r map[string]any
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			out = append(out, r)
		}
		return out
	}
	all := records("")
	if len(all) != 2 {
		t.Fatalf("%d records, want the reply and the return: %v", len(all), all)
	}
	for _, r := range all {
		ended := r["ended"].(map[string]any)
		if ended["status"] != "returned_to_bot" || ended["reopened"] != false || ended["repeat_within_7d"] != false ||
			ended["csat_human"].(map[string]any)["score"] != 5.0 || ended["csat_bot"] != nil {
			t.Errorf("the %v record ended %v", r["kind"], ended)
		}
	}
	if back := records("kind=return_to_bot")[0]["hand_back"].(map[string]any); back["instruction"] != "Do not escalate this charge again." || back["last_seq"] != 1.0 {
		t.Errorf("the return's record hands back %v", back)
	}
	for query, want := range map[string]int{"csat_min=5": 2, "csat_min=5&kind=reply": 1, "ended=resolved": 0, "ended=returned_to_bot": 2,
		"reopened=true": 0, "repeat_within_7d=false": 2} {
		if got := len(records(query)); got != want {
			t.Errorf("export?%s: %d records, want %d", query, got, want)
		}
	}
	// The customer hands off again the next day: the package before was followed by a repeat.
	again := harbor(t, func(p map[string]any) { p["transfer_mode"], p["source_agent"] = "cold", "web-chat" })
	expect(t, "the customer is back", d.submit(t, d.key, again), http.StatusCreated)
	if got := len(records("repeat_within_7d=true")); got != 2 {
		t.Errorf("after the customer came back: %d records followed by a repeat, want 2", got)
	}
	if resp, body := get(t, sam, d.URL+"/evals/export.jsonl?csat_min=6"); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "csat_min") {
		t.Errorf("csat_min=6: %d %.200s", resp.StatusCode, body)
	}
}

// A package resolved, reopened by the customer and resolved again ended reopened: each of its
// records says so, and the export's ended and reopened filters pick its records and not those
// of a package resolved once.
func TestEvalRecordsOfAReopenedPackage(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	d.user(t, "sam@example.com", auth.RoleSupervisor)
	sam := d.client(t)
	d.login(t, sam, "sam@example.com")
	d.act(t, "accept", nil)
	d.act(t, "reply", url.Values{"text": {"Refunded."}})
	d.act(t, "resolve", url.Values{"code": {"solved"}})
	expect(t, "the customer writes again", d.post(t, map[string]any{"message_id": "again", "role": "user", "text": "It is not on my statement."}), http.StatusCreated)
	d.act(t, "accept", nil)
	d.act(t, "reply", url.Values{"text": {"It shows in 3-5 business days."}})
	d.act(t, "resolve", url.Values{"code": {"solved"}})

	// Another customer's package, resolved once.
	once := harbor(t, func(p map[string]any) {
		p["transfer_mode"] = "cold"
		p["contact"].(map[string]any)["id"] = "cust_once"
	})
	expect(t, "submit", d.submit(t, d.key, once), http.StatusCreated)
	onceID := once["handoff_id"].(string)
	for _, step := range []struct {
		action string
		form   url.Values
	}{{"accept", nil}, {"reply", url.Values{"text": {"Done."}}}, {"resolve", url.Values{"code": {"solved"}}}} {
		if status, _, body := postForm(t, d.agent, d.URL+"/handoffs/"+onceID+"/"+step.action, step.form); status != http.StatusSeeOther {
			t.Fatalf("%s: %d\n%.400s", step.action, status, body)
		}
	}

	records := func(query string) map[string][]map[string]any {
		t.Helper()
		out := map[string][]map[string]any{}
		for line := range strings.Lines(mustGet(t, sam, d.URL+"/evals/export.jsonl?"+query)) {
			var r map[string]any
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			out[r["handoff_id"].(string)] = append(out[r["handoff_id"].(string)], r)
		}
		return out
	}
	all := records("")
	var kinds []string
	for _, r := range all[d.id] {
		kinds = append(kinds, r["kind"].(string))
		if ended := r["ended"].(map[string]any); ended["status"] != "resolved" || ended["reopened"] != true || ended["repeat_within_7d"] != false {
			t.Errorf("the reopened package's %v record ended %v", r["kind"], ended)
		}
	}
	if want := []string{"reply", "resolve", "reply", "resolve"}; !slices.Equal(kinds, want) {
		t.Errorf("the reopened package's records are %v, want %v", kinds, want)
	}
	for _, r := range all[onceID] {
		if ended := r["ended"].(map[string]any); ended["status"] != "resolved" || ended["reopened"] != false {
			t.Errorf("the package resolved once: its %v record ended %v", r["kind"], ended)
		}
	}
	if len(all[onceID]) != 2 {
		t.Fatalf("the package resolved once has %d records, want its reply and its resolve", len(all[onceID]))
	}
	for query, want := range map[string][2]int{ // records of the reopened package, of the other
		"ended=resolved":                {4, 2},
		"ended=resolved&reopened=true":  {4, 0},
		"reopened=true&kind=resolve":    {2, 0},
		"ended=resolved&reopened=false": {0, 2},
		"ended=accepted":                {0, 0},
	} {
		got := records(query)
		if len(got[d.id]) != want[0] || len(got[onceID]) != want[1] {
			t.Errorf("export?%s: %d and %d records, want %d and %d", query, len(got[d.id]), len(got[onceID]), want[0], want[1])
		}
	}
}
