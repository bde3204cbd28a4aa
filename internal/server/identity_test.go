package server_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// A look-alike of a user's address is refused at the login form, with the admin's own password,
// and by the admin console: the database's lower() used to fold "admİn" (U+0130) into "admin"
// and the Kelvin sign into k, which logged the look-alike in as the admin.
func TestLookAlikeEmailsDoNotLogIn(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "admin@example.com", auth.RoleAdmin)
	app.user(t, "kate@example.com", auth.RoleAgent)

	for _, email := range []string{"admİn@example.com", "ADMİN@example.com", "\u212Aate@example.com", "\uff4bate@example.com"} {
		c := app.client(t)
		got := fetch(t, c, http.MethodPost, app.URL+"/login", url.Values{"email": {email}, "password": {testPassword}})
		if got.status != http.StatusUnprocessableEntity || !strings.Contains(got.body, "could pass for another address") {
			t.Errorf("login as %q: %d, want 422 saying why:\n%s", email, got.status, got.body)
		}
		if name := who(t, app, c); name != "" {
			t.Errorf("login as %q is logged in as %s", email, name)
		}
	}
	app.login(t, app.client(t), "  Admin@EXAMPLE.com") // ASCII case and surrounding space still do not matter

	admin := app.client(t)
	app.login(t, admin, "admin@example.com")
	got := fetch(t, admin, http.MethodPost, app.URL+"/admin/users", url.Values{"email": {"adm\u0131n@example.com"}, "name": {"Mallory"},
		"role": {"admin"}, "password": {"long-enough"}})
	if got.status != http.StatusUnprocessableEntity || !strings.Contains(got.body, `data-testid="error-email"`) || !strings.Contains(got.body, "U+0131") {
		t.Errorf("the admin console creating a look-alike: %d, want 422 on the email field naming U+0131:\n%s", got.status, got.body)
	}
	got = fetch(t, admin, http.MethodPost, app.URL+"/admin/users", url.Values{"email": {" Erin@Example.COM"}, "name": {"Erin"},
		"role": {"agent"}, "password": {"long-enough"}})
	if got.status != http.StatusSeeOther {
		t.Fatalf("the admin console creating erin: %d:\n%s", got.status, got.body)
	}
	var stored string
	if err := app.DB.QueryRow(context.Background(), `SELECT email FROM users WHERE display_name = 'Erin'`).Scan(&stored); err != nil || stored != "erin@example.com" {
		t.Errorf("erin is stored as %q (%v), want erin@example.com", stored, err)
	}
}
