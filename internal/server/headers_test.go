package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/server"
)

// Every response carries the opener and permissions policies, and every answer behind login, where
// packages, contacts and queues are shown, tells caches not to keep it.
func TestSecurityAndCacheHeaders(t *testing.T) {
	t.Parallel()
	app := setup(t, "https://crm.example.com")
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sup@example.com", auth.RoleSupervisor)
	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	agent, supervisor, anonymous := app.client(t), app.client(t), app.client(t)
	app.login(t, agent, "dana@example.com")
	app.login(t, supervisor, "sup@example.com")

	type answer struct {
		what   string
		status int
		header http.Header
	}
	var answers []answer
	ask := func(c *http.Client, method, path, bearer string) answer {
		t.Helper()
		req, err := http.NewRequest(method, app.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		a := answer{what: method + " " + path, status: resp.StatusCode, header: resp.Header}
		answers = append(answers, a)
		return a
	}

	for _, page := range []struct {
		c      *http.Client
		method string
		path   string
		status int
	}{
		{agent, http.MethodGet, "/", http.StatusOK},
		{agent, http.MethodGet, "/queues/billing_t2", http.StatusOK},
		{agent, http.MethodGet, "/handoffs/" + id, http.StatusOK},
		{agent, http.MethodGet, "/sidebar/" + id, http.StatusOK},
		{supervisor, http.MethodGet, "/dashboard", http.StatusOK},
		{agent, http.MethodPost, "/handoffs/" + id + "/accept", http.StatusSeeOther},
		{agent, http.MethodGet, "/handoffs/ho_test_nowhere", http.StatusNotFound},
	} {
		a := ask(page.c, page.method, page.path, "")
		if a.status != page.status {
			t.Errorf("%s: %d, want %d", a.what, a.status, page.status)
		}
		if got := a.header.Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control %q, want no-store", a.what, got)
		}
	}
	ask(anonymous, http.MethodGet, "/login", "")
	ask(anonymous, http.MethodGet, "/healthz", "")
	ask(anonymous, http.MethodGet, "/static/css/app.css", "")
	ask(anonymous, http.MethodGet, "/no/such/page", "")
	ask(anonymous, http.MethodGet, "/api/openapi.yaml", "")
	ask(anonymous, http.MethodGet, "/api/v1/handoffs/"+id, key)
	ask(anonymous, http.MethodGet, "/api/v1/handoffs/"+id, "")

	// The opener policy leaves framing to the CSP: the sidebar stays embeddable by the CRM.
	sidebar := ask(agent, http.MethodGet, "/sidebar/"+id, "")
	if csp := sidebar.header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors https://crm.example.com;") ||
		sidebar.header.Get("X-Frame-Options") != "" || sidebar.header.Get("Cross-Origin-Embedder-Policy") != "" ||
		sidebar.header.Get("Cross-Origin-Resource-Policy") != "" {
		t.Errorf("the sidebar's headers would keep the CRM from framing it: %v", sidebar.header)
	}

	for _, a := range answers {
		if got := a.header.Get("Cross-Origin-Opener-Policy"); got != "same-origin" {
			t.Errorf("%s: Cross-Origin-Opener-Policy %q, want same-origin", a.what, got)
		}
		policy := a.header.Get("Permissions-Policy")
		for _, denied := range []string{"camera=()", "microphone=()", "geolocation=()", "payment=()", "usb=()"} {
			if !strings.Contains(policy, denied) {
				t.Errorf("%s: Permissions-Policy %q, want %s", a.what, policy, denied)
			}
		}
		if strings.Contains(policy, "autoplay") {
			t.Errorf("%s: Permissions-Policy %q denies autoplay, which the urgent tone needs", a.what, policy)
		}
	}
}

// A CRM page on another origin frames the sidebar, opener policy and all, and the agent sees the
// package in it.
func TestBrowserFramesTheSidebarInACRM(t *testing.T) {
	t.Parallel()
	var sidebar string
	crm := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = fmt.Fprintf(w, `<!doctype html><title>CRM</title><iframe id="desk" src="%s" width="600" height="800"></iframe>`, sidebar)
	}))
	app := setup(t, "http://"+crm.Listener.Addr().String())
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	pkg := harbor(t, nil)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	sidebar = app.URL + "/sidebar/" + pkg["handoff_id"].(string)
	crm.Start()
	t.Cleanup(crm.Close)

	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")
	if err := chromedp.Do(ctx, chromedp.Navigate(crm.URL), chromedp.WaitReady(`#desk`)); err != nil {
		t.Fatal(err)
	}
	frames, err := chromedp.Run(ctx, chromedp.Nodes(`#desk`))
	if err != nil {
		t.Fatal(err)
	}
	wait, cancel := context.WithTimeout(ctx, waitDeadline)
	defer cancel()
	shown, err := chromedp.Run(wait, chromedp.Text(`[data-testid="handoff"]`, chromedp.FromNode(frames[0])))
	if err != nil {
		t.Fatalf("the sidebar did not show in the CRM's iframe: %v", err)
	}
	if !strings.Contains(shown, "Duplicate charge $49.99") {
		t.Errorf("the framed sidebar shows %q, want the package", shown)
	}
}

// TestHSTSForAnHTTPSAddress: a desk whose BASE_URL is https tells browsers to use nothing else for
// a year, on every answer; preloading only when asked; a plain-http desk sends nothing.
func TestHSTSForAnHTTPSAddress(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cfg  server.Config
		want string
	}{
		{server.Config{BaseURL: "https://desk.example.com"}, "max-age=31536000"},
		{server.Config{BaseURL: "https://desk.example.com", HSTSPreload: true}, "max-age=31536000; includeSubDomains; preload"},
		{server.Config{}, ""},
	} {
		app := setupWith(t, c.cfg)
		for _, path := range []string{"/healthz", "/login", "/api/v1/handoffs", "/nowhere"} {
			resp, _ := get(t, app.client(t), app.URL+path)
			if got := resp.Header.Get("Strict-Transport-Security"); got != c.want {
				t.Errorf("BASE_URL %q, preload %v: GET %s sends %q, want %q", c.cfg.BaseURL, c.cfg.HSTSPreload, path, got, c.want)
			}
		}
	}
}
