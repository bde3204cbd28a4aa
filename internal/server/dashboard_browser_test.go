package server_test

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
)

// searchIn types q into /packages' search box in the browser and returns the packages listed.
func searchIn(t *testing.T, ctx context.Context, base, q string) []string {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/packages"),
		chromedp.WaitVisible(`[data-testid="search-q"]`),
		chromedp.SendKeys(`[data-testid="search-q"]`, q),
		chromedp.Click(`[data-testid="search-submit"]`),
	); err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	// The page the search answers with, not the form's: its address carries the search.
	deadline := time.Now().Add(30 * time.Second)
	for {
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err == nil && strings.Contains(loc, "q=") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("search %q: the answer never came (%s, %v)", q, loc, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`[data-testid="search-results"], [data-testid="search-empty"]`)); err != nil {
		t.Fatalf("search %q: %v", q, err)
	}
	return listed(t, ctx)
}

// listed are the ids of the packages /packages lists in the browser, in its order.
func listed(t *testing.T, ctx context.Context) []string {
	t.Helper()
	ids, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('[data-testid="search-row"]')].map(r => r.dataset.id)`))
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// acrossPages waits until js is true in the page the browser shows, through the navigations a
// form's post and its redirect make (a poll inside one page ends with it).
func acrossPages(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](js))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			shown, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText`))
			t.Fatalf("waiting for %s: %v; the page shows %.2000s", what, err, shown)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// In Chromium: a supervisor finds a package by its contact's email; an agent of its queue, whose
// role sees its contacts masked, cannot find it by that email (and the page never shows it), but
// can by its id; an agent of another queue cannot find it at all, not even by its id. axe-core
// finds nothing serious on the page.
func TestBrowserSearchByContactEmail(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	app := setup(t)
	key := app.botKey(t, "s_bot", "s_billing", "s_sales")
	app.user(t, "dana@example.com", auth.RoleAgent, "s_billing")
	app.user(t, "eli@example.com", auth.RoleAgent, "s_sales")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET pii_min_role = 'supervisor' WHERE name = 's_billing'`); err != nil {
		t.Fatal(err)
	}
	pkg := harborFor(t, "s_billing").(map[string]any)
	pkg["transfer_mode"] = "cold"
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	id := pkg["handoff_id"].(string)
	email := pkg["contact"].(map[string]any)["email"].(string)

	sam := browser(t)
	browserLogin(t, sam, app.URL, "sam@example.com")
	if got := searchIn(t, sam, app.URL, email); !slices.Equal(got, []string{id}) {
		t.Errorf("the supervisor searching %s finds %v, want %s", email, got, id)
	}
	checkA11y(t, sam, axe, "/packages with a result")

	dana := browser(t)
	browserLogin(t, dana, app.URL, "dana@example.com")
	if got := searchIn(t, dana, app.URL, email); len(got) != 0 {
		t.Errorf("an agent who sees contacts masked finds %v by the contact's email, want nothing", got)
	}
	if shown := evalString(t, dana, `document.querySelector("main").innerText`); strings.Contains(shown, "Dana Whitfield") {
		t.Errorf("the agent's page shows the contact's name unmasked")
	}
	checkA11y(t, dana, axe, "/packages with nothing found")
	if got := searchIn(t, dana, app.URL, id); !slices.Equal(got, []string{id}) {
		t.Errorf("the agent of the queue searching its id finds %v, want it", got)
	}

	eli := browser(t)
	browserLogin(t, eli, app.URL, "eli@example.com")
	for _, q := range []string{id, email, "duplicate"} {
		if got := searchIn(t, eli, app.URL, q); len(got) != 0 {
			t.Errorf("an agent of another queue searching %q finds %v, want nothing", q, got)
		}
	}
}

// In Chromium: from the dashboard, clicking three figures (the repeat contacts, the returns for
// needs_more_info, what Ann handled) lands on /packages listing exactly those packages, counted as
// the figure said. axe-core finds nothing serious on the dashboard or the list.
func TestBrowserDrillDownFromTheDashboard(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	app, _ := drillDesk(t)
	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "sam@example.com")
	for _, c := range []struct {
		figure, link string
		want         []string
	}{
		// The repeat count is the first count of its row: "x% (<repeats> of <in>)".
		{"repeat contacts", `[data-testid="figure-repeat"] [data-testid="current"] a[data-drill]`, []string{"ho_drill_9"}},
		{"returned for needs_more_info", `[data-testid="returns"] [data-value="needs_more_info"] a[data-drill]`, []string{"ho_drill_4"}},
		{"handled by Ann", `[data-agent="ann@example.com"] a[data-drill]`, []string{"ho_drill_6", "ho_drill_4", "ho_drill_3"}},
	} {
		if err := chromedp.Do(ctx,
			chromedp.Navigate(app.URL+"/dashboard?window=24h"),
			chromedp.WaitVisible(`[data-testid="chart-in"]`),
		); err != nil {
			t.Fatal(err)
		}
		if c.figure == "repeat contacts" {
			checkA11y(t, ctx, axe, "/dashboard")
		}
		// Found and clicked in one step: the page's socket replaces the figures with fresh ones
		// as it connects, which a node looked up first may not outlive.
		shown := evalString(t, ctx, `(() => { const a = document.querySelector(`+jsString(c.link)+`); a.click(); return a.textContent })()`)
		acrossPages(t, ctx, c.figure+" opening /packages", `location.pathname === "/packages" && !!document.querySelector('[data-testid="search-count"]')`)
		if got := listed(t, ctx); !slices.Equal(got, c.want) {
			t.Errorf("%s (%s on the dashboard) lists %v, want %v", c.figure, shown, got, c.want)
		}
		if n := evalString(t, ctx, `document.querySelector('[data-testid="search-count"]').dataset.packages`); n != shown || n != strconv.Itoa(len(c.want)) {
			t.Errorf("%s: the dashboard says %s, /packages counts %s", c.figure, shown, n)
		}
	}
	checkA11y(t, ctx, axe, "/packages from a figure")
}

// In Chromium, three sessions: a supervisor reassigns Alex's package to Blake from the roster of
// the dashboard; Alex's open package page says Blake holds it, live, without a reload; Blake's "My
// work", open, lists it live; the roster shows Blake holding it. axe-core finds nothing serious on
// the roster with its controls.
func TestBrowserReassignFromTheRoster(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	app := setup(t)
	key := app.botKey(t, "r_bot", "r_billing")
	app.user(t, "alex@example.com", auth.RoleAgent, "r_billing")
	app.user(t, "blake@example.com", auth.RoleAgent, "r_billing")
	app.user(t, "sup@example.com", auth.RoleSupervisor)
	pkg := harborFor(t, "r_billing").(map[string]any)
	pkg["transfer_mode"] = "cold"
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	id := pkg["handoff_id"].(string)

	alex := browser(t)
	browserLogin(t, alex, app.URL, "alex@example.com")
	if err := chromedp.Do(alex, chromedp.Navigate(app.URL+"/handoffs/"+id), chromedp.Click(`[data-testid="accept"]`),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`), chromedp.WaitReady(`body[data-live="online"]`),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`)); err != nil {
		t.Fatalf("Alex accepts: %v", err)
	}
	blake := browser(t)
	browserLogin(t, blake, app.URL, "blake@example.com")
	if err := chromedp.Do(blake, chromedp.Navigate(app.URL+"/mine"), chromedp.WaitVisible(`[data-testid="mine-empty"]`),
		chromedp.WaitReady(`body[data-live="online"]`), chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`)); err != nil {
		t.Fatalf("Blake opens My work: %v", err)
	}

	sup := browser(t)
	browserLogin(t, sup, app.URL, "sup@example.com")
	row := `[data-testid="held-row"][data-id="` + id + `"]`
	if err := chromedp.Do(sup, chromedp.Navigate(app.URL+"/dashboard?window=24h"), chromedp.WaitVisible(row),
		chromedp.WaitReady(`body[data-live="online"]`)); err != nil {
		t.Fatalf("the roster: %v", err)
	}
	if holder := text(t, sup, row+` [data-testid="holder"]`); holder != "alex" {
		t.Errorf("the roster says %q holds it, want alex", holder)
	}
	options := evalString(t, sup, `[...document.querySelectorAll('`+row+` [data-testid="roster-reassign-to"] option')].map(o => o.value).join(",")`)
	if options != "blake@example.com" {
		t.Errorf("the roster offers %q, want Blake alone (Alex holds it; the supervisor works no queue)", options)
	}
	checkA11y(t, sup, axe, "/dashboard with a held package")
	// Chosen and sent in one step: the roster is replaced live as the others' pages come and go,
	// which a node looked up first may not outlive.
	if err := chromedp.Do(sup, chromedp.Evaluate[chromedp.Void](`(() => {
		window.beforeMove = true;
		const row = document.querySelector('`+row+`');
		row.querySelector('[data-testid="roster-reassign-to"]').value = "blake@example.com";
		row.querySelector('[data-testid="roster-reassign-button"]').click();
	})()`)); err != nil {
		t.Fatalf("reassign from the roster: %v", err)
	}
	acrossPages(t, sup, "the dashboard again, the roster showing Blake holding it",
		`!window.beforeMove && location.pathname === "/dashboard" && location.search.includes("window=24h") &&
			(document.querySelector('`+row+` [data-testid="holder"]') || {}).textContent === "blake"`)

	waitForJS(t, alex, "Alex's page says Blake holds the package, without a reload",
		`window.sameDocument && document.getElementById("actions-`+id+`").innerText.includes("blake holds this package") &&
			!document.querySelector('#actions-`+id+` [data-testid="resolve"]')`,
		`document.getElementById("actions-`+id+`").innerText`)
	waitForJS(t, blake, "Blake's My work lists the package, without a reload",
		`window.sameDocument && !!document.getElementById("mine-`+id+`") && document.getElementById("mine-count").textContent.trim() === "1"`,
		`document.getElementById("cards").innerText`)
}
