package sso

import (
	"context"
	"crypto/rand"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
)

// A sign-in made in a popup for a CRM's frame ends as a one-time ticket, whether it went through
// the identity provider (Finish) or a password typed in the desk's own login popup (IssueTicket):
// the popup hands the ticket to the frame that opened it, and the frame trades it, once and
// within ticketTTL, for a session of its own (Redeem), since its cookies are kept apart from the
// popup's, per embedding site. A ticket is a row of sso_logins, the table of sign-ins under way.

// IssueTicket makes the ticket of a person who signed in as userID in a popup opened from the
// client address, for the frame to go to next. The row's state and browser are random: nothing
// comes back to finish it at the provider.
func IssueTicket(ctx context.Context, db *pgxpool.Pool, userID int64, next, address string, now time.Time) (string, error) {
	ticket := rand.Text()
	err := insertTicket(ctx, db, hash(rand.Text()), auth.ThrottleKey(address), hash(rand.Text()), next, now.Add(ticketTTL), ticket, userID)
	return ticket, err
}

func insertTicket(ctx context.Context, db *pgxpool.Pool, stateHash []byte, address string, browserHash []byte, next string, expires time.Time, ticket string, userID int64) error {
	_, err := db.Exec(ctx, `
		INSERT INTO sso_logins (state_hash, address, browser_hash, nonce, verifier, next, popup, expires_at, ticket_hash, user_id)
		VALUES ($1, $2, $3, '', '', $4, true, $5, $6, $7)`,
		stateHash, address, browserHash, next, expires, hash(ticket), userID)
	return err
}

// Redeem trades a popup's ticket, once and within a minute, for its user and where they go next.
func Redeem(ctx context.Context, db *pgxpool.Pool, people *auth.Service, ticket string, now time.Time) (auth.User, string, error) {
	var userID int64
	var next string
	err := db.QueryRow(ctx, `
		DELETE FROM sso_logins WHERE ticket_hash = $1 AND expires_at > $2 RETURNING user_id, next`,
		hash(ticket), now).Scan(&userID, &next)
	if errors.Is(err, pgx.ErrNoRows) {
		return auth.User{}, "", desk.Errorf(desk.Unauthorized, "sign-in refused: the sign-in's ticket is unknown, used or over a minute old; start again")
	}
	if err != nil {
		return auth.User{}, "", err
	}
	u, err := people.UserByID(ctx, userID)
	if desk.ErrorCode(err) == desk.NotFound {
		return auth.User{}, "", desk.Errorf(desk.Unauthorized, "sign-in refused: the account was disabled meanwhile")
	}
	return u, next, err
}
