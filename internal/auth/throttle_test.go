package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/clocktest"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

const throttlePassword = "long-enough"

func throttleService(t *testing.T) (*Service, *clocktest.Clock) {
	t.Helper()
	s := NewService(pgtest.New(t))
	// PostgreSQL keeps microseconds: a clock on a whole second reads back what it wrote.
	c := clocktest.New(time.Now().Truncate(time.Second))
	s.now = c.Now
	if _, err := s.CreateUser(context.Background(), NewUser{Email: "dana@example.com", DisplayName: "Dana", Role: RoleAgent, Password: throttlePassword}); err != nil {
		t.Fatal(err)
	}
	return s, c
}

// refusal returns the error's reason if it is a RateLimited refusal that says when to come back.
func refusal(t *testing.T, err error) string {
	t.Helper()
	var e *desk.Error
	if !errors.As(err, &e) || e.Code != desk.RateLimited || e.RetryAfter <= 0 {
		t.Fatalf("got %v, want a RateLimited refusal with a Retry-After", err)
	}
	return e.Reason
}

// TestParallelWrongPasswordsStopAtTheLimit sends many wrong passwords for one email from one
// address at once, through two instances' services on one database: at most the limit get a
// password check and an Unauthorized, and every other one is refused.
func TestParallelWrongPasswordsStopAtTheLimit(t *testing.T) {
	t.Parallel()
	a, _ := throttleService(t)
	b := NewService(a.db)
	const attempts = 40
	errs := make([]error, attempts)
	var wg sync.WaitGroup
	for i := range attempts {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			_, errs[i] = s.Authenticate(t.Context(), "Dana@example.com", fmt.Sprint("guess-", i), "203.0.113.7")
		})
	}
	wg.Wait()
	var unauthorized, limited int
	for _, err := range errs {
		switch desk.ErrorCode(err) {
		case desk.Unauthorized:
			unauthorized++
		case desk.RateLimited:
			refusal(t, err)
			limited++
		default:
			t.Errorf("attempt answered %v, want Unauthorized or RateLimited", err)
		}
	}
	if unauthorized > maxFailuresPerPair || unauthorized+limited != attempts {
		t.Fatalf("%d Unauthorized and %d RateLimited of %d parallel attempts, want at most %d Unauthorized and the rest RateLimited",
			unauthorized, limited, attempts, maxFailuresPerPair)
	}
	if _, err := a.Authenticate(t.Context(), "dana@example.com", throttlePassword, "203.0.113.7"); refusal(t, err) != "login_throttled" {
		t.Errorf("the right password from the throttled address: %v, want login_throttled", err)
	}
}

// TestStrangerCannotLockAUserOut: failures from one address fill that address's allowance for the
// email, not the email's, and the refusal ends when the oldest failure leaves the window.
func TestStrangerCannotLockAUserOut(t *testing.T) {
	t.Parallel()
	s, clock := throttleService(t)
	ctx := t.Context()
	for i := range maxFailuresPerPair {
		if _, err := s.Authenticate(ctx, "dana@example.com", fmt.Sprint("guess-", i), "198.51.100.66"); desk.ErrorCode(err) != desk.Unauthorized {
			t.Fatalf("wrong password %d: %v, want Unauthorized", i, err)
		}
	}
	_, err := s.Authenticate(ctx, "dana@example.com", throttlePassword, "198.51.100.66")
	if refusal(t, err) != "login_throttled" {
		t.Fatalf("the stranger's address after %d failures: %v, want login_throttled", maxFailuresPerPair, err)
	}
	var e *desk.Error
	if errors.As(err, &e); e.RetryAfter != loginWindow {
		t.Errorf("Retry-After %s, want %s: the failures were all just now", e.RetryAfter, loginWindow)
	}
	if u, err := s.Authenticate(ctx, "dana@example.com", throttlePassword, "203.0.113.9"); err != nil || u.Email != "dana@example.com" {
		t.Fatalf("dana from her own address: %+v, %v; want logged in", u, err)
	}
	if _, err := s.Authenticate(ctx, "dana@example.com", "mistyped", "203.0.113.9"); desk.ErrorCode(err) != desk.Unauthorized {
		t.Errorf("dana mistyping from her own address: %v, want Unauthorized", err)
	}
	clock.Advance(loginWindow)
	if _, err := s.Authenticate(ctx, "dana@example.com", throttlePassword, "198.51.100.66"); err != nil {
		t.Errorf("the window has passed: %v, want logged in", err)
	}
}

// TestRightPasswordsDoNotCount: a reservation is given back when the password was right, so
// logging in again and again never throttles.
func TestRightPasswordsDoNotCount(t *testing.T) {
	t.Parallel()
	s, _ := throttleService(t)
	for i := range maxFailuresPerPair + 1 {
		if _, err := s.Authenticate(t.Context(), "dana@example.com", throttlePassword, "203.0.113.9"); err != nil {
			t.Fatalf("login %d: %v", i, err)
		}
	}
	var n int
	if err := s.db.QueryRow(t.Context(), `SELECT count(*) FROM login_failures`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d failures recorded (%v) after right passwords only, want 0", n, err)
	}
}

// TestAddressAndEmailLimits: one address failing across many emails is refused for any email,
// and failures spread over many addresses refuse the email from a fresh one, while other
// addresses and emails go on. The failures are written straight into the table: which path
// wrote them is not the point.
func TestAddressAndEmailLimits(t *testing.T) {
	t.Parallel()
	s, clock := throttleService(t)
	ctx := t.Context()
	if _, err := s.CreateUser(ctx, NewUser{Email: "bea@example.com", DisplayName: "Bea", Role: RoleAgent, Password: throttlePassword}); err != nil {
		t.Fatal(err)
	}
	fail := func(email, address string) {
		t.Helper()
		if _, err := s.db.Exec(ctx, `INSERT INTO login_failures (email, address, at) VALUES ($1, $2, $3)`, email, address, clock.Now()); err != nil {
			t.Fatal(err)
		}
		clock.Advance(time.Second)
	}
	for i := range maxFailuresPerAddress {
		fail(fmt.Sprintf("user%d@example.com", i), "198.51.100.7")
	}
	if _, err := s.Authenticate(ctx, "bea@example.com", throttlePassword, "198.51.100.7"); refusal(t, err) != "login_throttled_address" {
		t.Errorf("an email the address never tried, from the spraying address: %v, want login_throttled_address", err)
	}
	if _, err := s.Authenticate(ctx, "bea@example.com", throttlePassword, "198.51.100.8"); err != nil {
		t.Errorf("the next address: %v, want logged in", err)
	}

	for i := range maxFailuresPerEmail {
		fail("dana@example.com", fmt.Sprintf("10.0.%d.%d", i/250, i%250))
	}
	_, err := s.Authenticate(ctx, "dana@example.com", throttlePassword, "203.0.113.9")
	if refusal(t, err) != "login_throttled_email" {
		t.Fatalf("an email failed from %d addresses: %v, want login_throttled_email", maxFailuresPerEmail, err)
	}
	var e *desk.Error
	if errors.As(err, &e); e.RetryAfter != loginWindow-maxFailuresPerEmail*time.Second {
		t.Errorf("Retry-After %s, want the oldest failure's remaining %s", e.RetryAfter, loginWindow-maxFailuresPerEmail*time.Second)
	}
	if _, err := s.Authenticate(ctx, "bea@example.com", throttlePassword, "203.0.113.9"); err != nil {
		t.Errorf("another email from the same address: %v, want logged in", err)
	}
}

func TestThrottleKeyCountsAnIPv6ClientByItsSlash64(t *testing.T) {
	t.Parallel()
	for address, want := range map[string]string{
		"203.0.113.7":          "203.0.113.7",
		"::ffff:203.0.113.7":   "203.0.113.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2::ffff":   "2001:db8:1:2::/64",
		"2001:db8:1:3::1":      "2001:db8:1:3::/64",
		"fe80::1%eth0":         "fe80::/64",
		"not an address":       "not an address",
		"":                     "",
	} {
		if got := ThrottleKey(address); got != want {
			t.Errorf("ThrottleKey(%q) = %q, want %q", address, got, want)
		}
	}
}

// TestPasswordChecksAreBounded holds every password-check slot: a login waits for one and, when
// none frees up in time, is told to come back, without a failure counted against it. A login
// past its limit is refused without waiting for a slot.
func TestPasswordChecksAreBounded(t *testing.T) {
	t.Parallel()
	s, _ := throttleService(t)
	ctx := t.Context()
	s.passwordCheckWait = time.Millisecond
	for range maxPasswordChecks {
		s.passwordChecks <- struct{}{}
	}
	_, err := s.Authenticate(ctx, "dana@example.com", throttlePassword, "203.0.113.9")
	var e *desk.Error
	if !errors.As(err, &e) || e.Code != desk.Unavailable || e.RetryAfter <= 0 {
		t.Fatalf("login with every slot busy: %v, want Unavailable with a Retry-After", err)
	}
	var n int
	if err := s.db.QueryRow(ctx, `SELECT count(*) FROM login_failures`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d failures recorded (%v) for a login that was never checked, want 0", n, err)
	}
	for i := range maxFailuresPerPair {
		if _, err := s.db.Exec(ctx, `INSERT INTO login_failures (email, address, at) VALUES ('dana@example.com', '198.51.100.66', $1)`,
			s.now().Add(-time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Authenticate(ctx, "dana@example.com", throttlePassword, "198.51.100.66"); refusal(t, err) != "login_throttled" {
		t.Errorf("a throttled login with every slot busy: %v, want login_throttled", err)
	}
	<-s.passwordChecks
	if _, err := s.Authenticate(ctx, "dana@example.com", throttlePassword, "203.0.113.9"); err != nil {
		t.Fatalf("login with a slot free: %v", err)
	}
}
