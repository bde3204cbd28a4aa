package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// A supervisor reassigns Alex's package to Blake from the package page: Alex's open page says
// Blake holds it now, live, without its actions; the bot's webhook and the audit name the move;
// a refusal is the package page with the status and the cause.
func TestReassignFromThePackagePage(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "r_bot", "r_billing")
	app.user(t, "alex@example.com", auth.RoleAgent, "r_billing")
	app.user(t, "blake@example.com", auth.RoleAgent, "r_billing")
	app.user(t, "sales@example.com", auth.RoleAgent)
	app.user(t, "sup@example.com", auth.RoleSupervisor)
	alex, sup := app.client(t), app.client(t)
	app.login(t, alex, "alex@example.com")
	app.login(t, sup, "sup@example.com")
	p := harborFor(t, "r_billing").(map[string]any)
	p["transfer_mode"] = "cold"
	expect(t, "submit", app.submit(t, key, p), http.StatusCreated)
	id := p["handoff_id"].(string)
	if status, _, body := postForm(t, alex, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d %.300s", status, body)
	}
	_, page := get(t, sup, app.URL+"/handoffs/"+id)
	if !strings.Contains(page, `data-testid="reassign-form"`) || !strings.Contains(page, `value="blake@example.com"`) ||
		strings.Contains(page, `<option value="alex@example.com"`) {
		t.Fatalf("the supervisor's page offers no reassignment to Blake alone:\n%.3000s", page)
	}
	conn, _ := app.dialed(t, alex, "handoff="+id)

	status, _, body := postForm(t, sup, app.URL+"/handoffs/"+id+"/reassign", url.Values{"to": {"sales@example.com"}})
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "sales does not work the queue r_billing") {
		t.Fatalf("reassign to a stranger: %d, want 422 naming why\n%.2000s", status, body)
	}
	if status, loc, body := postForm(t, sup, app.URL+"/handoffs/"+id+"/reassign", url.Values{"to": {"blake@example.com"}}); status != http.StatusSeeOther ||
		loc != "/handoffs/"+id {
		t.Fatalf("reassign: %d %s %.300s", status, loc, body)
	}
	// A frame of the accept may still come first (the hub delivers at least once, from the mark
	// the socket opened at): the reassignment's is the one that says who holds it now.
	actions := readUntil(t, conn, "actions-"+id)
	for i := 0; i < 10 && !strings.Contains(actions, "blake holds this package"); i++ {
		actions = readUntil(t, conn, "actions-"+id)
	}
	if !strings.Contains(actions, "blake holds this package") || strings.Contains(actions, `data-testid="resolve"`) {
		t.Fatalf("Alex's page, live: %s", actions)
	}
	var assignee string
	if err := app.DB.QueryRow(t.Context(), `SELECT payload->>'assignee' FROM webhook_outbox WHERE handoff_id = $1 AND event = 'reassigned'`, id).
		Scan(&assignee); err != nil || assignee != "blake" {
		t.Fatalf("the bot's webhook names %q (%v), want blake", assignee, err)
	}
	_, audit := get(t, sup, app.URL+"/audit?kind=reassigned&package="+id)
	if !strings.Contains(audit, "sup@example.com") || !strings.Contains(audit, "blake") {
		t.Fatalf("the audit does not show the reassignment:\n%.3000s", audit)
	}
	if status, _, _ := postForm(t, alex, app.URL+"/handoffs/"+id+"/resolve", url.Values{"code": {"solved"}}); status != http.StatusForbidden {
		t.Fatalf("Alex resolving Blake's package: %d, want 403", status)
	}
}

// From the dashboard's roster: the supervisor's page lists the held package with a select of the
// queue's other members and a take-over; the reassignment goes back to the page the form names;
// Blake's "My work", open on a socket, gets the package's row and the count of what he holds; the
// timeline says who moved it from whom to whom, and a take-over; a refusal says why with its
// status.
func TestReassignFromTheRoster(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "r_bot", "r_billing")
	app.user(t, "alex@example.com", auth.RoleAgent, "r_billing")
	app.user(t, "blake@example.com", auth.RoleAgent, "r_billing")
	app.user(t, "sup@example.com", auth.RoleSupervisor)
	alex, blake, sup := app.client(t), app.client(t), app.client(t)
	app.login(t, alex, "alex@example.com")
	app.login(t, blake, "blake@example.com")
	app.login(t, sup, "sup@example.com")
	p := harborFor(t, "r_billing").(map[string]any)
	p["transfer_mode"] = "cold"
	expect(t, "submit", app.submit(t, key, p), http.StatusCreated)
	id := p["handoff_id"].(string)
	if status, _, body := postForm(t, alex, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d %.300s", status, body)
	}
	_, page := get(t, sup, app.URL+"/dashboard?window=24h")
	row := elementText(page, `data-testid="held-row" data-id="`+id+`"`)
	if !strings.HasPrefix(row, id+" r_billing alex ") || !strings.Contains(page, `<option value="blake@example.com" selected>blake · room for 3</option>`) ||
		!strings.Contains(page, `name="to" value="sup@example.com"`) {
		t.Fatalf("the roster's held row %q lacks Blake as a choice or the take-over:\n%.4000s", row, page)
	}
	conn, _ := app.dialed(t, blake, "mine=true")

	if status, loc, body := postForm(t, sup, app.URL+"/handoffs/"+id+"/reassign", url.Values{"to": {"blake@example.com"}, "next": {"/dashboard?window=24h"}}); status != http.StatusSeeOther ||
		loc != "/dashboard?window=24h" {
		t.Fatalf("reassign from the roster: %d %s %.300s", status, loc, body)
	}
	if got := readUntil(t, conn, "mine-"+id); !strings.Contains(got, id) {
		t.Errorf("Blake's My work receives %s", got)
	}
	_, page = get(t, sup, app.URL+"/dashboard?window=24h")
	if row := elementText(page, `data-testid="held-row" data-id="`+id+`"`); !strings.HasPrefix(row, id+" r_billing blake ") {
		t.Errorf("the roster's row after: %q, want Blake holding it", row)
	}
	if _, pkg := get(t, blake, app.URL+"/handoffs/"+id); !strings.Contains(pkg, "Reassigned by sup from alex to blake") {
		t.Errorf("the package's timeline does not say who moved it from whom to whom:\n%.3000s", pkg)
	}
	if status, _, body := postForm(t, sup, app.URL+"/handoffs/"+id+"/reassign", url.Values{"to": {"sup@example.com"}, "next": {"/dashboard"}}); status != http.StatusSeeOther {
		t.Fatalf("take over: %d %.300s", status, body)
	}
	if _, pkg := get(t, sup, app.URL+"/handoffs/"+id); !strings.Contains(pkg, "Taken over by sup from blake") {
		t.Errorf("the package's timeline does not say the supervisor took it over")
	}
	if status, _, body := postForm(t, sup, app.URL+"/handoffs/"+id+"/reassign", url.Values{"to": {"sup@example.com"}, "next": {"/dashboard"}}); status != http.StatusConflict ||
		!strings.Contains(body, "sup already holds "+id) {
		t.Errorf("reassign to its holder: %d, want 409 saying so\n%.1000s", status, body)
	}
}
