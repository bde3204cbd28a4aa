package auth

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/desk"
)

// Querier runs a statement through a pool or a caller's transaction.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// OpenSessions counts the user's sessions that have not expired: what disabling them ends.
func OpenSessions(ctx context.Context, db Querier, userID int64) (int, error) {
	var n int
	err := db.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE user_id = $1 AND expires_at > now()`, userID).Scan(&n)
	return n, err
}

// Person is a user as the admin's list shows them.
type Person struct {
	User
	Disabled  bool
	LastLogin *time.Time
	SSOOnly   bool // their password login is off
}

// People lists every user, enabled ones first, by email.
func (s *Service) People(ctx context.Context) ([]Person, error) {
	rows, err := s.db.Query(ctx, `SELECT `+userColumns+`, disabled, last_login_at, NOT password_login FROM users ORDER BY disabled, email`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Person, error) {
		var p Person
		err := row.Scan(&p.ID, &p.Email, &p.DisplayName, &p.Role, &p.Capacity, &p.MustChangePassword, &p.Disabled, &p.LastLogin, &p.SSOOnly)
		return p, err
	})
}

// PersonByID reads one user, enabled or not.
func (s *Service) PersonByID(ctx context.Context, id int64) (Person, error) {
	var p Person
	err := s.db.QueryRow(ctx, `SELECT `+userColumns+`, disabled, last_login_at, NOT password_login FROM users WHERE id = $1`, id).
		Scan(&p.ID, &p.Email, &p.DisplayName, &p.Role, &p.Capacity, &p.MustChangePassword, &p.Disabled, &p.LastLogin, &p.SSOOnly)
	if errors.Is(err, pgx.ErrNoRows) {
		return Person{}, desk.Errorf(desk.NotFound, "no user has id %d", id)
	}
	return p, err
}

// PersonByEmail reads one user, enabled or not, by email (see NormalizeEmail).
func (s *Service) PersonByEmail(ctx context.Context, email string) (Person, error) {
	email, err := NormalizeEmail(email)
	if err != nil {
		return Person{}, err
	}
	var p Person
	err = s.db.QueryRow(ctx, `SELECT `+userColumns+`, disabled, last_login_at, NOT password_login FROM users WHERE email = $1`, email).
		Scan(&p.ID, &p.Email, &p.DisplayName, &p.Role, &p.Capacity, &p.MustChangePassword, &p.Disabled, &p.LastLogin, &p.SSOOnly)
	if errors.Is(err, pgx.ErrNoRows) {
		return Person{}, desk.Errorf(desk.NotFound, "no user has email %s", email)
	}
	return p, err
}

// lockUser reads the user's row for an update inside tx.
func lockUser(ctx context.Context, tx pgx.Tx, userID int64) (Person, error) {
	var p Person
	err := tx.QueryRow(ctx, `SELECT `+userColumns+`, disabled, last_login_at, NOT password_login FROM users WHERE id = $1 FOR UPDATE`, userID).
		Scan(&p.ID, &p.Email, &p.DisplayName, &p.Role, &p.Capacity, &p.MustChangePassword, &p.Disabled, &p.LastLogin, &p.SSOOnly)
	if errors.Is(err, pgx.ErrNoRows) {
		return Person{}, desk.Errorf(desk.NotFound, "no user has id %d", userID)
	}
	return p, err
}

// LockAdmins locks, inside tx, the user's row and every enabled admin's, in id order, and
// reports whether the user is the desk's last enabled admin. Every change to a person's role or
// login that may take away an admin takes it first, before any other lock on users: one lock order
// for all of them, so that two such changes at once (two admins demoting each other) wait for each
// other rather than each hold a row the other needs next ("deadlock detected"). The second waits
// for the first to commit, then reads its change (READ COMMITTED re-checks a locked row): an admin
// demoted meanwhile is no longer counted.
func LockAdmins(ctx context.Context, tx pgx.Tx, userID int64) (last bool, err error) {
	rows, err := tx.Query(ctx, `
		SELECT id, role = 'admin' AND NOT disabled FROM users
		WHERE id = $1 OR (role = 'admin' AND NOT disabled) ORDER BY id FOR UPDATE`, userID)
	if err != nil {
		return false, err
	}
	var admins []int64
	var id int64
	var admin bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &admin}, func() error {
		if admin {
			admins = append(admins, id)
		}
		return nil
	}); err != nil {
		return false, err
	}
	return len(admins) == 1 && admins[0] == userID, nil
}

// LastAdmin is the refusal of a change that would leave the desk without an enabled admin:
// nobody could then reach /admin to undo it.
func LastAdmin() error {
	return desk.Errorf(desk.Conflict, "this is the last enabled admin, perhaps since another admin was changed meanwhile: nobody could reach /admin without them; make someone else an admin first")
}

// Enable turns a disabled user's login back on inside tx; false when it was on already.
func Enable(ctx context.Context, tx pgx.Tx, userID int64) (bool, error) {
	p, err := lockUser(ctx, tx, userID)
	if err != nil || !p.Disabled {
		return false, err
	}
	_, err = tx.Exec(ctx, `UPDATE users SET disabled = false WHERE id = $1`, userID)
	return err == nil, err
}

// Profile is what an admin edits of a user besides role, queues and login.
type Profile struct {
	DisplayName string
	Capacity    int
}

// SetProfile changes the user's name and capacity inside tx and returns what they were.
func SetProfile(ctx context.Context, tx pgx.Tx, userID int64, p Profile) (Profile, error) {
	p.DisplayName = strings.TrimSpace(p.DisplayName)
	bad := desk.Fields{}
	if p.DisplayName == "" {
		bad.Add("name", "name is required")
	}
	if p.Capacity < 1 || p.Capacity > MaxCapacity {
		bad.Add("capacity", "capacity must be between 1 and %d", MaxCapacity)
	}
	if err := bad.Err(); err != nil {
		return Profile{}, err
	}
	was, err := lockUser(ctx, tx, userID)
	if err != nil {
		return Profile{}, err
	}
	_, err = tx.Exec(ctx, `UPDATE users SET display_name = $2, capacity = $3 WHERE id = $1`, userID, p.DisplayName, p.Capacity)
	return Profile{DisplayName: was.DisplayName, Capacity: was.Capacity}, err
}

// temporaryPasswordBytes makes a temporary password of 16 URL-safe characters: shown once, typed
// once, then replaced.
const temporaryPasswordBytes = 12

// ResetPassword gives the user a random temporary password inside tx, which they must change at
// their next login, and ends their sessions. It returns the password, to be shown once.
func ResetPassword(ctx context.Context, tx pgx.Tx, userID int64) (string, error) {
	if _, err := lockUser(ctx, tx, userID); err != nil {
		return "", err
	}
	password, err := randomToken(temporaryPasswordBytes)
	if err != nil {
		return "", err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return "", err
	}
	_, err = tx.Exec(ctx, `
		WITH gone AS (DELETE FROM sessions WHERE user_id = $1)
		UPDATE users SET password_hash = $2, must_change_password = true WHERE id = $1`, userID, hash)
	return password, err
}

// ChangePassword replaces the user's password inside tx, after checking the current one, and
// ends their other sessions (keep is the one they are using). Every bad field is named at once.
func (s *Service) ChangePassword(ctx context.Context, tx pgx.Tx, userID int64, current, next, keep string) error {
	var hash string
	err := tx.QueryRow(ctx, `SELECT password_hash FROM users WHERE id = $1 AND NOT disabled FOR UPDATE`, userID).Scan(&hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return desk.Errorf(desk.NotFound, "no such user")
	}
	if err != nil {
		return err
	}
	release, err := s.passwordCheckSlot(ctx)
	if err != nil {
		return err
	}
	ok, err := VerifyPassword(current, hash)
	release()
	if err != nil {
		return err
	}
	bad := desk.Fields{}
	if !ok {
		bad.Add("current", "the current password is wrong")
	}
	if len(next) < MinPasswordLen {
		bad.Add("password", "the new password must be at least %d characters", MinPasswordLen)
	} else if next == current {
		bad.Add("password", "the new password must differ from the current one")
	}
	if err := bad.Err(); err != nil {
		return err
	}
	newHash, err := HashPassword(next)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `
		WITH gone AS (DELETE FROM sessions WHERE user_id = $1 AND token_hash <> $3)
		UPDATE users SET password_hash = $2, must_change_password = false WHERE id = $1`, userID, newHash, hashToken(keep))
	return err
}
