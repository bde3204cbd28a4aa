package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"time"
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

// SessionUser returns the user a live session token belongs to.
func (s *Service) SessionUser(ctx context.Context, token string) (User, error) {
	return scanUser(s.db.QueryRow(ctx, `
		SELECT u.id, u.email, u.display_name, u.role, u.capacity
		FROM sessions s JOIN users u ON u.id = s.user_id
		WHERE s.token_hash = $1 AND s.expires_at > $2 AND NOT u.disabled`,
		hashToken(token), s.now()))
}

// EndSession logs a browser out; ending an unknown session is not an error.
func (s *Service) EndSession(ctx context.Context, token string) error {
	_, err := s.db.Exec(ctx, `DELETE FROM sessions WHERE token_hash = $1`, hashToken(token))
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
