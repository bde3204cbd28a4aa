package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"maps"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/desk"
)

// Session is a logged-in browser: the token goes in its cookie, only its hash in the database.
type Session struct {
	Token     string
	ExpiresAt time.Time
}

func hashToken(token string) []byte {
	sum := sha256.Sum256([]byte(token))
	return sum[:]
}

// sessionCacheTTL is how long a verified session is trusted without asking the database again:
// otherwise every page and every action pays a query before it starts. Every instance forgets a
// user's sessions as soon as its hub reads a change of their access from the log (ForgetUser),
// so this only bounds how late an instance notices one should that read lag; the instance that
// served a logout forgets the session at once.
const sessionCacheTTL = 5 * time.Second

// sessionCacheMax bounds the cache; past it the cache starts over rather than grow.
const sessionCacheMax = 10000

type cachedSession struct {
	user  User
	until time.Time // the sooner of the cache's and the session's expiry
}

// StartSession logs a user in. Each login gets a new random token, so a token planted before
// login (session fixation) is never promoted.
func (s *Service) StartSession(ctx context.Context, userID int64) (Session, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return Session{}, err
	}
	sess := Session{Token: base64.RawURLEncoding.EncodeToString(raw), ExpiresAt: s.now().Add(s.sessionTTL)}
	_, err := s.db.Exec(ctx, `
		WITH login AS (UPDATE users SET last_login_at = $4 WHERE id = $2)
		INSERT INTO sessions (token_hash, user_id, expires_at) VALUES ($1, $2, $3)`,
		hashToken(sess.Token), userID, sess.ExpiresAt, s.now())
	return sess, err
}

// SessionUser returns the user a live session token belongs to, as the database said at most
// sessionCacheTTL ago, or less: a change of the user's access forgets it sooner (ForgetUser).
func (s *Service) SessionUser(ctx context.Context, token string) (User, error) {
	hash := hashToken(token)
	now := s.now()
	s.sessionsMu.Lock()
	cached, ok := s.sessions[string(hash)]
	s.sessionsMu.Unlock()
	if ok && now.Before(cached.until) {
		return cached.user, nil
	}
	forgets := s.forgets.Load()
	u, expires, err := s.lookUpSession(ctx, hash, now)
	if err != nil {
		return User{}, err
	}
	until := now.Add(sessionCacheTTL)
	if expires.Before(until) {
		until = expires
	}
	s.sessionsMu.Lock()
	// A user forgotten while the database was asked may have been read as they were before the
	// change: that answer serves this request, but is not kept for the next ones.
	if s.forgets.Load() == forgets {
		if len(s.sessions) >= sessionCacheMax {
			clear(s.sessions)
		}
		s.sessions[string(hash)] = cachedSession{user: u, until: until}
	}
	s.sessionsMu.Unlock()
	return u, nil
}

// VerifySession is SessionUser asked of the database, never of the cache: for a caller that must
// not act on a change of access the cache has not heard of yet. It also says when the session
// ends, for a caller that outlives the request (a websocket).
func (s *Service) VerifySession(ctx context.Context, token string) (User, time.Time, error) {
	return s.lookUpSession(ctx, hashToken(token), s.now())
}

func (s *Service) lookUpSession(ctx context.Context, hash []byte, now time.Time) (User, time.Time, error) {
	var u User
	var expires time.Time
	err := s.db.QueryRow(ctx, `
		SELECT u.id, u.email, u.display_name, u.role, u.capacity, u.must_change_password, s.expires_at
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.token_hash = $1 AND s.expires_at > $2 AND NOT u.disabled`,
		hash, now).Scan(&u.ID, &u.Email, &u.DisplayName, &u.Role, &u.Capacity, &u.MustChangePassword, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, time.Time{}, desk.Errorf(desk.NotFound, "no such user")
	}
	return u, expires, err
}

// ForgetUser drops this instance's cached sessions of the user, whose access changed: their next
// request is checked against the database.
func (s *Service) ForgetUser(userID int64) {
	s.sessionsMu.Lock()
	defer s.sessionsMu.Unlock()
	s.forgets.Add(1)
	maps.DeleteFunc(s.sessions, func(_ string, c cachedSession) bool { return c.user.ID == userID })
}

// EndSession logs a browser out inside tx and returns whose session it was (0 when there was
// none, which is not an error). This instance stops trusting the session at once, even before tx
// commits: an early forget only costs a query.
func (s *Service) EndSession(ctx context.Context, tx pgx.Tx, token string) (int64, error) {
	hash := hashToken(token)
	s.sessionsMu.Lock()
	delete(s.sessions, string(hash))
	s.sessionsMu.Unlock()
	var userID int64
	err := tx.QueryRow(ctx, `DELETE FROM sessions WHERE token_hash = $1 RETURNING user_id`, hash).Scan(&userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return userID, err
}

// Purge deletes sessions past their expiry and login failures past the throttling window, and
// reports how many rows went.
func (s *Service) Purge(ctx context.Context) (int64, error) {
	sessions, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE expires_at <= $1`, s.now())
	if err != nil {
		return 0, err
	}
	failures, err := s.db.Exec(ctx, `DELETE FROM login_failures WHERE at <= $1`, s.now().Add(-loginWindow))
	return sessions.RowsAffected() + failures.RowsAffected(), err
}
