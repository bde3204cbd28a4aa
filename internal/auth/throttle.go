package auth

import (
	"context"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/desk"
)

// Login throttling. Failed logins are kept in login_failures, in the database, so that every
// instance counts the same ones. Within loginWindow an attempt is refused, before its password is
// checked, once its client address, its (email, address) pair or its email has reached its limit,
// checked in that order; the refusal lasts until the oldest of those failures leaves the window.
//
// The pair limit is the one a person meets: ten mistypes and a wait. It is also what makes
// locking a user out hard: a stranger's failures fill the stranger's own pair and address, and an
// address past its limit adds nothing to the email's count, so one address can spend at most
// maxFailuresPerPair of an email's budget. The email limit stays, much higher, to bound guessing
// spread over many addresses; the trade is that an attacker with maxFailuresPerEmail /
// maxFailuresPerPair addresses can still lock an email out for the window. The address limit
// stops one client spraying passwords across many emails; an office behind one NAT address
// shares it.
const (
	loginWindow           = 15 * time.Minute
	maxFailuresPerPair    = 10
	maxFailuresPerAddress = 50
	maxFailuresPerEmail   = 100
)

// reserveFailure counts a login attempt as failed before its password is checked, unless a limit
// refuses it; Authenticate gives the reservation back when the password was right. Counting first
// is what makes the limits hold under concurrency: the attempts of one email and of one address
// are serialised by two transaction-scoped advisory locks, so of any number of parallel attempts
// at most the limit get a password check. Every transaction takes the email's lock before the
// address's, so two of them cannot deadlock.
func (s *Service) reserveFailure(ctx context.Context, email, address string) (int64, error) {
	network := ThrottleKey(address)
	now := s.now()
	var id int64
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('login email:' || $1, 0))`, email); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('login address:' || $1, 0))`, network); err != nil {
			return err
		}
		var byAddress, byPair, byEmail int
		var oldestByAddress, oldestByPair, oldestByEmail *time.Time
		if err := tx.QueryRow(ctx, `
			SELECT count(*) FILTER (WHERE address = $2), min(at) FILTER (WHERE address = $2),
			       count(*) FILTER (WHERE address = $2 AND email = $1),
			       min(at) FILTER (WHERE address = $2 AND email = $1),
			       count(*) FILTER (WHERE email = $1), min(at) FILTER (WHERE email = $1)
			FROM login_failures WHERE at > $3 AND (address = $2 OR email = $1)`,
			email, network, now.Add(-loginWindow)).Scan(
			&byAddress, &oldestByAddress, &byPair, &oldestByPair, &byEmail, &oldestByEmail); err != nil {
			return err
		}
		switch {
		case byAddress >= maxFailuresPerAddress:
			return s.throttled("login_throttled_address", "too many failed logins from your network; try again in a few minutes", oldestByAddress)
		case byPair >= maxFailuresPerPair:
			return s.throttled("login_throttled", "too many failed logins for this email; try again in a few minutes", oldestByPair)
		case byEmail >= maxFailuresPerEmail:
			return s.throttled("login_throttled_email", "too many failed logins for this email from many places; try again later", oldestByEmail)
		}
		return tx.QueryRow(ctx, `INSERT INTO login_failures (email, address, at) VALUES ($1, $2, $3) RETURNING id`,
			email, network, now).Scan(&id)
	})
	return id, err
}

func (s *Service) throttled(reason, message string, oldest *time.Time) error {
	return &desk.Error{Code: desk.RateLimited, Reason: reason, Message: message, RetryAfter: oldest.Add(loginWindow).Sub(s.now())}
}

// releaseFailure takes back a failure reserved for an attempt that did not fail.
func (s *Service) releaseFailure(ctx context.Context, id int64) error {
	_, err := s.db.Exec(ctx, `DELETE FROM login_failures WHERE id = $1`, id)
	return err
}

// ThrottleKey is the address a client is counted under, by login throttling and by single
// sign-on's limit on sign-ins started. An IPv6 client is usually given a whole /64 and may pick
// any address in it, so it counts as its /64.
func ThrottleKey(address string) string {
	ip, err := netip.ParseAddr(address)
	if err != nil {
		return address
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

// Each argon2id check takes argonMemoryKiB (19 MiB) for its length, so 40 logins at once took the
// server from 78 MB to 511 MB. At most maxPasswordChecks run at once: memory stays within
// about 76 MiB for them however many arrive, and more would not finish sooner on a few cores.
// Others queue, since a waiting request holds a few KiB and a burst of logins at the start of a
// shift should succeed a moment late rather than fail; a request that waits passwordCheckWait is
// answered Unavailable with a Retry-After, so a flood cannot pile up waiters without end. The
// throttling limits are checked before the queue, so a refused attempt never waits in it.
const (
	maxPasswordChecks        = 4
	defaultPasswordCheckWait = 5 * time.Second
	passwordCheckRetryAfter  = time.Second
)

// passwordCheckSlot waits for one of the password-check slots and returns its release.
func (s *Service) passwordCheckSlot(ctx context.Context) (func(), error) {
	timer := time.NewTimer(s.passwordCheckWait)
	defer timer.Stop()
	select {
	case s.passwordChecks <- struct{}{}:
		return func() { <-s.passwordChecks }, nil
	case <-timer.C:
	case <-ctx.Done():
	}
	return nil, &desk.Error{Code: desk.Unavailable, Reason: "login_busy", RetryAfter: passwordCheckRetryAfter,
		Message: "the desk is checking many logins at once; try again in a moment"}
}
