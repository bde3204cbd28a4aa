package main

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

var secretLine = regexp.MustCompile(`webhook secret: (whsec_\S+)`)

// `web apikey rotate` prints the new secret once and keeps the old one signing for the overlap;
// `web user add`, `web user sso-only` and `web sso unknown-emails` change what the database says
// and log it.
func TestSSOAndRotationCommands(t *testing.T) {
	t.Parallel()
	getenv := env(t)
	must := func(want string, args ...string) string {
		t.Helper()
		out, err := runCommand(t, getenv, args...)
		if err != nil || !strings.Contains(out, want) {
			t.Fatalf("web %s: %v, printed %q, want it to contain %q", strings.Join(args, " "), err, out, want)
		}
		return out
	}
	must("queue billing_t2 added", "queue", "add", "--name", "billing_t2")
	first := secretLine.FindStringSubmatch(must("webhook secret: whsec_", "apikey", "add", "--name", "tier1", "--queues", "billing_t2"))[1]
	rotated := secretLine.FindStringSubmatch(must("the old secret also signs until", "apikey", "rotate", "--name", "tier1", "--overlap", "2h"))[1]
	must("the old secret no longer signs", "apikey", "rotate", "--name", "tier1", "--overlap", "0s")
	must("user dana@example.com (agent) added", "user", "add", "--email", "dana@example.com", "--name", "Dana", "--role", "agent", "--sso-only")
	must("user erin@example.com (agent) added", "user", "add", "--email", "erin@example.com", "--name", "Erin", "--role", "agent", "--password", "long-enough")
	must("user erin@example.com signs in with single sign-on only", "user", "sso-only", "--email", "erin@example.com")
	must("user dana@example.com may log in with a password again", "user", "sso-only", "--email", "dana@example.com", "--off")
	must("verified emails that no user has become agents with no queues", "sso", "unknown-emails", "create")

	db, err := pgx.Connect(context.Background(), getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	var secret string
	var previous *string
	if err := db.QueryRow(t.Context(), `SELECT webhook_secret, webhook_secret_previous FROM api_keys WHERE name = 'tier1'`).Scan(&secret, &previous); err != nil {
		t.Fatal(err)
	}
	if secret == first || secret == rotated || previous != nil {
		t.Errorf("after a rotation without overlap the key holds a printed older secret or keeps one: %q, %v", secret, previous)
	}
	var rotations int
	if err := db.QueryRow(t.Context(), `SELECT count(*) FROM events WHERE kind = 'webhook_secret_rotated'`).Scan(&rotations); err != nil || rotations != 2 {
		t.Errorf("%d rotations logged (%v), want 2", rotations, err)
	}
	var erin, dana bool
	if err := db.QueryRow(t.Context(), `SELECT
		(SELECT password_login FROM users WHERE email = 'erin@example.com'),
		(SELECT password_login FROM users WHERE email = 'dana@example.com')`).Scan(&erin, &dana); err != nil || erin || !dana {
		t.Errorf("password login: erin %v, dana %v (%v); want off, on", erin, dana, err)
	}
	var policy string
	if err := db.QueryRow(t.Context(), `SELECT unknown_emails FROM sso_settings`).Scan(&policy); err != nil || policy != "create" {
		t.Errorf("unknown emails = %q (%v), want create", policy, err)
	}
	// Each change is in the log with its before → after, as an admin's in /admin is.
	var created int
	var ssoOnly, settings string
	if err := db.QueryRow(t.Context(), `SELECT
		(SELECT count(*) FROM events WHERE kind = 'user_created' AND actor_user IS NULL),
		(SELECT string_agg(u.email || ' ' || (e.detail->'sso_only')::text, '; ' ORDER BY e.seq)
			FROM events e JOIN users u ON u.id = e.subject_user WHERE e.kind = 'user_changed'),
		(SELECT string_agg((detail->'unknown_emails')::text, '; ' ORDER BY seq) FROM events WHERE kind = 'sso_settings_changed')`).
		Scan(&created, &ssoOnly, &settings); err != nil {
		t.Fatal(err)
	}
	if created != 2 {
		t.Errorf("%d user_created rows by the command line, want 2", created)
	}
	if want := "erin@example.com [false, true]; dana@example.com [true, false]"; ssoOnly != want {
		t.Errorf("SSO-only changes logged as %q, want %q", ssoOnly, want)
	}
	if want := `["refuse", "create"]`; settings != want {
		t.Errorf("the unknown-emails change logged as %q, want %q", settings, want)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"apikey", "rotate"}, "--name is required"},
		{[]string{"apikey", "rotate", "--name", "nope"}, `no live API key is named "nope"`},
		{[]string{"apikey", "rotate", "--name", "tier1", "--overlap", "-1h"}, "must be between 0 and 720h0m0s"},
		{[]string{"user", "sso-only", "--email", "nobody@example.com"}, "no enabled user has email nobody@example.com"},
		{[]string{"sso", "unknown-emails", "maybe"}, `want refuse or create, not "maybe"`},
		{[]string{"sso", "unknown-emails"}, `want refuse or create, not ""`},
	} {
		if _, err := runCommand(t, getenv, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("web %s: %v, want an error containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}

// The OIDC settings are checked before the database is opened.
func TestServeChecksTheOIDCSettings(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		vars map[string]string
		want string
	}{
		{map[string]string{"OIDC_ISSUER": "https://id.example.com"}, "OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are required"},
		{map[string]string{"OIDC_ALLOWED_DOMAINS": "example.com"}, "OIDC_ALLOWED_DOMAINS is set without OIDC_ISSUER"},
		{map[string]string{"OIDC_ISSUER": "https://id.example.com", "OIDC_CLIENT_ID": "desk", "OIDC_CLIENT_SECRET": "s",
			"OIDC_ALLOWED_DOMAINS": "example.com, @bad"}, `"@bad" is not a domain`},
	} {
		getenv := func(k string) string {
			if k == "DATABASE_URL" {
				return "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"
			}
			return c.vars[k]
		}
		if _, err := runCommand(t, getenv, "serve"); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serve with %v: %v, want an error containing %q", c.vars, err, c.want)
		}
	}
}

// `web user add` stores an address as auth.NormalizeEmail writes it and refuses a look-alike of
// another; `web sso unlink` forgets a user's link to their account at the identity provider.
func TestUserAddNormalizesEmailsAndSSOUnlink(t *testing.T) {
	t.Parallel()
	getenv := env(t)
	if out, err := runCommand(t, getenv, "user", "add", "--email", " Admin@Example.COM", "--name", "Ada", "--role", "admin", "--password", "long-enough"); err != nil ||
		!strings.Contains(out, "user admin@example.com (admin) added") {
		t.Fatalf("web user add: %v, printed %q", err, out)
	}
	for _, email := range []string{"admİn@example.com", "\uff41dmin@example.com", "ADMIN@example.com"} {
		_, err := runCommand(t, getenv, "user", "add", "--email", email, "--name", "Mallory", "--role", "admin", "--password", "long-enough")
		if err == nil || !strings.Contains(err.Error(), "could pass for another address") && !strings.Contains(err.Error(), "already exists") {
			t.Errorf("web user add --email %q: %v, want it refused", email, err)
		}
	}

	db, err := pgx.Connect(context.Background(), getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(t.Context(), `INSERT INTO sso_identities (issuer, subject, user_id, email, linked_at)
		SELECT 'https://id.example.com', 'sub-1', id, email, now() FROM users WHERE email = 'admin@example.com'`); err != nil {
		t.Fatal(err)
	}
	if out, err := runCommand(t, getenv, "sso", "unlink", "--email", "ADMIN@example.com"); err != nil || !strings.Contains(out, "is no longer linked") {
		t.Errorf("web sso unlink: %v, printed %q", err, out)
	}
	if out, err := runCommand(t, getenv, "sso", "unlink", "--email", "admin@example.com"); err != nil || !strings.Contains(out, "was linked to no account") {
		t.Errorf("web sso unlink again: %v, printed %q", err, out)
	}
	var links, logged int
	if err := db.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM sso_identities),
		(SELECT count(*) FROM events WHERE kind = 'user_changed' AND detail->'sso_unlinked' = '["https://id.example.com"]')`).Scan(&links, &logged); err != nil ||
		links != 0 || logged != 1 {
		t.Errorf("%d links left and %d unlinks logged (%v), want 0 and 1", links, logged, err)
	}
}
