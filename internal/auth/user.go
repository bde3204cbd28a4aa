// Package auth holds the desk's people: users and their roles, password checks and the sessions
// that keep them logged in.
package auth

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/desk"
)

// Role is what a user may do. Roles are ordered: each one may do everything the ones below it may.
type Role string

const (
	RoleAgent      Role = "agent"
	RoleSupervisor Role = "supervisor"
	RoleAdmin      Role = "admin"
)

// Roles lists the valid roles from least to most privileged.
var Roles = []Role{RoleAgent, RoleSupervisor, RoleAdmin}

func (r Role) rank() int {
	for i, known := range Roles {
		if r == known {
			return i
		}
	}
	return -1
}

// Valid reports whether r is one of Roles.
func (r Role) Valid() bool { return r.rank() >= 0 }

// AtLeast reports whether r carries the privileges of min.
func (r Role) AtLeast(min Role) bool { return r.Valid() && r.rank() >= min.rank() }

// ParseRole turns user input into a Role.
func ParseRole(s string) (Role, error) {
	r := Role(strings.ToLower(strings.TrimSpace(s)))
	if !r.Valid() {
		return "", desk.Errorf(desk.Invalid, "role %q is not one of agent, supervisor, admin", s)
	}
	return r, nil
}

// User is a person who logs in to the desk.
type User struct {
	ID          int64
	Email       string
	DisplayName string
	Role        Role
	Capacity    int
	// MustChangePassword is set by an admin's reset: the temporary password lets them in only to
	// choose their own.
	MustChangePassword bool
}

// NewUser is what it takes to create a user.
type NewUser struct {
	Email       string
	DisplayName string
	Role        Role
	Password    string
	Capacity    int // packages held at once; 0 means the default
	// SSOOnly users sign in through the identity provider only; their password, if any, is
	// refused. One without a password gets a random one nobody knows.
	SSOOnly bool
}

// MinPasswordLen follows NIST SP 800-63B: length matters, composition rules do not.
const MinPasswordLen = 8

// MaxEmailLen is the longest email address, in characters (RFC 5321). A login with a longer one
// is refused before it is looked up, as no account has one, and it would not fit the index of
// the login failures that throttling records.
const MaxEmailLen = 254

// DefaultCapacity is how many packages an agent holds at once unless told otherwise.
const DefaultCapacity = 3

func (n *NewUser) validate() error {
	n.DisplayName = strings.TrimSpace(n.DisplayName)
	bad := desk.Fields{}
	email, err := NormalizeEmail(n.Email)
	if err != nil {
		bad.Add("email", "%s", desk.ErrorMessage(err))
	} else if addr, err := mail.ParseAddress(email); err != nil || addr.Address != email {
		bad.Add("email", "email %q is not a valid address", strings.TrimSpace(n.Email))
	}
	n.Email = email
	if n.DisplayName == "" {
		bad.Add("name", "name is required")
	}
	if !n.Role.Valid() {
		bad.Add("role", "role %q is not one of agent, supervisor, admin", n.Role)
	}
	if n.SSOOnly && n.Password == "" {
		random, err := randomToken(32)
		if err != nil {
			return err
		}
		n.Password = random
	}
	if len(n.Password) < MinPasswordLen {
		bad.Add("password", "password must be at least %d characters", MinPasswordLen)
	}
	if n.Capacity == 0 {
		n.Capacity = DefaultCapacity
	}
	if n.Capacity < 0 || n.Capacity > MaxCapacity {
		bad.Add("capacity", "capacity must be between 1 and %d", MaxCapacity)
	}
	return bad.Err()
}

// MaxCapacity is the most packages anyone holds at once: more is a typo, not a workload.
const MaxCapacity = 100

// Service stores users and sessions in PostgreSQL.
type Service struct {
	db         *pgxpool.Pool
	sessionTTL time.Duration
	now        func() time.Time

	// dummyHash is verified against when an email is unknown, so that a login answers in the
	// same time whether or not the account exists.
	dummyOnce sync.Once
	dummyHash string

	// passwordChecks holds a token for each argon2id check running (see passwordCheckSlot).
	passwordChecks    chan struct{}
	passwordCheckWait time.Duration

	botsMu sync.Mutex
	bots   map[string]cachedBot // by key prefix
	// botForgets counts ForgetBots calls, so that a lookup overtaken by one is not cached.
	botForgets atomic.Uint64

	sessionsMu sync.Mutex
	sessions   map[string]cachedSession // by token hash
	// forgets counts ForgetUser calls, so that a lookup overtaken by one is not cached.
	forgets atomic.Uint64
}

// DefaultSessionTTL is how long a login lasts: a working day and some.
const DefaultSessionTTL = 12 * time.Hour

// NewService returns a Service over db.
func NewService(db *pgxpool.Pool) *Service {
	return &Service{db: db, sessionTTL: DefaultSessionTTL, now: time.Now, bots: make(map[string]cachedBot),
		sessions: make(map[string]cachedSession), passwordChecks: make(chan struct{}, maxPasswordChecks),
		passwordCheckWait: defaultPasswordCheckWait}
}

// CreateUser adds a user, their email as NormalizeEmail writes it. A second user with the same
// email (any case of its ASCII letters) is a Conflict.
func (s *Service) CreateUser(ctx context.Context, n NewUser) (User, error) {
	return CreateUser(ctx, s.db, n)
}

// CreateUser is Service.CreateUser through db, a caller's transaction.
func CreateUser(ctx context.Context, db Querier, n NewUser) (User, error) {
	if err := n.validate(); err != nil {
		return User{}, err
	}
	hash, err := HashPassword(n.Password)
	if err != nil {
		return User{}, err
	}
	u := User{Email: n.Email, DisplayName: n.DisplayName, Role: n.Role, Capacity: n.Capacity}
	err = db.QueryRow(ctx, `
		INSERT INTO users (email, display_name, role, password_hash, capacity, password_login)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
		n.Email, n.DisplayName, n.Role, hash, n.Capacity, !n.SSOOnly).Scan(&u.ID)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return User{}, &desk.Error{Code: desk.Conflict, Message: fmt.Sprintf("a user with email %s already exists", n.Email),
			Details: map[string]string{"email": "a user with this email already exists"}}
	}
	return u, err
}

const userColumns = `id, email, display_name, role, capacity, must_change_password`

func scanUser(row pgx.Row) (User, error) {
	var u User
	err := row.Scan(&u.ID, &u.Email, &u.DisplayName, &u.Role, &u.Capacity, &u.MustChangePassword)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, desk.Errorf(desk.NotFound, "no such user")
	}
	return u, err
}

// UserByEmail finds an enabled user by email (see NormalizeEmail); an email it refuses is Invalid.
func (s *Service) UserByEmail(ctx context.Context, email string) (User, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return User{}, err
	}
	return scanUser(s.db.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE email = $1 AND NOT disabled`, email))
}

// UserByID finds an enabled user by id.
func (s *Service) UserByID(ctx context.Context, id int64) (User, error) {
	return scanUser(s.db.QueryRow(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1 AND NOT disabled`, id))
}

// SetPasswordLogin turns the user's password login on or off inside tx (off: they sign in through
// the identity provider only) and returns whether it was on.
func SetPasswordLogin(ctx context.Context, tx pgx.Tx, userID int64, on bool) (bool, error) {
	var was bool
	err := tx.QueryRow(ctx, `SELECT password_login FROM users WHERE id = $1 FOR UPDATE`, userID).Scan(&was)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, desk.Errorf(desk.NotFound, "no user has id %d", userID)
	}
	if err != nil || was == on {
		return was, err
	}
	_, err = tx.Exec(ctx, `UPDATE users SET password_login = $2 WHERE id = $1`, userID, on)
	return was, err
}

// Authenticate checks an email and password from a client address. Both a wrong email and a wrong
// password give the same Unauthorized error, in about the same time; an attempt past a throttling
// limit (see throttle.go) is refused with RateLimited before its password is checked, whether or
// not the account exists. An email NormalizeEmail refuses is Invalid, before anything else: no
// account has it.
func (s *Service) Authenticate(ctx context.Context, email, password, address string) (User, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return User{}, err
	}
	failure, err := s.reserveFailure(ctx, email, address)
	if err != nil {
		return User{}, err
	}
	u, err := s.checkPassword(ctx, email, password)
	if desk.ErrorCode(err) != desk.Unauthorized {
		// Only a wrong password counts. The reservation is given back even if the client has gone.
		if rerr := s.releaseFailure(context.WithoutCancel(ctx), failure); rerr != nil {
			return User{}, rerr
		}
	}
	return u, err
}

func (s *Service) checkPassword(ctx context.Context, email, password string) (User, error) {
	var u User
	var hash string
	var passwordLogin, disabled bool
	err := s.db.QueryRow(ctx,
		`SELECT `+userColumns+`, password_hash, password_login, disabled FROM users WHERE email = $1`,
		email).Scan(&u.ID, &u.Email, &u.DisplayName, &u.Role, &u.Capacity, &u.MustChangePassword, &hash, &passwordLogin, &disabled)
	unknown := errors.Is(err, pgx.ErrNoRows)
	if err != nil && !unknown {
		return User{}, err
	}
	release, err := s.passwordCheckSlot(ctx)
	if err != nil {
		return User{}, err
	}
	defer release()
	if unknown {
		s.dummyOnce.Do(func() { s.dummyHash, _ = HashPassword("not a real password") })
		hash = s.dummyHash
	}
	ok, verr := VerifyPassword(password, hash)
	if verr != nil {
		return User{}, verr
	}
	if !ok || unknown {
		return User{}, desk.Errorf(desk.Unauthorized, "email or password is wrong")
	}
	// Said only to whoever knows the password, so that it tells no one else the account exists.
	// They count as failures towards throttling like a wrong password.
	if disabled {
		return User{}, desk.Errorf(desk.Unauthorized, "your account is disabled; ask an admin to enable it again")
	}
	if !passwordLogin {
		return User{}, desk.Errorf(desk.Unauthorized, "this account signs in with single sign-on only; use \"Sign in with SSO\"")
	}
	return u, nil
}

// Disable turns the user's login off inside tx and ends their sessions, so that an account
// enabled again later does not bring old cookies back. It reports false when the account was off
// already; NotFound when there is no such user.
func Disable(ctx context.Context, tx pgx.Tx, userID int64) (bool, error) {
	var was bool
	err := tx.QueryRow(ctx, `SELECT disabled FROM users WHERE id = $1 FOR UPDATE`, userID).Scan(&was)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, desk.Errorf(desk.NotFound, "no user has id %d", userID)
	}
	if err != nil {
		return false, err
	}
	_, err = tx.Exec(ctx, `
		WITH gone AS (DELETE FROM sessions WHERE user_id = $1)
		UPDATE users SET disabled = true WHERE id = $1`, userID)
	return !was, err
}

// SetRole gives the user a role inside tx and returns the role they had; NotFound when there is
// no such user.
func SetRole(ctx context.Context, tx pgx.Tx, userID int64, role Role) (Role, error) {
	if !role.Valid() {
		return "", desk.Errorf(desk.Invalid, "role %q is not one of agent, supervisor, admin", role)
	}
	var was Role
	err := tx.QueryRow(ctx, `SELECT role FROM users WHERE id = $1 FOR UPDATE`, userID).Scan(&was)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", desk.Errorf(desk.NotFound, "no user has id %d", userID)
	}
	if err != nil || was == role {
		return was, err
	}
	_, err = tx.Exec(ctx, `UPDATE users SET role = $2 WHERE id = $1`, userID, role)
	return was, err
}
