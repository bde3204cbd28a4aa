package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// TestNamesRenderIsolated: a contact's name and a bot's name, in any script, are isolated from the
// text around them (<bdi>) wherever a page shows them, so a right-to-left name never reorders the
// page around it.
func TestNamesRenderIsolated(t *testing.T) {
	t.Parallel()
	app := setup(t)
	const name, bot = "دانا ويتفيلد", "بوت-الدعم"
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "sup@example.com", auth.RoleSupervisor)
	sup := app.client(t)
	app.login(t, sup, "sup@example.com")
	pkg := harbor(t, func(p map[string]any) {
		p["contact"].(map[string]any)["display_name"] = name
		p["source_agent"] = bot
	})
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	for path, wants := range map[string][]string{
		"/handoffs/" + id:    {`data-testid="contact-name">` + name + `</bdi>`, `<bdi>` + bot + `</bdi>`},
		"/queues/billing_t2": {`<bdi data-testid="contact">` + name + `</bdi>`},
		"/packages?q=" + id:  {`<bdi>` + name + `</bdi>`, `<bdi>` + bot + `</bdi>`},
	} {
		resp, body := get(t, sup, app.URL+path)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d", path, resp.StatusCode)
		}
		for _, want := range wants {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s lacks %s", path, want)
			}
		}
	}
}

// TestFaviconOnEveryPage: pages name the desk's icon, which is served, and /favicon.ico leads to
// it: no page load ends in a 404 for its icon.
func TestFaviconOnEveryPage(t *testing.T) {
	t.Parallel()
	app := setup(t)
	c := app.client(t)
	const link = `<link rel="icon" type="image/svg+xml" href="/static/img/favicon.svg">`
	if _, page := get(t, c, app.URL+"/login"); !strings.Contains(page, link) {
		t.Errorf("the login page lacks %s", link)
	}
	resp, body := get(t, c, app.URL+"/static/img/favicon.svg")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" || !strings.HasPrefix(body, "<svg") {
		t.Errorf("the icon: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if resp, _ := get(t, c, app.URL+"/favicon.ico"); resp.StatusCode != http.StatusMovedPermanently ||
		resp.Header.Get("Location") != "/static/img/favicon.svg" {
		t.Errorf("/favicon.ico: %d to %q, want 301 to the icon", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestNoPhantomPhone: an agent below the queue's PII role is shown no masked phone for a contact
// who gave none.
func TestNoPhantomPhone(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET pii_min_role = 'supervisor'`); err != nil {
		t.Fatal(err)
	}
	dana := app.client(t)
	app.login(t, dana, "dana@example.com")
	pkg := harbor(t, func(p map[string]any) { delete(p["contact"].(map[string]any), "phone") })
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	_, page := get(t, dana, app.URL+"/handoffs/"+id)
	if !strings.Contains(page, `data-testid="contact-phone"></span>`) {
		_, rest, _ := strings.Cut(page, `data-testid="contact-phone"`)
		t.Errorf("the contact without a phone shows one: %.60s", rest)
	}
}

// TestOneNameForOneBot: the package's page names its bot once, as the package does
// (source_agent), in the side panel and in the timeline alike, not by the key it used.
func TestOneNameForOneBot(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "key_of_the_swarm", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	dana := app.client(t)
	app.login(t, dana, "dana@example.com")
	pkg := harbor(t, func(p map[string]any) { p["source_agent"] = "harbor-bot" })
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	_, page := get(t, dana, app.URL+"/handoffs/"+id)
	if !strings.Contains(page, "<bdi>harbor-bot</bdi> (") || !strings.Contains(page, "Handed over by the bot harbor-bot to billing_t2") ||
		strings.Contains(page, "key_of_the_swarm") {
		t.Errorf("the page names the bot otherwise than harbor-bot:\n%s", shownText(page))
	}
}
