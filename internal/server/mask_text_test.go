package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// The free text of a package names the customer only to receivers who may see PII: on the
// package page, in the sidebar, on queue cards, in websocket frames and in notes.
func TestFreeTextMasksTheContactForAgents(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	agent, supervisor := app.client(t), app.client(t)
	app.login(t, agent, "bea@example.com")
	app.login(t, supervisor, "sam@example.com")
	socket, _, err := app.dial(t, agent, "queues=billing_t2", "")
	if err != nil {
		t.Fatal(err)
	}
	readFrame(t, socket) // hello

	pkg := harbor(t, func(p map[string]any) {
		p["problem_statement"] = "Dana Whitfield was charged twice; call back on (415) 555-0134."
	})
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	if status, _, body := postForm(t, supervisor, app.URL+"/handoffs/"+id+"/notes", url.Values{"text": {"DANA prefers email: Dana.Whitfield@example.com"}}); status != http.StatusSeeOther {
		t.Fatalf("the supervisor's note: %d\n%.300s", status, body)
	}

	leaks := []string{"Dana", "DANA", "Whitfield", "dana.whitfield", "555-0134"}
	noLeak := func(what, html string, want ...string) {
		t.Helper()
		for _, leak := range leaks {
			if strings.Contains(html, leak) {
				t.Errorf("%s shows the agent %q:\n%s", what, leak, html)
			}
		}
		for _, w := range want {
			if !strings.Contains(html, w) {
				t.Errorf("%s lacks %q:\n%s", what, w, html)
			}
		}
	}
	noLeak("the card pushed on the websocket", readUntil(t, socket, "card-"+id), "D. W. was charged twice; call back on •••34.")
	_, queuePage := get(t, agent, app.URL+"/queues/billing_t2")
	noLeak("the queue page", queuePage, "D. W. was charged twice")
	for _, path := range []string{"/handoffs/", "/sidebar/"} {
		resp, page := get(t, agent, app.URL+path+id)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d", path, resp.StatusCode)
		}
		noLeak(path, page, "Hi D., I can see two charges", "D. prefers email: •••@example.com")
	}

	// A bot that vouches for its text is trusted with it on the card as on the page, and the
	// contact stays masked.
	vouched := harbor(t, func(p map[string]any) {
		p["contact"].(map[string]any)["id"] = "cust_vouched"
		p["problem_statement"] = "Whitfield Bank's transfer failed."
		p["privacy_flags"] = map[string]bool{"pii_redacted_in_summary": true}
	})
	expect(t, "submit a vouched package", app.submit(t, key, vouched), http.StatusCreated)
	_, queuePage = get(t, agent, app.URL+"/queues/billing_t2")
	if !strings.Contains(queuePage, "Whitfield Bank&#39;s transfer failed.") {
		t.Errorf("the card of a package whose bot vouched for its text masks it anyway:\n%s", queuePage)
	}

	_, page := get(t, supervisor, app.URL+"/handoffs/"+id)
	for _, want := range []string{"Hi Dana, I can see two charges", "Dana Whitfield was charged twice; call back on (415) 555-0134.",
		"DANA prefers email: Dana.Whitfield@example.com"} {
		if !strings.Contains(page, want) {
			t.Errorf("the supervisor, who may see PII, lacks %q", want)
		}
	}
}
