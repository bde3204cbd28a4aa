package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/sso"
)

// The single sign-on tests against mockoidc (sso_test.go), again against an OpenID Certified
// provider implementation (certifiedProvider), and what mockoidc cannot do: a person whose email
// changes at the provider, and ID tokens for another client.

// links is the desk's links to accounts at the provider, as "subject → email".
func links(t *testing.T, app *testApp) []string {
	t.Helper()
	rows, err := app.DB.Query(context.Background(), `SELECT l.subject || ' → ' || u.email FROM sso_identities l JOIN users u ON u.id = l.user_id ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	return got
}

func TestCertifiedSSOSignsInAndLinks(t *testing.T) {
	t.Parallel()
	idp := newCertifiedProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config()})
	app.user(t, "dana@example.com", auth.RoleAgent, "billing")

	idp.next(oidcUser{Subject: "248289761001", Email: "Dana@Example.com", Verified: true, Name: "Dana Scully"})
	c := app.client(t)
	got, _ := signIn(t, app, c, "/sso/start?next=/queues/billing", nil)
	if got.status != http.StatusSeeOther || got.location != "/queues/billing" {
		t.Fatalf("callback = %d to %q, want 303 to /queues/billing:\n%s", got.status, got.location, got.body)
	}
	if name := who(t, app, c); name != "dana" {
		t.Errorf("after single sign-on the desk shows %q, want dana", name)
	}
	asked := idp.authorizations()
	if len(asked) != 1 || asked[0].Get("code_challenge_method") != "S256" || asked[0].Get("response_type") != "code" {
		t.Errorf("the desk's authorization requests: %v, want one code flow with PKCE S256", asked)
	}
	if got := links(t, app); len(got) != 1 || got[0] != "248289761001 → dana@example.com" {
		t.Errorf("links %v, want the provider's subject linked to dana", got)
	}
}

func TestCertifiedSSORefusesAnUnverifiedEmail(t *testing.T) {
	t.Parallel()
	idp := newCertifiedProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config()})
	app.user(t, "dana@example.com", auth.RoleAgent)

	idp.person("dana@example.com", false)
	name, got := signedInAs(t, app, "/sso/start")
	if name != "" || got.status != http.StatusUnauthorized || !strings.Contains(got.body, "has not verified dana@example.com") {
		t.Errorf("an unverified email: signed in as %q, %d, want 401 saying why:\n%s", name, got.status, got.body)
	}
	if l := links(t, app); len(l) != 0 {
		t.Errorf("an unverified email made links %v", l)
	}
}

// A provider that vouches for a look-alike of a user's address (U+0130 for i) is refused: the
// desk used to find the user through lower(), which folds it to the ASCII address. Even with
// unknown emails made into agents, no account is made for it.
func TestCertifiedSSORefusesALookAlikeEmail(t *testing.T) {
	t.Parallel()
	idp := newCertifiedProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config()})
	app.user(t, "admin@example.com", auth.RoleAdmin)
	if err := access.New(app.DB, app.Auth).SetUnknownEmails(context.Background(), sso.CreateUnknown, 0); err != nil {
		t.Fatal(err)
	}

	for _, email := range []string{"admİn@example.com", "\u0430dmin@example.com"} {
		idp.person(email, true)
		name, got := signedInAs(t, app, "/sso/start")
		if name != "" || got.status != http.StatusForbidden || !strings.Contains(got.body, "could pass for another address") {
			t.Errorf("%q: signed in as %q, %d, want 403 saying why:\n%s", email, name, got.status, got.body)
		}
	}
	var users int
	if err := app.DB.QueryRow(context.Background(), `SELECT count(*) FROM users`).Scan(&users); err != nil || users != 1 {
		t.Errorf("%d users (%v), want the admin alone", users, err)
	}
	if l := links(t, app); len(l) != 0 {
		t.Errorf("a look-alike made links %v", l)
	}
}

// Once linked, a person is who their subject is: an email changed at the provider, even to
// another user's, signs them in as themselves; and the address they left, handed to someone
// else at the provider, does not sign that someone in as them.
func TestCertifiedSSOLinkedSubjectKeepsItsUser(t *testing.T) {
	t.Parallel()
	idp := newCertifiedProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config()})
	app.user(t, "dana@example.com", auth.RoleAgent)
	app.user(t, "erin@example.com", auth.RoleSupervisor)

	idp.next(oidcUser{Subject: "s-dana", Email: "dana@example.com", Verified: true})
	if name, got := signedInAs(t, app, "/sso/start"); name != "dana" {
		t.Fatalf("the first sign-in: %q, %d:\n%s", name, got.status, got.body)
	}

	idp.changeEmail("s-dana", "dana.scully@example.com")
	if name, got := signedInAs(t, app, "/sso/start"); name != "dana" {
		t.Errorf("after the provider changed the email to one no user has: %q, %d, want dana:\n%s", name, got.status, got.body)
	}
	idp.changeEmail("s-dana", "erin@example.com")
	if name, got := signedInAs(t, app, "/sso/start"); name != "dana" {
		t.Errorf("after the provider changed the email to erin's: %q, %d, want dana, never erin:\n%s", name, got.status, got.body)
	}

	idp.next(oidcUser{Subject: "s-newcomer", Email: "dana@example.com", Verified: true})
	name, got := signedInAs(t, app, "/sso/start")
	if name != "" || got.status != http.StatusForbidden || !strings.Contains(got.body, "is linked to another account at the identity provider") {
		t.Errorf("another subject with dana's old address: signed in as %q, %d, want 403 saying why:\n%s", name, got.status, got.body)
	}
	if got := links(t, app); len(got) != 1 || got[0] != "s-dana → dana@example.com" {
		t.Errorf("links %v, want dana's alone", got)
	}

	// Unlinked by an admin (the person's account at the provider was replaced), the next sign-in
	// by the verified address links again.
	dana, err := app.Auth.UserByEmail(context.Background(), "dana@example.com")
	if err != nil {
		t.Fatal(err)
	}
	if unlinked, err := access.New(app.DB, app.Auth).UnlinkSSO(context.Background(), dana.ID, 0); err != nil || !unlinked {
		t.Fatalf("unlink: %v, %v", unlinked, err)
	}
	if name, got := signedInAs(t, app, "/sso/start"); name != "dana" {
		t.Errorf("the new subject after the unlink: %q, %d, want dana:\n%s", name, got.status, got.body)
	}
}

// ID tokens the desk must not take: one whose audience names another client besides the desk
// (OpenID Connect Core 3.1.3.7: a client refuses audiences it does not trust; the certified
// provider always adds the client that asked, so a token without the desk at all cannot come from
// its token endpoint), and one that expired as it was made (a provider whose clock is behind).
func TestCertifiedSSORefusesBadIDTokens(t *testing.T) {
	t.Parallel()
	idp := newCertifiedProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config()})
	app.user(t, "dana@example.com", auth.RoleAgent)

	idp.person("dana@example.com", true)
	for _, c := range []struct {
		name     string
		audience []string
		lifetime time.Duration
		want     string
	}{
		{"for another audience", []string{"another-app"}, 5 * time.Minute, "audience also names another-app"},
		{"expired", nil, -time.Minute, "ID token expired"},
	} {
		idp.mint(c.audience, c.lifetime)
		name, got := signedInAs(t, app, "/sso/start")
		if name != "" || got.status != http.StatusUnauthorized || !strings.Contains(got.body, c.want) {
			t.Errorf("an ID token %s: signed in as %q, %d, want 401 saying %q:\n%s", c.name, name, got.status, c.want, got.body)
		}
	}
	if l := links(t, app); len(l) != 0 {
		t.Errorf("refused tokens made links %v", l)
	}
}
