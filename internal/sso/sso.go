// Package sso signs people in through their company's identity provider (OpenID Connect): the
// authorization code flow with PKCE, state and nonce. The session it ends in is auth's, the same
// as a password's.
//
// A person's first sign-in matches them to a desk user by the email the provider has verified,
// in the one form auth.NormalizeEmail gives it (a look-alike address is refused, never folded
// into another's), and links their account at the provider, (issuer, subject), to that user
// (sso_identities). From then on the link alone says who they are: an email changed at the
// provider, or handed there to someone else, moves nobody onto another desk account, and a user
// linked to one subject is refused to any other. An email no user has is refused or becomes an
// agent with no queues, as the desk's setting says (UnknownEmails).
//
// A sign-in under way is stored server side (sso_logins), found by its state and bound to the
// browser that started it by a cookie, so that any instance can finish it and a callback carried
// to another browser finds nothing. Inside a CRM's iframe the sign-in runs in a popup, since
// identity providers refuse to be framed; it ends there as a one-time ticket, which the popup hands
// to the sidebar that opened it and the sidebar trades for a session of its own (its cookies are
// kept apart from the popup's, per embedding site). A password typed in the desk's own login
// popup ends the same way (ticket.go).
package sso

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/oauth2"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
)

// Config is what the deployment says of its identity provider (OIDC_* settings).
type Config struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// AllowedDomains, when set, are the email domains that may sign in (lower case).
	AllowedDomains []string
}

// Enabled reports whether single sign-on is configured.
func (c Config) Enabled() bool { return c.Issuer != "" }

// Check refuses a configuration that names an issuer without its client.
func (c Config) Check() error {
	if !c.Enabled() {
		return nil
	}
	if c.ClientID == "" || c.ClientSecret == "" {
		return errors.New("OIDC_ISSUER is set: OIDC_CLIENT_ID and OIDC_CLIENT_SECRET are required too")
	}
	return nil
}

// How long a sign-in may stay at the identity provider, and how long a popup's ticket waits for
// its sidebar.
const (
	loginTTL  = 10 * time.Minute
	ticketTTL = time.Minute
)

// maxStartsPerAddress caps the sign-ins one client address has under way: starting one writes a
// row, and anyone may start one. A person needs one or two; an office behind one NAT address
// shares the cap.
const maxStartsPerAddress = 30

// providerTimeout bounds each request to the identity provider.
const providerTimeout = 10 * time.Second

// Unknown-email policies.
const (
	RefuseUnknown = "refuse"
	CreateUnknown = "create"
)

// Service runs sign-ins against one identity provider.
type Service struct {
	db          *pgxpool.Pool
	people      *auth.Service
	cfg         Config
	redirectURL string
	now         func() time.Time

	// The provider's discovery document is fetched on first use and kept: a desk must start
	// while its identity provider is down, and serve passwords meanwhile.
	mu       sync.Mutex
	provider *oidc.Provider
}

// New returns a Service whose provider sends people back to redirectURL (BASE_URL/sso/callback).
func New(db *pgxpool.Pool, people *auth.Service, cfg Config, redirectURL string) *Service {
	return &Service{db: db, people: people, cfg: cfg, redirectURL: redirectURL, now: time.Now}
}

// client carries every request to the provider, with its own time limit; the key set it fetches
// later outlives the request that first asked for it.
func (s *Service) client() context.Context {
	return oidc.ClientContext(context.Background(), &http.Client{Timeout: providerTimeout})
}

func (s *Service) oauth() (*oauth2.Config, *oidc.Provider, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider == nil {
		p, err := oidc.NewProvider(s.client(), s.cfg.Issuer)
		if err != nil {
			return nil, nil, desk.Errorf(desk.Unavailable, "the identity provider at %s cannot be reached: %v", s.cfg.Issuer, err)
		}
		s.provider = p
	}
	return &oauth2.Config{
		ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, RedirectURL: s.redirectURL,
		Endpoint: s.provider.Endpoint(), Scopes: []string{oidc.ScopeOpenID, "email", "profile"},
	}, s.provider, nil
}

// Started is a sign-in on its way to the provider: the browser goes to URL carrying Browser in a
// cookie, which the callback must bring back.
type Started struct {
	URL     string
	Browser string
}

// Start begins a sign-in from a client address that returns to next (a path on the desk) and, in
// a popup, ends as a ticket for the window that opened it.
func (s *Service) Start(ctx context.Context, next string, popup bool, address string) (Started, error) {
	conf, _, err := s.oauth()
	if err != nil {
		return Started{}, err
	}
	state, nonce, browser := rand.Text(), rand.Text(), rand.Text()
	verifier := oauth2.GenerateVerifier()
	now := s.now()
	// The count and the insert are one statement, not one transaction: parallel starts can pass
	// the cap by as many as run at once, which bounds the rows all the same.
	tag, err := s.db.Exec(ctx, `
		INSERT INTO sso_logins (state_hash, address, browser_hash, nonce, verifier, next, popup, expires_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8
		WHERE (SELECT count(*) FROM sso_logins WHERE address = $2 AND expires_at > $9) < $10`,
		hash(state), auth.ThrottleKey(address), hash(browser), nonce, verifier, next, popup, now.Add(loginTTL), now, maxStartsPerAddress)
	if err != nil {
		return Started{}, err
	}
	if tag.RowsAffected() == 0 {
		return Started{}, &desk.Error{Code: desk.RateLimited, RetryAfter: loginTTL,
			Message: fmt.Sprintf("%d sign-ins are under way from this address; finish one, or try again within %s", maxStartsPerAddress, loginTTL)}
	}
	return Started{
		URL:     conf.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)),
		Browser: browser,
	}, nil
}

// Finished is a sign-in that came back: the user, where they go next, and for a popup the ticket
// its opener trades for a session (no session is made here then).
type Finished struct {
	User   auth.User
	Next   string
	Popup  bool
	Ticket string
}

// Finish completes the sign-in the provider sent back with state and code, in the browser that
// brought its cookie. The stored sign-in is used once, whatever the outcome.
func (s *Service) Finish(ctx context.Context, browser, state, code string) (Finished, error) {
	conf, provider, err := s.oauth()
	if err != nil {
		return Finished{}, err
	}
	var (
		browserHash     []byte
		address         string
		nonce, verifier string
		f               Finished
		expires         time.Time
		stateHash       = hash(state)
		refused         = func(format string, args ...any) error {
			return desk.Errorf(desk.Unauthorized, "single sign-on refused: "+format, args...)
		}
	)
	err = s.db.QueryRow(ctx, `
		DELETE FROM sso_logins WHERE state_hash = $1 AND ticket_hash IS NULL
		RETURNING address, browser_hash, nonce, verifier, next, popup, expires_at`, stateHash).
		Scan(&address, &browserHash, &nonce, &verifier, &f.Next, &f.Popup, &expires)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Finished{}, refused("this sign-in is unknown or was used already; start again")
	case err != nil:
		return Finished{}, err
	case !s.now().Before(expires):
		return Finished{}, refused("this sign-in took over %s; start again", loginTTL)
	case browser == "" || !slices.Equal(browserHash, hash(browser)):
		return Finished{}, refused("this sign-in was started in another browser; start again here")
	}
	token, err := conf.Exchange(oidc.ClientContext(ctx, &http.Client{Timeout: providerTimeout}), code, oauth2.VerifierOption(verifier))
	var answered *oauth2.RetrieveError
	if errors.As(err, &answered) {
		return Finished{}, refused("the identity provider did not take the sign-in's code: %v", err)
	}
	if err != nil {
		return Finished{}, desk.Errorf(desk.Unavailable, "the identity provider at %s cannot be reached: %v", s.cfg.Issuer, err)
	}
	raw, _ := token.Extra("id_token").(string)
	if raw == "" {
		return Finished{}, refused("the identity provider sent no ID token")
	}
	idToken, err := provider.Verifier(&oidc.Config{ClientID: s.cfg.ClientID, Now: s.now}).Verify(oidc.ClientContext(ctx, &http.Client{Timeout: providerTimeout}), raw)
	var expired *oidc.TokenExpiredError
	if errors.As(err, &expired) {
		return Finished{}, refused("the ID token expired at %s", expired.Expiry.UTC().Format(time.RFC3339))
	}
	if err != nil {
		return Finished{}, refused("the ID token does not verify: %v", err)
	}
	if idToken.Nonce != nonce {
		return Finished{}, refused("the ID token's nonce is not this sign-in's")
	}
	var said claims
	if err := idToken.Claims(&said); err != nil {
		return Finished{}, refused("the ID token's claims cannot be read: %v", err)
	}
	// The verifier checked that the desk is among the audience. OpenID Connect Core 3.1.3.7 also
	// asks a client to refuse a token made for audiences it does not trust, or for another
	// authorized party: the desk trusts itself alone.
	if others := slices.DeleteFunc(slices.Clone(idToken.Audience), func(a string) bool { return a == s.cfg.ClientID }); len(others) > 0 {
		return Finished{}, refused("the ID token's audience also names %s, which this desk does not trust", strings.Join(others, ", "))
	}
	if said.AuthorizedParty != "" && said.AuthorizedParty != s.cfg.ClientID {
		return Finished{}, refused("the ID token was issued to %s (azp), not to this desk", said.AuthorizedParty)
	}
	f.User, err = s.userFor(ctx, identity{issuer: idToken.Issuer, subject: idToken.Subject}, said)
	if err != nil || !f.Popup {
		return f, err
	}
	f.Ticket = rand.Text()
	return f, insertTicket(ctx, s.db, stateHash, address, browserHash, f.Next, s.now().Add(ticketTTL), f.Ticket, f.User.ID)
}

// allowedDomain refuses an email outside OIDC_ALLOWED_DOMAINS, when they are set.
func (s *Service) allowedDomain(email string) error {
	if len(s.cfg.AllowedDomains) == 0 {
		return nil
	}
	at := strings.LastIndexByte(email, '@')
	if at >= 0 && slices.Contains(s.cfg.AllowedDomains, strings.ToLower(email[at+1:])) {
		return nil
	}
	return desk.Errorf(desk.Forbidden, "single sign-on refused: %s is not of a domain this desk allows (%s)",
		email, strings.Join(s.cfg.AllowedDomains, ", "))
}

// claims are what the desk reads of an ID token besides its subject.
type claims struct {
	Email           string `json:"email"`
	EmailVerified   *bool  `json:"email_verified"`
	Name            string `json:"name"`
	AuthorizedParty string `json:"azp"`
}

// identity is a person's account at an identity provider.
type identity struct{ issuer, subject string }

// userFor is the user linked to the identity; or, on its first sign-in, the enabled user with the
// verified email, whom it links to; or, when the desk creates unknown emails, a new agent with no
// queues, who signs in through the identity provider only.
func (s *Service) userFor(ctx context.Context, id identity, c claims) (auth.User, error) {
	var linked int64
	err := s.db.QueryRow(ctx, `SELECT user_id FROM sso_identities WHERE issuer = $1 AND subject = $2`, id.issuer, id.subject).Scan(&linked)
	switch {
	case err == nil:
		u, err := s.people.UserByID(ctx, linked)
		if desk.ErrorCode(err) == desk.NotFound {
			return auth.User{}, desk.Errorf(desk.Forbidden, "single sign-on refused: the desk account linked to this sign-in is disabled")
		}
		return u, err
	case !errors.Is(err, pgx.ErrNoRows):
		return auth.User{}, err
	}
	if c.Email == "" {
		return auth.User{}, desk.Errorf(desk.Unauthorized, "single sign-on refused: the identity provider sent no email (the desk asks for the email scope)")
	}
	if c.EmailVerified == nil || !*c.EmailVerified {
		return auth.User{}, desk.Errorf(desk.Unauthorized, "single sign-on refused: the identity provider has not verified %s", c.Email)
	}
	email, err := auth.NormalizeEmail(c.Email)
	if err != nil {
		return auth.User{}, desk.Errorf(desk.Forbidden, "single sign-on refused: %s", desk.ErrorMessage(err))
	}
	if err := s.allowedDomain(email); err != nil {
		return auth.User{}, err
	}
	u, err := s.people.UserByEmail(ctx, email)
	if err == nil {
		return s.linked(ctx, id, u)
	}
	if desk.ErrorCode(err) != desk.NotFound {
		return u, err
	}
	policy, err := UnknownEmails(ctx, s.db)
	if err != nil {
		return auth.User{}, err
	}
	if policy != CreateUnknown {
		return auth.User{}, desk.Errorf(desk.Forbidden,
			"single sign-on refused: no desk user has the email %s; an admin can add one, or let sign-in create agents (web sso unknown-emails create)", email)
	}
	name := c.Name
	if strings.TrimSpace(name) == "" {
		name = email[:max(strings.IndexByte(email, '@'), 1)]
	}
	u, err = s.createAgent(ctx, id, auth.NewUser{Email: email, DisplayName: name, Role: auth.RoleAgent, SSOOnly: true})
	if desk.ErrorCode(err) != desk.Conflict {
		return u, err
	}
	// Created meanwhile by a sign-in of the same person in another tab, or a disabled account.
	u, err = s.people.UserByEmail(ctx, email)
	if desk.ErrorCode(err) == desk.NotFound {
		return auth.User{}, desk.Errorf(desk.Forbidden, "single sign-on refused: the desk account of %s is disabled", email)
	}
	if err != nil {
		return auth.User{}, err
	}
	return s.linked(ctx, id, u)
}

// linked is the user once the identity is linked to them.
func (s *Service) linked(ctx context.Context, id identity, u auth.User) (auth.User, error) {
	if err := s.link(ctx, s.db, id, u); err != nil {
		return auth.User{}, err
	}
	return u, nil
}

// link ties the identity to the user, unless either is linked already: the identity to another
// user meanwhile (two first sign-ins at once), or the user to another identity at this provider
// (whoever holds the address there now is not the person the desk account was linked to).
func (s *Service) link(ctx context.Context, db auth.Querier, id identity, u auth.User) error {
	var linked int64
	err := db.QueryRow(ctx, `
		INSERT INTO sso_identities (issuer, subject, user_id, email, linked_at) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT DO NOTHING RETURNING user_id`, id.issuer, id.subject, u.ID, u.Email, s.now()).Scan(&linked)
	if err == nil || !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	// A statement of its own, so that it sees a link another sign-in committed while the insert
	// waited for it.
	err = db.QueryRow(ctx, `SELECT user_id FROM sso_identities WHERE issuer = $1 AND subject = $2`, id.issuer, id.subject).Scan(&linked)
	if errors.Is(err, pgx.ErrNoRows) || (err == nil && linked != u.ID) {
		return desk.Errorf(desk.Forbidden, "single sign-on refused: the desk account of %s is linked to another account at the identity provider; "+
			"an admin can unlink it (web sso unlink --email %s)", u.Email, u.Email)
	}
	return err
}

// createAgent creates the user, linked to the identity, and logs it, as an admin's creation is,
// with the person as its actor: their sign-in made the account.
func (s *Service) createAgent(ctx context.Context, id identity, n auth.NewUser) (auth.User, error) {
	var u auth.User
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		if u, err = auth.CreateUser(ctx, tx, n); err != nil {
			return err
		}
		if err := s.link(ctx, tx, id, u); err != nil {
			return err
		}
		b := &pgx.Batch{}
		if err := events.Queue(b, events.Change{Kind: events.UserCreated, UserID: u.ID, ActorUser: &u.ID, At: s.now(),
			Detail: map[string]any{"email": u.Email, "name": u.DisplayName, "role": u.Role, "capacity": u.Capacity,
				"queues": []int64{}, "sso_only": true, "via": "single sign-on"}}); err != nil {
			return err
		}
		return tx.SendBatch(ctx, b).Close()
	})
	return u, err
}

// Unlink ends, inside tx, the user's links to accounts at identity providers and returns the
// issuers they were at: their next sign-in is matched by its verified email again, as a first
// one. An admin does it when a person's account at the provider was replaced by a new one.
func Unlink(ctx context.Context, tx pgx.Tx, userID int64) ([]string, error) {
	rows, err := tx.Query(ctx, `DELETE FROM sso_identities WHERE user_id = $1 RETURNING issuer`, userID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// Purge deletes sign-ins and tickets past their time.
func Purge(ctx context.Context, db *pgxpool.Pool, now time.Time) (int64, error) {
	tag, err := db.Exec(ctx, `DELETE FROM sso_logins WHERE expires_at <= $1`, now)
	return tag.RowsAffected(), err
}

// UnknownEmails is the desk's setting for a verified email no user has: RefuseUnknown or
// CreateUnknown.
func UnknownEmails(ctx context.Context, db *pgxpool.Pool) (string, error) {
	var policy string
	err := db.QueryRow(ctx, `SELECT unknown_emails FROM sso_settings`).Scan(&policy)
	return policy, err
}

// SetUnknownEmails changes that setting inside tx and returns what it was.
func SetUnknownEmails(ctx context.Context, tx pgx.Tx, policy string) (string, error) {
	if policy != RefuseUnknown && policy != CreateUnknown {
		return "", &desk.Error{Code: desk.Invalid, Details: map[string]string{"unknown_emails": "pick refuse or create"},
			Message: fmt.Sprintf("unknown emails: want %s or %s, not %q", RefuseUnknown, CreateUnknown, policy)}
	}
	var was string
	if err := tx.QueryRow(ctx, `SELECT unknown_emails FROM sso_settings FOR UPDATE`).Scan(&was); err != nil {
		return "", err
	}
	_, err := tx.Exec(ctx, `UPDATE sso_settings SET unknown_emails = $1`, policy)
	return was, err
}

// hash keeps the secrets of a sign-in (state, browser cookie, ticket) out of the table: a reader
// of the table cannot finish someone's sign-in.
func hash(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// ParseDomains reads OIDC_ALLOWED_DOMAINS: comma-separated domains.
func ParseDomains(v string) ([]string, error) {
	var domains []string
	for d := range strings.SplitSeq(v, ",") {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "" {
			continue
		}
		if strings.ContainsAny(d, "@/ :") || !strings.Contains(d, ".") {
			return nil, fmt.Errorf("OIDC_ALLOWED_DOMAINS: %q is not a domain such as example.com", d)
		}
		domains = append(domains, d)
	}
	return domains, nil
}
