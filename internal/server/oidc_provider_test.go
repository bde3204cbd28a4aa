package server_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"

	"github.com/handoffdesk/desk/internal/sso"
)

// certifiedProvider is an OpenID provider in the test's process built on zitadel/oidc's op
// package, an OpenID Certified implementation: discovery, its own RSA key, the authorization
// endpoint (PKCE checked), the token endpoint (client secret checked) and ID tokens it signs
// itself. The desk's one client is confidential, with a loopback callback. Its login page is a
// person already signed in there: who, the test says (next); what the provider says of them is
// read when it mints the ID token, so a test can change a person's email at the provider
// between two sign-ins. It also mints, on demand, what a provider must not send: an ID token
// for another client (audience) or one that expired as it was made (lifetime).
type certifiedProvider struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	key          *rsa.PrivateKey

	mu         sync.Mutex
	signedIn   oidcUser
	people     map[string]oidcUser // by subject
	requests   map[string]*authRequest
	codes      map[string]string // code → request id
	authorized []url.Values
	audience   []string      // when set, the ID token's audience instead of the client
	lifetime   time.Duration // of an ID token
}

// oidcUser is a person at the provider.
type oidcUser struct {
	Subject  string
	Email    string
	Verified bool
	Name     string
}

func newCertifiedProvider(t *testing.T) *certifiedProvider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &certifiedProvider{ClientID: "handoff-desk", ClientSecret: rand.Text(), key: key, people: map[string]oidcUser{},
		requests: map[string]*authRequest{}, codes: map[string]string{}, lifetime: 5 * time.Minute}
	srv := httptest.NewUnstartedServer(nil)
	p.Issuer = "http://" + srv.Listener.Addr().String()
	provider, err := op.NewProvider(&op.Config{CryptoKey: sha256.Sum256([]byte(p.ClientSecret)), CodeMethodS256: true},
		opStorage{p}, op.StaticIssuer(p.Issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatal(err)
	}
	callback := op.AuthCallbackURL(provider)
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		id := r.URL.Query().Get("id")
		p.mu.Lock()
		req, ok := p.requests[id]
		if ok {
			req.subject, req.done = p.signedIn.Subject, true
			p.people[p.signedIn.Subject] = p.signedIn
		}
		p.mu.Unlock()
		if !ok {
			http.Error(w, "no such authorization request", http.StatusBadRequest)
			return
		}
		http.Redirect(w, r, callback(op.ContextWithIssuer(r.Context(), p.Issuer), id), http.StatusFound)
	})
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == provider.AuthorizationEndpoint().Relative() {
			p.mu.Lock()
			p.authorized = append(p.authorized, r.URL.Query())
			p.mu.Unlock()
		}
		provider.ServeHTTP(w, r)
	}))
	srv.Config.Handler = mux
	srv.Start()
	t.Cleanup(srv.Close)
	return p
}

func (p *certifiedProvider) config() sso.Config {
	return sso.Config{Issuer: p.Issuer, ClientID: p.ClientID, ClientSecret: p.ClientSecret}
}

// next says who is signed in at the provider from now on.
func (p *certifiedProvider) next(u oidcUser) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.signedIn = u
}

// person is next for someone whose subject is made from their email, as mockoidc's are.
func (p *certifiedProvider) person(email string, verified bool) {
	p.next(oidcUser{Subject: "sub-" + email, Email: email, Verified: verified})
}

// changeEmail changes a person's email at the provider.
func (p *certifiedProvider) changeEmail(subject, email string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	u := p.people[subject]
	u.Email = email
	p.people[subject] = u
	if p.signedIn.Subject == subject {
		p.signedIn = u
	}
}

// mint makes the ID tokens from now on for audience (nil: the client) and lasting lifetime.
func (p *certifiedProvider) mint(audience []string, lifetime time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.audience, p.lifetime = audience, lifetime
}

// authorizations are the authorization requests the provider was sent.
func (p *certifiedProvider) authorizations() []url.Values {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]url.Values(nil), p.authorized...)
}

// authRequest is an authorization request the provider holds until its code is exchanged.
type authRequest struct {
	id       string
	req      oidc.AuthRequest
	audience []string
	at       time.Time
	subject  string
	done     bool
}

func (a *authRequest) GetID() string                      { return a.id }
func (a *authRequest) GetACR() string                     { return "" }
func (a *authRequest) GetAMR() []string                   { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string              { return a.audience }
func (a *authRequest) GetAuthTime() time.Time             { return a.at }
func (a *authRequest) GetClientID() string                { return a.req.ClientID }
func (a *authRequest) GetNonce() string                   { return a.req.Nonce }
func (a *authRequest) GetRedirectURI() string             { return a.req.RedirectURI }
func (a *authRequest) GetScopes() []string                { return a.req.Scopes }
func (a *authRequest) GetState() string                   { return a.req.State }
func (a *authRequest) GetSubject() string                 { return a.subject }
func (a *authRequest) Done() bool                         { return a.done }
func (a *authRequest) GetResponseType() oidc.ResponseType { return a.req.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode { return a.req.ResponseMode }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge {
	if a.req.CodeChallenge == "" {
		return nil
	}
	return &oidc.CodeChallenge{Challenge: a.req.CodeChallenge, Method: a.req.CodeChallengeMethod}
}

// deskClient is the desk, registered at the provider as a confidential web client whose
// callback is on the loopback interface.
type deskClient struct{ provider *certifiedProvider }

func (c deskClient) GetID() string                        { return c.provider.ClientID }
func (c deskClient) RedirectURIs() []string               { return nil }
func (c deskClient) RedirectURIGlobs() []string           { return []string{"http://127.0.0.1:*/sso/callback"} }
func (c deskClient) PostLogoutRedirectURIs() []string     { return nil }
func (c deskClient) PostLogoutRedirectURIGlobs() []string { return nil }
func (c deskClient) ApplicationType() op.ApplicationType  { return op.ApplicationTypeWeb }
func (c deskClient) AuthMethod() oidc.AuthMethod          { return oidc.AuthMethodBasic }
func (c deskClient) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c deskClient) GrantTypes() []oidc.GrantType { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c deskClient) LoginURL(id string) string {
	return c.provider.Issuer + "/login?id=" + url.QueryEscape(id)
}
func (c deskClient) AccessTokenType() op.AccessTokenType  { return op.AccessTokenTypeBearer }
func (c deskClient) DevMode() bool                        { return false }
func (c deskClient) IsScopeAllowed(string) bool           { return false }
func (c deskClient) IDTokenUserinfoClaimsAssertion() bool { return true } // the desk reads the email from the ID token
func (c deskClient) ClockSkew() time.Duration             { return 0 }
func (c deskClient) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c deskClient) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c deskClient) IDTokenLifetime() time.Duration {
	c.provider.mu.Lock()
	defer c.provider.mu.Unlock()
	return c.provider.lifetime
}

var errUnsupported = errors.New("not offered by this provider")

// opStorage is what the op package asks of a provider's storage: the code flow only.
type opStorage struct{ p *certifiedProvider }

func (s opStorage) CreateAuthRequest(_ context.Context, req *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	a := &authRequest{id: rand.Text(), req: *req, audience: []string{req.ClientID}, at: time.Now()}
	if s.p.audience != nil {
		a.audience = s.p.audience
	}
	s.p.requests[a.id] = a
	return a, nil
}

func (s opStorage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	if a, ok := s.p.requests[id]; ok {
		return a, nil
	}
	return nil, errors.New("no such authorization request")
}

func (s opStorage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.p.mu.Lock()
	id := s.p.codes[code]
	s.p.mu.Unlock()
	return s.AuthRequestByID(ctx, id)
}

func (s opStorage) SaveAuthCode(_ context.Context, id, code string) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	s.p.codes[code] = id
	return nil
}

func (s opStorage) DeleteAuthRequest(_ context.Context, id string) error {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	delete(s.p.requests, id)
	for code, of := range s.p.codes {
		if of == id {
			delete(s.p.codes, code)
		}
	}
	return nil
}

func (s opStorage) CreateAccessToken(context.Context, op.TokenRequest) (string, time.Time, error) {
	return rand.Text(), time.Now().Add(5 * time.Minute), nil
}

func (s opStorage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errUnsupported
}

func (s opStorage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, errUnsupported
}

func (s opStorage) TerminateSession(context.Context, string, string) error { return errUnsupported }

func (s opStorage) RevokeToken(context.Context, string, string, string) *oidc.Error {
	return oidc.ErrUnsupportedGrantType()
}

func (s opStorage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s opStorage) SigningKey(context.Context) (op.SigningKey, error) {
	return signingKey{s.p.key}, nil
}

func (s opStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s opStorage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{&s.p.key.PublicKey}}, nil
}

func (s opStorage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	if id != s.p.ClientID {
		return nil, errors.New("no such client")
	}
	return deskClient{provider: s.p}, nil
}

func (s opStorage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != s.p.ClientID || secret != s.p.ClientSecret {
		return errors.New("wrong client or secret")
	}
	return nil
}

func (s opStorage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil // deprecated in favour of SetUserinfoFromRequest
}

// SetUserinfoFromRequest says what the provider knows of the person now, into the ID token.
func (s opStorage) SetUserinfoFromRequest(_ context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	s.p.mu.Lock()
	u := s.p.people[req.GetSubject()]
	s.p.mu.Unlock()
	info.Subject = u.Subject
	for _, scope := range scopes {
		switch scope {
		case oidc.ScopeEmail:
			info.Email, info.EmailVerified = u.Email, oidc.Bool(u.Verified)
		case oidc.ScopeProfile:
			info.Name = u.Name
		}
	}
	return nil
}

func (s opStorage) SetUserinfoFromToken(context.Context, *oidc.UserInfo, string, string, string) error {
	return errUnsupported
}

func (s opStorage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errUnsupported
}

func (s opStorage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s opStorage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errUnsupported
}

func (s opStorage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errUnsupported
}

func (s opStorage) Health(context.Context) error { return nil }

type signingKey struct{ key *rsa.PrivateKey }

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return "test-key" }

type publicKey struct{ key *rsa.PublicKey }

func (k publicKey) ID() string                         { return "test-key" }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.key }

// signedInAs is who a browser is on the desk after a sign-in through the provider: the name
// the desk shows, or "" with the refusal the desk answered.
func signedInAs(t *testing.T, app *testApp, start string) (string, ssoAnswer) {
	t.Helper()
	c := app.client(t)
	got, _ := signIn(t, app, c, start, nil)
	if got.status != http.StatusSeeOther {
		return "", got
	}
	name := who(t, app, c)
	if name == "" {
		t.Fatalf("the sign-in answered %d to %s but the browser is not logged in", got.status, got.location)
	}
	return name, got
}
