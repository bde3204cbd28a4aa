package server_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/server"
)

// figure reads one figure's "this window" cell from the dashboard's HTML, as text.
func figure(t *testing.T, html, id string) string {
	t.Helper()
	_, row, ok := strings.Cut(html, `data-testid="figure-`+id+`"`)
	if !ok {
		t.Fatalf("no figure %s in:\n%s", id, html)
	}
	_, cell, _ := strings.Cut(row, `data-testid="current">`)
	cell, _, _ = strings.Cut(cell, "</td>")
	return strings.TrimSpace(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(cell, ""))
}

// submitFor submits a package of a contact of its own.
func (a *testApp) submitFor(t *testing.T, key, contact string) {
	t.Helper()
	expect(t, "submit for "+contact, a.submit(t, key, harbor(t, func(p map[string]any) {
		p["contact"].(map[string]any)["id"] = contact
	})), http.StatusCreated)
}

func TestDashboardShowsTheFiguresToSupervisorsOnly(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	agent, sup := app.client(t), app.client(t)
	app.login(t, agent, "dana@example.com")
	app.login(t, sup, "sam@example.com")
	app.submitFor(t, key, "cust_a")
	app.submitFor(t, key, "cust_b")

	if resp, _ := get(t, agent, app.URL+"/dashboard"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("an agent's /dashboard: %d, want 403", resp.StatusCode)
	}
	resp, page := get(t, sup, app.URL+"/dashboard?window=24h&queue=billing_t2")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("supervisor's /dashboard: %d\n%s", resp.StatusCode, page)
	}
	if got := figure(t, page, "in"); got != "2" {
		t.Errorf("packages in %q, want 2", got)
	}
	// Nobody has worked them yet: no accept to time, and neither is a repeat contact.
	if got := figure(t, page, "accept"); got != "— (0)" {
		t.Errorf("time to accept %q, want — (0)", got)
	}
	if got := figure(t, page, "decision"); got != "— (0)" {
		t.Errorf("approval time to decision %q, want — (0): no request decided", got)
	}
	if got := figure(t, page, "repeat"); got != "0.0% (0 of 2)" {
		t.Errorf("repeat contacts %q, want 0.0%% (0 of 2)", got)
	}
	for _, want := range []string{`data-testid="chart-in"`, `<title>Packages in per hour</title>`, `data-queue="billing_t2"`,
		`id="def-decision"`, `id="def-repeat"`, `data-testid="roster"`, `data-dashboard="queue=billing_t2&amp;window=24h"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the dashboard lacks %s", want)
		}
	}
	for query, param := range map[string]string{"window=1w": "window", "queue=nope": "queue"} {
		resp, body := get(t, sup, app.URL+"/dashboard?"+query)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, param) {
			t.Errorf("/dashboard?%s: %d %s, want 400 naming %s", query, resp.StatusCode, body, param)
		}
	}
}

// Packages arriving one after another move the figures once: the socket sends them
// DashboardEvery after the first change, with every change of that time in one frame, and then
// nothing more while nothing changes.
func TestDashboardFiguresAreCoalescedOnTheSocket(t *testing.T) {
	t.Parallel()
	app := setupWith(t, server.Config{DashboardEvery: 2 * time.Second})
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	sup, agent := app.client(t), app.client(t)
	app.login(t, sup, "sam@example.com")
	app.login(t, agent, "dana@example.com")
	if _, resp, err := app.dial(t, sup, "dashboard_window=24h", ""); err == nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("dashboard figures without the roster: %v, want 400", err)
	}
	if _, resp, err := app.dial(t, sup, "roster=true&dashboard_window=1w", ""); err == nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a socket for window 1w: %v, want 400", err)
	}
	if _, resp, err := app.dial(t, agent, "roster=true&dashboard_window=24h", ""); err == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("an agent's dashboard socket: %v, want 403", err)
	}
	conn, _, err := app.dial(t, sup, "roster=true&dashboard_window=24h", "")
	if err != nil {
		t.Fatal(err)
	}
	hello := readFrame(t, conn)
	const n = 4
	for i := range n {
		app.submitFor(t, key, fmt.Sprintf("cust_%d", i))
	}
	var figures []string
	rosters := 0
	deadline := time.Now().Add(30 * time.Second)
	for len(figures) == 0 && time.Now().Before(deadline) {
		for _, f := range readFrame(t, conn).Fragments {
			switch f.Target {
			case "dashboard-figures":
				figures = append(figures, f.HTML)
			case "roster":
				rosters++
			}
		}
	}
	if len(figures) == 0 {
		t.Fatal("no dashboard figures within 30 s of the changes")
	}
	if got := figure(t, figures[0], "in"); got != fmt.Sprint(n) {
		t.Errorf("the first figures frame shows %s packages in, want all %d: the changes were not coalesced", got, n)
	}
	if rosters == 0 {
		t.Error("no roster frame: the roster stopped following the changes")
	}
	// Nothing changes any more: no more figures, however long the socket waits (here, two
	// periods).
	_ = conn.SetReadDeadline(time.Now().Add(4 * time.Second))
	for {
		var f wsFrame
		err := conn.ReadJSON(&f)
		if err != nil {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("reading after the figures: %v", err)
			}
			break
		}
		for _, fr := range f.Fragments {
			if fr.Target == "dashboard-figures" {
				t.Fatal("a second figures frame without any change since the first")
			}
		}
	}
	// A browser coming back from before the changes gets the figures anew with its catch-up.
	again, _, err := app.dial(t, sup, "roster=true&dashboard_window=24h&since="+url.QueryEscape(hello.Mark), "")
	if err != nil {
		t.Fatal(err)
	}
	if got := figure(t, readUntil(t, again, "dashboard-figures"), "in"); got != fmt.Sprint(n) {
		t.Errorf("figures after a reconnect show %s packages in, want %d", got, n)
	}
}

// The page's script opens its socket with the dashboard's window and queue, and puts the figures
// the socket sends in place.
func TestBrowserDashboardFollowsTheDesk(t *testing.T) {
	t.Parallel()
	app := setupWith(t, server.Config{DashboardEvery: time.Second})
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	app.submitFor(t, key, "cust_before")
	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "sam@example.com")
	const in = `[data-testid="figure-in"] [data-testid="current"]`
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+"/dashboard?window=24h&queue=billing_t2"),
		chromedp.WaitVisible(`body[data-live="online"]`)); err != nil {
		t.Fatal(err)
	}
	if got := text(t, ctx, in); got != "1" {
		t.Fatalf("packages in before: %q, want 1", got)
	}
	app.submitFor(t, key, "cust_after")
	wait, cancel := context.WithTimeout(ctx, waitDeadline)
	defer cancel()
	if err := chromedp.Do(wait, chromedp.Poll[chromedp.Void](`document.querySelector('`+in+`').innerText.trim() === "2"`, pollEvery)); err != nil {
		t.Fatalf("the figures never showed the second package (now %q): %v", text(t, ctx, in), err)
	}
}
