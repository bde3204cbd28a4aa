package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
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
// otherwise every page and every action pays a query before it starts. It bounds how late the
// other instances notice a logout, a disabled account or a changed role; the instance that
// served the logout forgets the session at once.
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
	_, err := s.db.Exec(ctx,
		`INSERT INTO sessions (token_hash, user_id, expires_at) VALUES ($1, $2, $3)`,
		hashToken(sess.Token), userID, sess.ExpiresAt)
	return sess, err
}

// SessionUser returns the user a live session token belongs to, as the database said at most
// sessionCacheTTL ago.
func (s *Service) SessionUser(ctx context.Context, token string) (User, error) {
	hash := hashToken(token)
	now := s.now()
	s.sessionsMu.Lock()
	cached, ok := s.sessions[string(hash)]
	s.sessionsMu.Unlock()
	if ok && now.Before(cached.until) {
		return cached.user, nil
	}
	var u User
	var expires time.Time
	err := s.db.QueryRow(ctx, `
		SELECT u.id, u.email, u.display_name, u.role, u.capacity, s.expires_at
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.token_hash = $1 AND s.expires_at > $2 AND NOT u.disabled`,
		hash, now).Scan(&u.ID, &u.Email, &u.DisplayName, &u.Role, &u.Capacity, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return User{}, desk.Errorf(desk.NotFound, "no such user")
	}
	if err != nil {
		return User{}, err
	}
	until := now.Add(sessionCacheTTL)
	if expires.Before(until) {
		until = expires
	}
	s.sessionsMu.Lock()
	if len(s.sessions) >= sessionCacheMax {
		clear(s.sessions)
	}
	s.sessions[string(hash)] = cachedSession{user: u, until: until}
	s.sessionsMu.Unlock()
	return u, nil
}

// EndSession logs a browser out; ending an unknown session is not an error.
func (s *Service) EndSession(ctx context.Context, token string) error {
	hash := hashToken(token)
	s.sessionsMu.Lock()
	delete(s.sessions, string(hash))
	s.sessionsMu.Unlock()
	_, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE token_hash = $1`, hash)
	return err
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
