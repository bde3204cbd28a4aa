package auth

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/clocktest"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// TestSessionRevocationReachesEveryInstance runs two instances' services on one database: a
// logout takes effect at once where it happened and within sessionCacheTTL on the other, or as
// soon as the other forgets the user, and so does disabling the account.
func TestSessionRevocationReachesEveryInstance(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	c := clocktest.New(time.Now())
	a, b := NewService(db), NewService(db)
	a.now, b.now = c.Now, c.Now
	u, err := a.CreateUser(ctx, NewUser{Email: "dana@example.com", DisplayName: "Dana", Role: RoleAgent, Password: "long-enough"})
	if err != nil {
		t.Fatal(err)
	}
	live := func(s *Service, token string) bool {
		t.Helper()
		got, err := s.SessionUser(ctx, token)
		if desk.ErrorCode(err) == desk.NotFound {
			return false
		}
		if err != nil || got.ID != u.ID {
			t.Fatalf("session user = %+v, %v; want %d", got, err, u.ID)
		}
		return true
	}

	sess, err := a.StartSession(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !live(a, sess.Token) || !live(b, sess.Token) {
		t.Fatal("a new session is not live on both instances")
	}
	if err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		userID, err := a.EndSession(ctx, tx, sess.Token)
		if err == nil && userID != u.ID {
			t.Errorf("EndSession says the session was user %d's, want %d", userID, u.ID)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if live(a, sess.Token) {
		t.Error("the instance that logged the session out still accepts it")
	}
	c.Advance(sessionCacheTTL - time.Millisecond)
	if !live(b, sess.Token) {
		t.Error("the other instance asked the database before its cache ran out: the cache saves nothing")
	}
	c.Advance(time.Millisecond)
	if live(b, sess.Token) {
		t.Errorf("the other instance accepts a logged-out session after %s", sessionCacheTTL)
	}

	sess, err = a.StartSession(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !live(b, sess.Token) {
		t.Fatal("second session not live")
	}
	if _, err := db.Exec(ctx, `UPDATE users SET disabled = true WHERE id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	c.Advance(sessionCacheTTL)
	if live(b, sess.Token) || live(a, sess.Token) {
		t.Errorf("a disabled user's session is still accepted after %s", sessionCacheTTL)
	}

	if _, err := db.Exec(ctx, `UPDATE users SET disabled = false WHERE id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	if !live(b, sess.Token) {
		t.Fatal("the session is not live again once its user is enabled")
	}
	if _, err := db.Exec(ctx, `UPDATE users SET disabled = true WHERE id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
	b.ForgetUser(u.ID)
	if live(b, sess.Token) {
		t.Error("an instance that forgot the user still accepts their session from its cache")
	}
}

// TestSessionCacheEndsWithTheSession never trusts a cached session past its own expiry.
func TestSessionCacheEndsWithTheSession(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	c := clocktest.New(time.Now())
	s := NewService(db)
	s.now, s.sessionTTL = c.Now, time.Second
	u, err := s.CreateUser(ctx, NewUser{Email: "dana@example.com", DisplayName: "Dana", Role: RoleAgent, Password: "long-enough"})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := s.StartSession(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionUser(ctx, sess.Token); err != nil {
		t.Fatal(err)
	}
	c.Advance(time.Second)
	if _, err := s.SessionUser(ctx, sess.Token); desk.ErrorCode(err) != desk.NotFound {
		t.Fatalf("an expired session within the cache's time: %v, want NotFound", err)
	}
}
