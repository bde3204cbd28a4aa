package server_test

import (
	"context"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
	"github.com/handoffdesk/desk/internal/webhook/webhooktest"
)

var shownSigningSecret = regexp.MustCompile(`data-testid="secret-signing-secret">([^<]+)<`)

// A key's page rotates its signing secret: an overlap that is not a duration, or is too long, is
// refused beside the field with what was typed kept; a good one shows the new secret once, keeps
// the old one signing until the overlap ends, and logs the rotation as the admin's.
func TestAdminRotatesAKeysSigningSecret(t *testing.T) {
	t.Parallel()
	app := setup(t)
	ada := app.user(t, "ada@example.com", auth.RoleAdmin)
	app.botKey(t, "tier1", "billing_t2")
	ctx := context.Background()
	var keyID, first string
	if err := app.DB.QueryRow(ctx, `SELECT id::text, webhook_secret FROM api_keys WHERE name = 'tier1'`).Scan(&keyID, &first); err != nil {
		t.Fatal(err)
	}
	admin := app.client(t)
	app.login(t, admin, "ada@example.com")

	resp, page := get(t, admin, app.URL+"/admin/keys/"+keyID)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `data-testid="rotate-form"`) || !strings.Contains(page, `value="24h"`) {
		t.Fatalf("the key's page: %d, want the rotate form with a 24h overlap\n%s", resp.StatusCode, page)
	}
	for _, bad := range []string{"soon", "800h"} {
		status, _, body := postForm(t, admin, app.URL+"/admin/keys/"+keyID+"/rotate", url.Values{"overlap": {bad}})
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-overlap"`) || !strings.Contains(body, `value="`+bad+`"`) {
			t.Errorf("overlap %q: %d, want 422 with the complaint beside the field and the value kept\n%s", bad, status, body)
		}
	}

	before := time.Now()
	resp, err := admin.PostForm(app.URL+"/admin/keys/"+keyID+"/rotate", url.Values{"overlap": {"2h"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ = readAll(resp)
	m := shownSigningSecret.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("rotate: %d, cache %q, secret shown %v\n%s", resp.StatusCode, resp.Header.Get("Cache-Control"), m != nil, page)
	}
	var secret, previous string
	var until time.Time
	var rotations int
	if err := app.DB.QueryRow(ctx, `SELECT webhook_secret, webhook_secret_previous, webhook_secret_previous_until,
			(SELECT count(*) FROM events WHERE kind = 'webhook_secret_rotated' AND actor_user = $2 AND detail->>'overlap' = '2h0m0s')
		FROM api_keys WHERE id = $1::bigint`, keyID, ada.ID).Scan(&secret, &previous, &until, &rotations); err != nil {
		t.Fatal(err)
	}
	if secret != html.UnescapeString(m[1]) || previous != first {
		t.Errorf("after the rotation the key signs with a secret other than the one shown, or not also with the old one")
	}
	if until.Before(before.Add(2*time.Hour)) || until.After(time.Now().Add(2*time.Hour)) {
		t.Errorf("the old secret signs until %s, want two hours after the rotation", until)
	}
	if rotations != 1 {
		t.Errorf("%d rotations logged as ada's with their overlap, want 1", rotations)
	}
	if strings.Contains(page, first) {
		t.Error("the page shows the old secret")
	}
	if _, page := get(t, admin, app.URL+"/admin/keys/"+keyID); !strings.Contains(page, "also signs until "+until.UTC().Format("2006-01-02 15:04 UTC")) ||
		strings.Contains(page, secret) || strings.Contains(page, first) {
		t.Errorf("the key's page after the rotation does not say until when the old secret signs, or shows a secret\n%s", page)
	}
}

// The console's settings page sets what an email no user has does at single sign-on; a bad
// choice is refused on its field and changes nothing, a good one is logged before → after.
func TestAdminSetsTheUnknownEmailsChoice(t *testing.T) {
	t.Parallel()
	app := setup(t)
	ada := app.user(t, "ada@example.com", auth.RoleAdmin)
	admin := app.client(t)
	app.login(t, admin, "ada@example.com")
	ctx := context.Background()

	resp, page := get(t, admin, app.URL+"/admin/settings")
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `<option value="refuse" selected>`) || !strings.Contains(page, `data-testid="sso-unconfigured"`) {
		t.Fatalf("the settings page: %d, want refuse selected and a word that no identity provider is set\n%s", resp.StatusCode, page)
	}
	status, _, body := postForm(t, admin, app.URL+"/admin/settings", url.Values{"unknown_emails": {"maybe"}})
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, `data-testid="error-unknown_emails"`) {
		t.Errorf("unknown_emails=maybe: %d, want 422 beside the field\n%s", status, body)
	}
	if status, location, _ := postForm(t, admin, app.URL+"/admin/settings", url.Values{"unknown_emails": {"create"}}); status != http.StatusSeeOther || location != "/admin/settings" {
		t.Fatalf("unknown_emails=create: %d to %q, want 303 back to the settings", status, location)
	}
	// The same choice again changes nothing, and logs nothing.
	postForm(t, admin, app.URL+"/admin/settings", url.Values{"unknown_emails": {"create"}})
	if _, page := get(t, admin, app.URL+"/admin/settings"); !strings.Contains(page, `<option value="create" selected>`) {
		t.Error("the settings page does not show create after saving it")
	}
	var changes []string
	if err := app.DB.QueryRow(ctx, `SELECT coalesce(array_agg((detail->'unknown_emails')::text ORDER BY seq), '{}') FROM events
		WHERE kind = 'sso_settings_changed' AND actor_user = $1`, ada.ID).Scan(&changes); err != nil {
		t.Fatal(err)
	}
	if strings.Join(changes, "; ") != `["refuse", "create"]` {
		t.Errorf("logged %q, want one change refuse → create by ada", changes)
	}
}

// A user's page turns their password login off and on again; each change is logged as the admin's
// with before → after, and a person whose password login is off is refused at the password form.
// A desk without an identity provider refuses to make anyone SSO-only: they could not sign in.
func TestAdminTogglesSSOOnly(t *testing.T) {
	t.Parallel()
	plain := setup(t)
	plain.user(t, "ada@example.com", auth.RoleAdmin)
	erin := plain.user(t, "erin@example.com", auth.RoleAgent)
	c := plain.client(t)
	plain.login(t, c, "ada@example.com")
	if status, _, body := postForm(t, c, plain.URL+"/admin/users/"+itoa(erin.ID)+"/sso-only", url.Values{"sso_only": {"on"}}); status != http.StatusConflict ||
		!strings.Contains(body, "no identity provider") {
		t.Errorf("SSO-only on a desk without an identity provider: %d, want 409 saying why\n%s", status, body)
	}

	app := setupWith(t, server.Config{OIDC: newIdentityProvider(t).config()})
	ada := app.user(t, "ada@example.com", auth.RoleAdmin)
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	admin := app.client(t)
	app.login(t, admin, "ada@example.com")
	ctx := context.Background()
	path := app.URL + "/admin/users/" + itoa(dana.ID)

	if _, page := get(t, admin, path); !strings.Contains(page, `name="sso_only" value="on"`) {
		t.Fatalf("dana's page does not offer single sign-on only\n%s", page)
	}
	if status, _, body := postForm(t, admin, path+"/sso-only", url.Values{"sso_only": {"sometimes"}}); status != http.StatusUnprocessableEntity ||
		!strings.Contains(body, "sometimes") {
		t.Errorf("sso_only=sometimes: %d, want 422 naming it", status)
	}
	if status, location, _ := postForm(t, admin, path+"/sso-only", url.Values{"sso_only": {"on"}}); status != http.StatusSeeOther || location != "/admin/users/"+itoa(dana.ID) {
		t.Fatalf("sso_only=on: %d to %q, want 303 to her page", status, location)
	}
	if _, page := get(t, admin, path); !strings.Contains(page, `name="sso_only" value="off"`) || !strings.Contains(page, "single sign-on only") {
		t.Error("dana's page does not show her as SSO-only with a way back")
	}
	if status, _, _ := postForm(t, app.client(t), app.URL+"/login", url.Values{"email": {"dana@example.com"}, "password": {testPassword}}); status != http.StatusUnauthorized {
		t.Errorf("dana's password login while SSO-only: %d, want 401", status)
	}
	if status, _, _ := postForm(t, admin, path+"/sso-only", url.Values{"sso_only": {"off"}}); status != http.StatusSeeOther {
		t.Fatalf("sso_only=off: %d, want 303", status)
	}
	app.login(t, app.client(t), "dana@example.com")

	var changes []string
	if err := app.DB.QueryRow(ctx, `SELECT array_agg((detail->'sso_only')::text ORDER BY seq) FROM events
		WHERE kind = 'user_changed' AND subject_user = $1 AND actor_user = $2`, dana.ID, ada.ID).Scan(&changes); err != nil {
		t.Fatal(err)
	}
	if strings.Join(changes, "; ") != "[false, true]; [true, false]" {
		t.Errorf("logged %q, want off → on then on → off", changes)
	}
}

// The signing secrets the console shows, at a key's creation and at its rotation, are what the
// Standard Webhooks reference library takes: with them it verifies the desk's real deliveries.
func TestAdminShownSecretsVerifyWithTheStandardWebhooksLibrary(t *testing.T) {
	t.Parallel()
	bot := webhooktest.NewReceiver(t)
	app := setupHooks(t, server.Config{AllowPrivateWebhooks: true}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	app.user(t, "ada@example.com", auth.RoleAdmin, "billing_t2")
	q, err := app.Queues.ByName(t.Context(), "billing_t2")
	if err != nil {
		t.Fatal(err)
	}
	admin := app.client(t)
	app.login(t, admin, "ada@example.com")

	resp, err := admin.PostForm(app.URL+"/admin/keys", url.Values{"name": {"tier1"}, "queues": {strconv.FormatInt(q.ID, 10)},
		"webhook_url": {bot.URL}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := readAll(resp)
	key, secret := shownSecret(`key`).FindStringSubmatch(page), shownSigningSecret.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusCreated || key == nil || secret == nil {
		t.Fatalf("create the key: %d, want 201 showing the key and its secret\n%s", resp.StatusCode, page)
	}
	first := html.UnescapeString(secret[1])
	// delivered sends a cold package and returns the webhook saying it is queued.
	delivered := func() webhooktest.Check {
		t.Helper()
		pkg := harbor(t, func(p map[string]any) {
			p["transfer_mode"] = "cold"
			p["contact"].(map[string]any)["id"] = "cust_" + p["handoff_id"].(string)
		})
		expect(t, "submit", app.submit(t, html.UnescapeString(key[1]), pkg), http.StatusCreated)
		return bot.Await(t, pkg["handoff_id"].(string), "queued")
	}
	before := delivered()

	var keyID int64
	if err := app.DB.QueryRow(t.Context(), `SELECT id FROM api_keys WHERE name = 'tier1'`).Scan(&keyID); err != nil {
		t.Fatal(err)
	}
	resp, err = admin.PostForm(app.URL+"/admin/keys/"+strconv.FormatInt(keyID, 10)+"/rotate", url.Values{"overlap": {"2h"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ = readAll(resp)
	secret = shownSigningSecret.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || secret == nil {
		t.Fatalf("rotate: %d, want 200 showing the new secret\n%s", resp.StatusCode, page)
	}
	second := html.UnescapeString(secret[1])
	during := delivered()

	before.Secret = first
	duringFirst, duringSecond := during, during
	duringFirst.Secret, duringSecond.Secret = first, second
	checks := []webhooktest.Check{before, duringFirst, duringSecond}
	for _, d := range []webhooktest.Check{before, during} {
		conformsAsWebhook(t, d)
	}
	for i, got := range webhooktest.StandardVerify(t, checks) {
		if got != "ok" {
			t.Errorf("check %d (secret %s…): the reference library says %q", i, checks[i].Secret[:10], got)
		}
	}
}

// shownSecret finds the secret a page shows under label.
func shownSecret(label string) *regexp.Regexp {
	return regexp.MustCompile(`data-testid="secret-` + regexp.QuoteMeta(label) + `">([^<]+)<`)
}
