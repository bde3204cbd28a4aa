package server_test

import (
	"context"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
)

// axePath is axe-core as `npm install` (make generate, which CI runs first) puts it, at the
// version package.json pins.
const axePath = "../../node_modules/axe-core/axe.min.js"

// axeViolation is one rule axe-core found broken, with the elements that break it.
type axeViolation struct {
	ID, Impact, Help string
	Nodes            []struct{ Target []any }
}

// axeSource reads axe-core, or fails the test saying how to get it.
func axeSource(t *testing.T) string {
	t.Helper()
	source, err := os.ReadFile(axePath)
	if err != nil {
		t.Fatalf("axe-core is missing: run `npm install` (make generate does): %v", err)
	}
	return string(source)
}

// checkA11y runs axe-core on the page the browser shows and fails the test on each serious or
// critical violation.
func checkA11y(t *testing.T, ctx context.Context, axe, page string) {
	t.Helper()
	violations, err := chromedp.Run(ctx, chromedp.Evaluate[[]axeViolation](axe+`;
		axe.run(document, {resultTypes: ["violations"]}).then(r => r.violations.map(v => ({
			id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => ({target: n.target})),
		})))`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("%s: axe-core: %v", page, err)
	}
	for _, v := range violations {
		if v.Impact == "serious" || v.Impact == "critical" {
			var where []string
			for _, n := range v.Nodes {
				for _, target := range n.Target {
					if s, ok := target.(string); ok {
						where = append(where, s)
					}
				}
			}
			t.Errorf("%s: %s violation %s (%s) at %s", page, v.Impact, v.ID, v.Help, strings.Join(where, ", "))
		}
	}
}

// axe-core finds no serious or critical violation on the queue page (with a repeat card), the
// package view with the co-pilot editor, the sidebar, My work, the package view after a note, a repeat contact's package with its earlier
// handoffs, /evals and /dashboard.
func TestBrowserAccessibility(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor, "billing_t2")
	queued, worked := harbor(t, nil), harbor(t, func(p map[string]any) {
		p["handoff_id"] = "ho_a11y_worked"
		p["contact"].(map[string]any)["id"] = "cust_a11y"
	})
	expect(t, "submit", app.submit(t, key, queued), http.StatusCreated)
	expect(t, "submit", app.submit(t, key, worked), http.StatusCreated)
	// A reply sent and the package resolved, so that /evals has a chart, tags and a worst edit.
	dana := app.client(t)
	app.login(t, dana, "dana@example.com")
	base := app.URL + "/handoffs/ho_a11y_worked"
	for _, step := range []struct {
		path string
		form url.Values
	}{
		{"/accept", nil},
		{"/reply", url.Values{"text": {"Hi, the duplicate charge is reversed."}, "tags": {"tone"}}},
		{"/resolve", url.Values{"code": {"refunded"}}},
	} {
		if status, _, body := postForm(t, dana, base+step.path, step.form); status != http.StatusSeeOther {
			t.Fatalf("%s: %d\n%.300s", step.path, status, body)
		}
	}
	id := queued["handoff_id"].(string)
	// The same customer again, from another bot (the intake guard refuses the same one within 30
	// minutes): its card says repeat, and its view lists the package just resolved.
	repeat := harbor(t, func(p map[string]any) {
		p["handoff_id"], p["source_agent"] = "ho_a11y_repeat", "voice-support"
		p["contact"].(map[string]any)["id"] = "cust_a11y"
	})
	expect(t, "submit", app.submit(t, key, repeat), http.StatusCreated)

	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")
	openQueue(t, ctx, app.URL, "billing_t2")
	checkA11y(t, ctx, axe, "the queue page")
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+"/handoffs/"+id), chromedp.Click(`[data-testid="accept"]`),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`), chromedp.SendKeys(`#reply-text`, " Anything else?"),
		chromedp.WaitVisible(`#reply-diff ins`)); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, ctx, axe, "the package view with the editor and its diff")
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+"/sidebar/"+id), chromedp.WaitVisible(`[data-testid="action-bar"]`)); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, ctx, axe, "the sidebar")
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+"/mine"), chromedp.WaitVisible(`[data-testid="mine-row"]`)); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, ctx, axe, "My work")
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+"/handoffs/"+id),
		chromedp.SendKeys(`[data-testid="note-text"]`, "Customer prefers email."), chromedp.Click(`[data-testid="add-note"]`),
		chromedp.WaitVisible(`[data-testid="timeline-status"]`)); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, ctx, axe, "the package view after a note")
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+"/handoffs/ho_a11y_repeat"), chromedp.WaitVisible(`[data-testid="earlier"]`)); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, ctx, axe, "the package view of a repeat contact, with the earlier handoffs")

	sup := browser(t)
	browserLogin(t, sup, app.URL, "sam@example.com")
	if err := chromedp.Do(sup, chromedp.Navigate(app.URL+"/evals"), chromedp.WaitVisible(`[data-testid="worst-edit"]`)); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, sup, axe, "/evals")
	if err := chromedp.Do(sup, chromedp.Click(`[data-testid="worst-edit"] a`), chromedp.WaitVisible(`[data-testid="final"]`)); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, sup, axe, "the side-by-side diff")
	if err := chromedp.Do(sup, chromedp.Navigate(app.URL+"/audit?package="+id), chromedp.WaitVisible(`[data-testid="pii-views"]`)); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, sup, axe, "/audit, one package's trail")
	if err := chromedp.Do(sup, chromedp.Navigate(app.URL+"/audit?since=yesterday&kind=queued"), chromedp.WaitVisible(`[data-testid="filter-error-since"]`)); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, sup, axe, "/audit with a refused filter")
	if err := chromedp.Do(sup, chromedp.Navigate(app.URL+"/dashboard?window=24h"), chromedp.WaitVisible(`[data-testid="chart-in"]`)); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, sup, axe, "/dashboard")
}
