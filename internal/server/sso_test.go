package server_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/sso"
)

// identityProvider is a real OpenID provider in the test's process (mockoidc: discovery, its own
// RSA keys, authorization and token endpoints with PKCE), which signs in whichever user the test
// queues. It records the authorization requests the desk sent it.
type identityProvider struct {
	*mockoidc.MockOIDC
	mu        sync.Mutex
	authorize []url.Values
}

func newIdentityProvider(t *testing.T) *identityProvider {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	idp := &identityProvider{MockOIDC: m}
	if err := m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, mockoidc.AuthorizationEndpoint) {
				idp.mu.Lock()
				idp.authorize = append(idp.authorize, r.URL.Query())
				idp.mu.Unlock()
			}
			next.ServeHTTP(w, r)
		})
	}); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return idp
}

func (idp *identityProvider) config(domains ...string) sso.Config {
	return sso.Config{Issuer: idp.Issuer(), ClientID: idp.ClientID, ClientSecret: idp.ClientSecret, AllowedDomains: domains}
}

// person is who the provider signs in next.
func (idp *identityProvider) person(email string, verified bool) {
	idp.QueueUser(&mockoidc.MockUser{Subject: "sub-" + email, Email: email, EmailVerified: verified})
}

// ssoAnswer is the desk's last response of a sign-in.
type ssoAnswer struct {
	status   int
	location string
	body     string
	header   http.Header
}

func fetch(t *testing.T, c *http.Client, method, target string, form url.Values) ssoAnswer {
	t.Helper()
	var resp *http.Response
	var err error
	if method == http.MethodPost {
		resp, err = c.PostForm(target, form)
	} else {
		resp, err = c.Get(target)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return ssoAnswer{status: resp.StatusCode, location: resp.Header.Get("Location"), body: string(body), header: resp.Header}
}

// signIn walks a browser (c) through a sign-in: the desk's start, the provider's authorization
// (its URL changed by tamper, if given) and its own redirects, and the desk's callback, whose
// ssoAnswer it returns along with the callback's URL.
func signIn(t *testing.T, app *testApp, c *http.Client, start string, tamper func(url.Values)) (ssoAnswer, string) {
	t.Helper()
	started := fetch(t, c, http.MethodGet, app.URL+start, nil)
	if started.status != http.StatusSeeOther {
		t.Fatalf("GET %s = %d, want 303 to the provider:\n%s", start, started.status, started.body)
	}
	authorize, err := url.Parse(started.location)
	if err != nil {
		t.Fatal(err)
	}
	if tamper != nil {
		q := authorize.Query()
		tamper(q)
		authorize.RawQuery = q.Encode()
	}
	back := fetch(t, c, http.MethodGet, authorize.String(), nil)
	for hops := 0; back.status == http.StatusFound && !strings.HasPrefix(back.location, app.URL) && hops < 5; hops++ {
		back = fetch(t, c, http.MethodGet, back.location, nil)
	}
	if back.status != http.StatusFound || !strings.HasPrefix(back.location, app.URL+"/sso/callback?") {
		t.Fatalf("the provider answered %d to %s, want 302 to the desk's callback", back.status, back.location)
	}
	return fetch(t, c, http.MethodGet, back.location, nil), back.location
}

// who is the name the desk shows a browser as logged in, or "" when it sends it to log in.
func who(t *testing.T, app *testApp, c *http.Client) string {
	t.Helper()
	home := fetch(t, c, http.MethodGet, app.URL+"/", nil)
	if home.status != http.StatusOK {
		return ""
	}
	i := strings.Index(home.body, `data-testid="viewer">`)
	if i < 0 {
		t.Fatalf("home page without a viewer:\n%s", home.body)
	}
	name, _, _ := strings.Cut(home.body[i+len(`data-testid="viewer">`):], " ")
	return name
}

func TestSSOSignsInByVerifiedEmail(t *testing.T) {
	t.Parallel()
	idp := newIdentityProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config()})
	app.user(t, "dana@example.com", auth.RoleAgent, "billing")

	login := fetch(t, app.client(t), http.MethodGet, app.URL+"/login", nil)
	if !strings.Contains(login.body, `data-testid="sso-start"`) || !strings.Contains(login.body, "Sign in with SSO") {
		t.Errorf("the login page offers no single sign-on:\n%s", login.body)
	}

	c := app.client(t)
	idp.person("Dana@Example.com", true) // matched ignoring case, as passwords are
	got, callback := signIn(t, app, c, "/sso/start?next=/queues/billing", nil)
	if got.status != http.StatusSeeOther || got.location != "/queues/billing" {
		t.Fatalf("callback = %d to %q, want 303 to /queues/billing:\n%s", got.status, got.location, got.body)
	}
	if name := who(t, app, c); name != "dana" {
		t.Errorf("after single sign-on the desk shows %q, want dana", name)
	}

	// The desk asked for the code flow with PKCE (S256), a state and a nonce.
	idp.mu.Lock()
	asked := idp.authorize[0]
	idp.mu.Unlock()
	for name, want := range map[string]string{"response_type": "code", "code_challenge_method": "S256", "client_id": idp.ClientID} {
		if asked.Get(name) != want {
			t.Errorf("authorization request %s = %q, want %q", name, asked.Get(name), want)
		}
	}
	for _, name := range []string{"code_challenge", "state", "nonce"} {
		if len(asked.Get(name)) < 20 {
			t.Errorf("authorization request %s = %q, want a random value", name, asked.Get(name))
		}
	}
	if !strings.Contains(asked.Get("scope"), "email") || asked.Get("redirect_uri") != app.URL+"/sso/callback" {
		t.Errorf("authorization request scope %q, redirect_uri %q", asked.Get("scope"), asked.Get("redirect_uri"))
	}

	// A callback is used once.
	again := fetch(t, c, http.MethodGet, callback, nil)
	if again.status != http.StatusUnauthorized || !strings.Contains(again.body, "unknown or was used already") {
		t.Errorf("the callback again = %d, want 401 saying it was used:\n%s", again.status, again.body)
	}
}

func TestSSORefusals(t *testing.T) {
	t.Parallel()
	idp := newIdentityProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config()})
	app.user(t, "dana@example.com", auth.RoleAgent, "billing")

	refused := func(name string, got ssoAnswer, status int, reason string) {
		t.Helper()
		if got.status != status || !strings.Contains(got.body, reason) || !strings.Contains(got.body, `data-testid="login-error"`) {
			t.Errorf("%s: %d, want %d on the login page saying %q:\n%s", name, got.status, status, reason, got.body)
		}
	}
	loggedOut := func(name string, c *http.Client) {
		t.Helper()
		if who(t, app, c) != "" {
			t.Errorf("%s: the browser is logged in", name)
		}
	}

	// The provider's token carries the nonce it was sent: one that is not the sign-in's own is
	// refused, as a token replayed from another sign-in would be.
	c := app.client(t)
	idp.person("dana@example.com", true)
	got, _ := signIn(t, app, c, "/sso/start", func(q url.Values) { q.Set("nonce", "forged-nonce") })
	refused("wrong nonce", got, http.StatusUnauthorized, "nonce is not this sign-in")
	loggedOut("wrong nonce", c)

	// A token the provider issued an hour ago has expired.
	c = app.client(t)
	idp.person("dana@example.com", true)
	idp.FastForward(-time.Hour)
	got, _ = signIn(t, app, c, "/sso/start", nil)
	idp.FastForward(time.Hour)
	refused("expired token", got, http.StatusUnauthorized, "ID token expired")
	loggedOut("expired token", c)

	c = app.client(t)
	idp.person("dana@example.com", false)
	got, _ = signIn(t, app, c, "/sso/start", nil)
	refused("unverified email", got, http.StatusUnauthorized, "has not verified dana@example.com")
	loggedOut("unverified email", c)

	// The callback is bound to the browser that started the sign-in: carried to another, it is
	// refused.
	c = app.client(t)
	idp.person("dana@example.com", true)
	started := fetch(t, c, http.MethodGet, app.URL+"/sso/start", nil)
	back := fetch(t, c, http.MethodGet, started.location, nil)
	other := app.client(t)
	refused("another browser", fetch(t, other, http.MethodGet, back.location, nil), http.StatusUnauthorized, "started in another browser")
	loggedOut("another browser", other)

	// The provider's own refusal is shown too.
	refused("provider error", fetch(t, app.client(t), http.MethodGet, app.URL+"/sso/callback?error=access_denied&state=x", nil),
		http.StatusUnauthorized, "access_denied")
}

// An email no user has is refused, or becomes an agent with no queues who signs in with single
// sign-on only, as the desk's setting says.
func TestSSOUnknownEmail(t *testing.T) {
	t.Parallel()
	idp := newIdentityProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config()})
	ctx := context.Background()

	c := app.client(t)
	idp.person("new.hire@example.com", true)
	got, _ := signIn(t, app, c, "/sso/start", nil)
	if got.status != http.StatusForbidden || !strings.Contains(got.body, "no desk user has the email new.hire@example.com") {
		t.Errorf("unknown email while refused: %d, want 403 naming the email:\n%s", got.status, got.body)
	}
	if _, err := app.Auth.UserByEmail(ctx, "new.hire@example.com"); err == nil {
		t.Error("a refused unknown email made a user")
	}

	if err := access.New(app.DB, app.Auth).SetUnknownEmails(ctx, sso.CreateUnknown, 0); err != nil {
		t.Fatal(err)
	}
	idp.person("new.hire@example.com", true)
	got, _ = signIn(t, app, c, "/sso/start", nil)
	if got.status != http.StatusSeeOther || got.location != "/" {
		t.Fatalf("unknown email while created: %d to %q, want 303 to /:\n%s", got.status, got.location, got.body)
	}
	u, err := app.Auth.UserByEmail(ctx, "new.hire@example.com")
	if err != nil || u.Role != auth.RoleAgent {
		t.Fatalf("the new user = %+v, %v, want an agent", u, err)
	}
	var memberships int
	if err := app.DB.QueryRow(ctx, `SELECT count(*) FROM queue_members WHERE user_id = $1`, u.ID).Scan(&memberships); err != nil || memberships != 0 {
		t.Errorf("the new agent works %d queues (%v), want none", memberships, err)
	}
	if name := who(t, app, c); name != "new.hire" { // the provider sent no name: the email's local part
		t.Errorf("the new agent is shown as %q", name)
	}
	// Signing in again finds the same user rather than making another.
	idp.person("new.hire@example.com", true)
	if got, _ := signIn(t, app, app.client(t), "/sso/start", nil); got.status != http.StatusSeeOther {
		t.Errorf("second sign-in of the new agent: %d", got.status)
	}
	var n int
	if err := app.DB.QueryRow(ctx, `SELECT count(*) FROM users WHERE lower(email) = 'new.hire@example.com'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d users with the email (%v), want 1", n, err)
	}

	// The sign-in's account is in the log as any other, made by the person signing in.
	var created int
	if err := app.DB.QueryRow(ctx, `SELECT count(*) FROM events WHERE kind = 'user_created' AND subject_user = $1 AND actor_user = $1
		AND detail->>'via' = 'single sign-on'`, u.ID).Scan(&created); err != nil || created != 1 {
		t.Errorf("%d user_created rows for the signed-in agent (%v), want 1", created, err)
	}

	if err := access.New(app.DB, app.Auth).SetUnknownEmails(ctx, "maybe", 0); desk.FieldsOf(err)["unknown_emails"] == "" {
		t.Errorf("an unknown-emails setting of maybe: %v, want it refused naming unknown_emails", err)
	}
}

func TestSSOAllowedDomains(t *testing.T) {
	t.Parallel()
	idp := newIdentityProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config("example.com")})
	app.user(t, "dana@example.com", auth.RoleAgent)
	app.user(t, "eve@elsewhere.org", auth.RoleAgent)

	idp.person("eve@elsewhere.org", true)
	got, _ := signIn(t, app, app.client(t), "/sso/start", nil)
	if got.status != http.StatusForbidden || !strings.Contains(got.body, "not of a domain this desk allows (example.com)") {
		t.Errorf("a user of another domain: %d, want 403 naming the allowed domains:\n%s", got.status, got.body)
	}
	idp.person("dana@example.com", true)
	if got, _ := signIn(t, app, app.client(t), "/sso/start", nil); got.status != http.StatusSeeOther {
		t.Errorf("a user of the allowed domain: %d, want 303:\n%s", got.status, got.body)
	}
}

// A user whose password login is off is refused at the password form, even with the right
// password, and signs in through the provider; the refusal counts towards throttling.
func TestSSOOnlyUserRefusedAtThePasswordForm(t *testing.T) {
	t.Parallel()
	idp := newIdentityProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config()})
	dana := app.user(t, "dana@example.com", auth.RoleAgent)
	if err := access.New(app.DB, app.Auth).SetSSOOnly(context.Background(), dana.ID, true, 0); err != nil {
		t.Fatal(err)
	}

	c := app.client(t)
	got := fetch(t, c, http.MethodPost, app.URL+"/login", url.Values{"email": {"dana@example.com"}, "password": {testPassword}})
	if got.status != http.StatusUnauthorized || !strings.Contains(got.body, "single sign-on only") || !strings.Contains(got.body, "Sign in with SSO") {
		t.Errorf("password login of an SSO-only user: %d, want 401 pointing to single sign-on:\n%s", got.status, got.body)
	}
	wrong := fetch(t, c, http.MethodPost, app.URL+"/login", url.Values{"email": {"dana@example.com"}, "password": {"not-the-password"}})
	if wrong.status != http.StatusUnauthorized || strings.Contains(wrong.body, "single sign-on only") {
		t.Errorf("a wrong password for an SSO-only user: %d, want the usual 401 that tells nothing more:\n%s", wrong.status, wrong.body)
	}
	if who(t, app, c) != "" {
		t.Error("the SSO-only user is logged in by password")
	}
	var failures int
	if err := app.DB.QueryRow(context.Background(), `SELECT count(*) FROM login_failures`).Scan(&failures); err != nil || failures != 2 {
		t.Errorf("%d login failures recorded (%v), want 2", failures, err)
	}

	idp.person("dana@example.com", true)
	if got, _ := signIn(t, app, c, "/sso/start", nil); got.status != http.StatusSeeOther || who(t, app, c) != "dana" {
		t.Errorf("single sign-on of the SSO-only user: %d:\n%s", got.status, got.body)
	}

	if err := access.New(app.DB, app.Auth).SetSSOOnly(context.Background(), dana.ID, false, 0); err != nil {
		t.Fatal(err)
	}
	app.login(t, app.client(t), "dana@example.com")
}

// A sign-in for the sidebar runs in a popup and ends with a ticket, which the window that opened
// the popup trades, once and within a minute, for a session of its own.
func TestSSOPopupEndsWithATicket(t *testing.T) {
	t.Parallel()
	idp := newIdentityProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config(), FrameAncestors: []string{"https://crm.example.com"}})
	app.user(t, "dana@example.com", auth.RoleAgent, "billing")

	popup := app.client(t)
	idp.person("dana@example.com", true)
	start := fetch(t, popup, http.MethodGet, app.URL+"/sso/start?popup=1&next=/sidebar/h-1", nil)
	if start.header.Get("Cross-Origin-Opener-Policy") != "unsafe-none" {
		t.Errorf("the popup's start has opener policy %q, want unsafe-none to keep its opener", start.header.Get("Cross-Origin-Opener-Policy"))
	}
	back := fetch(t, popup, http.MethodGet, start.location, nil)
	done := fetch(t, popup, http.MethodGet, back.location, nil)
	if done.status != http.StatusOK || done.header.Get("Cross-Origin-Opener-Policy") != "unsafe-none" {
		t.Fatalf("the popup's callback = %d with opener policy %q, want 200 and unsafe-none:\n%s",
			done.status, done.header.Get("Cross-Origin-Opener-Policy"), done.body)
	}
	i := strings.Index(done.body, `data-ticket="`)
	if i < 0 {
		t.Fatalf("the popup's page has no ticket:\n%s", done.body)
	}
	ticket, _, _ := strings.Cut(done.body[i+len(`data-ticket="`):], `"`)
	if who(t, app, popup) != "" {
		t.Error("the popup itself was logged in: only the window trading the ticket should be")
	}

	sidebar := app.client(t)
	traded := fetch(t, sidebar, http.MethodPost, app.URL+"/login/complete", url.Values{"ticket": {ticket}})
	if traded.status != http.StatusSeeOther || traded.location != "/sidebar/h-1" {
		t.Fatalf("trading the ticket = %d to %q, want 303 to /sidebar/h-1:\n%s", traded.status, traded.location, traded.body)
	}
	if !strings.Contains(traded.header.Get("Content-Security-Policy"), "frame-ancestors https://crm.example.com") {
		t.Errorf("the trade's ssoAnswer may not be framed by the CRM: %q", traded.header.Get("Content-Security-Policy"))
	}
	if name := who(t, app, sidebar); name != "dana" {
		t.Errorf("the sidebar shows %q after trading the ticket, want dana", name)
	}
	again := fetch(t, app.client(t), http.MethodPost, app.URL+"/login/complete", url.Values{"ticket": {ticket}})
	if again.status != http.StatusUnauthorized || !strings.Contains(again.body, "ticket is unknown, used") {
		t.Errorf("the ticket traded again: %d, want 401:\n%s", again.status, again.body)
	}
}

func TestSSOAbsentWithoutAnIssuer(t *testing.T) {
	t.Parallel()
	app := setup(t)
	if login := fetch(t, app.client(t), http.MethodGet, app.URL+"/login", nil); strings.Contains(login.body, "Sign in with SSO") {
		t.Error("the login page offers single sign-on without an identity provider")
	}
	if got := fetch(t, app.client(t), http.MethodGet, app.URL+"/sso/start", nil); got.status != http.StatusNotFound || !strings.Contains(got.body, "OIDC_ISSUER") {
		t.Errorf("/sso/start without an identity provider: %d, want 404 naming OIDC_ISSUER:\n%s", got.status, got.body)
	}
}

// Anyone may start a sign-in, and each start is a row: one address has at most 30 under way.
func TestSSOStartsAreCappedPerAddress(t *testing.T) {
	t.Parallel()
	idp := newIdentityProvider(t)
	app := setupWith(t, server.Config{OIDC: idp.config()})
	c := app.client(t)
	for i := range 30 {
		if got := fetch(t, c, http.MethodGet, app.URL+"/sso/start", nil); got.status != http.StatusSeeOther {
			t.Fatalf("start %d: %d, want 303", i+1, got.status)
		}
	}
	got := fetch(t, c, http.MethodGet, app.URL+"/sso/start", nil)
	if got.status != http.StatusTooManyRequests || got.header.Get("Retry-After") == "" ||
		!strings.Contains(got.body, "30 sign-ins are under way from this address") {
		t.Errorf("the 31st start: %d (Retry-After %q), want 429 saying why:\n%s", got.status, got.header.Get("Retry-After"), got.body)
	}
	// Once one is gone (finished, or purged past its time), another may start.
	app.user(t, "dana@example.com", auth.RoleAgent)
	if _, err := app.DB.Exec(context.Background(), `DELETE FROM sso_logins WHERE ctid IN (SELECT ctid FROM sso_logins LIMIT 1)`); err != nil {
		t.Fatal(err)
	}
	idp.person("dana@example.com", true)
	if got, _ := signIn(t, app, app.client(t), "/sso/start", nil); got.status != http.StatusSeeOther {
		t.Errorf("a start with a place free: %d, want 303 after signing in:\n%s", got.status, got.body)
	}
}
