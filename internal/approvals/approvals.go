// Package approvals holds refund approvals: a package whose refund is above its queue's threshold
// (or in another currency than the queue's) is resolved as refunded only once a supervisor
// granted that exact amount and currency. It owns the approvals table and two rules: Needed (does
// a refund need approval) and Check (who may decide a request: four eyes). Who may ask for or
// withdraw a request is actions.Check's, like every other action on a package; the package's
// status changes go through actions, which owns handoffs updates and calls the writes here inside
// its own transaction, after the package's row lock.
package approvals

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
)

// State is where a request is.
type State string

const (
	Pending   State = "pending"
	Granted   State = "granted"
	Denied    State = "denied"
	Expired   State = "expired"   // not decided within the queue's approval timeout
	Withdrawn State = "withdrawn" // by the requester, or because the bot canceled the package
)

// Refund is an amount of money in a currency: the amount a decimal string, never a float.
type Refund struct {
	Amount   string
	Currency string
}

// String writes the refund as money: "240.00 USD", with its currency's decimals.
func (r Refund) String() string { return Money(r.Amount, r.Currency) }

// minorUnits are the ISO 4217 currencies whose amounts do not have two decimals.
var minorUnits = map[string]int{
	"BIF": 0, "CLP": 0, "DJF": 0, "GNF": 0, "ISK": 0, "JPY": 0, "KMF": 0, "KRW": 0, "PYG": 0, "RWF": 0,
	"UGX": 0, "UYI": 0, "VND": 0, "VUV": 0, "XAF": 0, "XOF": 0, "XPF": 0,
	"BHD": 3, "IQD": 3, "JOD": 3, "KWD": 3, "LYD": 3, "OMR": 3, "TND": 3,
	"CLF": 4, "UYW": 4,
}

// Money writes amount, a decimal string, in currency as people read it: with the currency's
// decimals (ISO 4217's minor units, two for most), "50.0000" USD as "50.00 USD" and "1200" JPY as
// "1200 JPY". Digits past them that are not zero stay: money is never rounded in a message.
func Money(amount, currency string) string {
	decimals, ok := minorUnits[currency]
	if !ok {
		decimals = 2
	}
	v, ok := new(big.Rat).SetString(amount)
	if !ok {
		return amount + " " + currency
	}
	text := v.FloatString(decimals)
	for exact, _ := new(big.Rat).SetString(text); exact.Cmp(v) != 0; exact, _ = new(big.Rat).SetString(text) {
		decimals++
		text = v.FloatString(decimals)
	}
	return text + " " + currency
}

// Why says why refund r needs a supervisor's approval in queue, whose threshold is threshold in
// currency, or why it does not.
func Why(r Refund, queue, threshold, currency string) string {
	if r.Currency != currency {
		return fmt.Sprintf("%s is in another currency than %s's %s threshold", r, queue, currency)
	}
	if needed, _ := Needed(r, threshold, currency); needed {
		return fmt.Sprintf("a refund of %s is above %s's threshold of %s", r, queue, Money(threshold, currency))
	}
	return fmt.Sprintf("the refund of %s is not above %s's threshold of %s", r, queue, Money(threshold, currency))
}

// Outcome is what resolving as refunded with refunded records, against requested, the package's
// own refund (nil when it asked for none). Amounts compare as exact rationals.
func Outcome(refunded Refund, requested *Refund) (handoff.RefundOutcome, error) {
	o := handoff.RefundOutcome{Amount: refunded.Amount, Currency: refunded.Currency}
	if requested == nil {
		return o, nil
	}
	o.RequestedAmount, o.RequestedCurrency = requested.Amount, requested.Currency
	if requested.Currency != refunded.Currency {
		return o, nil
	}
	paid, ok := new(big.Rat).SetString(refunded.Amount)
	if !ok {
		return o, fmt.Errorf("refunded amount %q is not a decimal", refunded.Amount)
	}
	asked, ok := new(big.Rat).SetString(requested.Amount)
	if !ok {
		return o, fmt.Errorf("requested amount %q is not a decimal", requested.Amount)
	}
	o.Partial = paid.Cmp(asked) < 0
	return o, nil
}

// Needed reports whether refund r needs a supervisor's approval in a queue whose threshold is
// threshold in currency: when it is strictly above the threshold, or in another currency (the
// desk converts nothing). Amounts compare as exact rationals.
func Needed(r Refund, threshold, currency string) (bool, error) {
	if r.Currency != currency {
		return true, nil
	}
	amount, ok := new(big.Rat).SetString(r.Amount)
	if !ok {
		return false, fmt.Errorf("refund amount %q is not a decimal", r.Amount)
	}
	limit, ok := new(big.Rat).SetString(threshold)
	if !ok {
		return false, fmt.Errorf("refund threshold %q is not a decimal", threshold)
	}
	return amount.Cmp(limit) > 0, nil
}

// Approval is one request for approval and its decision.
type Approval struct {
	ID        int64
	HandoffID int64  // the package's row id
	PublicID  string // the package's handoff_id
	QueueID   int64
	// Refund is the amount and currency asked for: what a grant covers.
	Refund      Refund
	RequestedBy int64
	Requester   string // display name
	Note        string
	RequestedAt time.Time
	ExpiresAt   time.Time
	State       State
	DecidedBy   *int64
	Decider     string
	// DecisionNote is the supervisor's note on a grant or denial.
	DecisionNote string
	DecidedAt    *time.Time
	// RequesterSawContact and DeciderSawContact say whether the people could see the package's
	// contact when they wrote their notes: masking those for a viewer asks it (handoff.Writer).
	RequesterSawContact, DeciderSawContact bool
}

// Check says whether user may decide request a on a package held by assignee (nil: nobody), at
// now: nil, or the refusal. Four eyes: only a supervisor or admin decides, and never the one who
// asked nor the package's holder, whatever their role. Deciders call it after the package's row
// lock, with the request as read after the lock, so a decision made meanwhile is seen.
func Check(user auth.User, a Approval, assignee *int64, now time.Time) error {
	switch {
	case !user.Role.AtLeast(auth.RoleSupervisor):
		return desk.Errorf(desk.Forbidden, "only supervisors and admins decide refund approvals")
	case user.ID == a.RequestedBy:
		return desk.Errorf(desk.Forbidden, "you asked for approval %d yourself; another supervisor must decide it", a.ID)
	case assignee != nil && *assignee == user.ID:
		return desk.Errorf(desk.Forbidden, "you hold %s; another supervisor must decide its approval", a.PublicID)
	case a.State == Granted || a.State == Denied:
		return desk.Errorf(desk.Conflict, "approval %d was already %s by %s", a.ID, a.State, a.Decider)
	case a.State != Pending:
		return desk.Errorf(desk.Conflict, "approval %d was %s", a.ID, a.State)
	case !now.Before(a.ExpiresAt):
		return desk.Errorf(desk.Conflict, "approval %d expired at %s", a.ID, a.ExpiresAt.UTC().Format("15:04 UTC"))
	}
	return nil
}

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// selectApproval reads requests with their people's names and the package's public id.
const selectApproval = `
	SELECT a.id, a.handoff_id, h.handoff_id, a.queue_id, a.amount::text, a.currency, a.requested_by, r.display_name, a.requester_saw_contact,
		a.note, a.requested_at, a.expires_at, a.state, a.decided_by, coalesce(d.display_name, ''), a.decider_saw_contact,
		coalesce(a.decision_note, ''), a.decided_at
	FROM approvals a JOIN handoffs h ON h.id = a.handoff_id JOIN users r ON r.id = a.requested_by
	LEFT JOIN users d ON d.id = a.decided_by`

func scan(row pgx.Row) (Approval, error) {
	var a Approval
	err := row.Scan(&a.ID, &a.HandoffID, &a.PublicID, &a.QueueID, &a.Refund.Amount, &a.Refund.Currency, &a.RequestedBy, &a.Requester,
		&a.RequesterSawContact, &a.Note, &a.RequestedAt, &a.ExpiresAt, &a.State, &a.DecidedBy, &a.Decider, &a.DeciderSawContact, &a.DecisionNote,
		&a.DecidedAt)
	return a, err
}

// Get reads request id.
func Get(ctx context.Context, db Querier, id int64) (Approval, error) {
	a, err := scan(db.QueryRow(ctx, selectApproval+` WHERE a.id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Approval{}, desk.Errorf(desk.NotFound, "no approval %d", id)
	}
	return a, err
}

// ForHandoff lists a package's requests, oldest first: its approval history.
func ForHandoff(ctx context.Context, db Querier, handoffID int64) ([]Approval, error) {
	rows, err := db.Query(ctx, selectApproval+` WHERE a.handoff_id = $1 ORDER BY a.requested_at, a.id`, handoffID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Approval, error) { return scan(row) })
}

// Request is a new request, as actions makes it under the package's row lock.
type Request struct {
	HandoffID   int64
	QueueID     int64
	Refund      Refund
	RequestedBy int64
	// SawContact: the requester could see the package's contact (handoff.Writer).
	SawContact bool
	Note       string
	At         time.Time
	Timeout    time.Duration
}

// Insert records r as pending inside tx. A package has at most one pending request: the
// database's partial unique index refuses a second, whichever tab or instance sends it.
func Insert(ctx context.Context, tx pgx.Tx, r Request) (int64, error) {
	var id int64
	err := tx.QueryRow(ctx, `
		INSERT INTO approvals (handoff_id, queue_id, amount, currency, requested_by, note, requested_at, expires_at, requester_saw_contact)
		VALUES ($1, $2, $3::numeric, $4, $5, $6, $7, $7::timestamptz + $8::interval, $9) RETURNING id`,
		r.HandoffID, r.QueueID, r.Refund.Amount, r.Refund.Currency, r.RequestedBy, r.Note, r.At, r.Timeout, r.SawContact).Scan(&id)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.ConstraintName == "approvals_one_pending_idx" {
		return 0, desk.Errorf(desk.Conflict, "an approval is already pending for this package")
	}
	return id, err
}

// PendingFor reads the package's pending request inside tx, or NotFound.
func PendingFor(ctx context.Context, tx pgx.Tx, handoffID int64) (Approval, error) {
	a, err := scan(tx.QueryRow(ctx, selectApproval+` WHERE a.handoff_id = $1 AND a.state = 'pending'`, handoffID))
	if errors.Is(err, pgx.ErrNoRows) {
		return Approval{}, desk.Errorf(desk.NotFound, "no approval is pending for this package")
	}
	return a, err
}

// Decide records a grant or denial of request id inside tx, if it is still pending, by a decider who
// could or could not see the package's contact (sawContact): the loser of two supervisors deciding
// at once, or a decision racing the sweeper's expiry, gets a Conflict.
func Decide(ctx context.Context, tx pgx.Tx, id int64, state State, by int64, sawContact bool, note string, at time.Time) error {
	if state != Granted && state != Denied {
		return fmt.Errorf("decide approval %d: %q is not a decision", id, state)
	}
	tag, err := tx.Exec(ctx, `
		UPDATE approvals SET state = $2, decided_by = $3, decision_note = $4, decided_at = $5, decider_saw_contact = $6
		WHERE id = $1 AND state = 'pending'`, id, state, by, note, at, sawContact)
	if err == nil && tag.RowsAffected() == 0 {
		return desk.Errorf(desk.Conflict, "approval %d was decided by someone else a moment ago", id)
	}
	return err
}

// End closes the package's pending request inside tx as withdrawn or expired (an expiry only
// once due at at), returning it; NotFound when none is pending (or due).
func End(ctx context.Context, tx pgx.Tx, handoffID int64, state State, at time.Time) (Approval, error) {
	if state != Withdrawn && state != Expired {
		return Approval{}, fmt.Errorf("end approval of package %d: %q is not an ending", handoffID, state)
	}
	var id int64
	err := tx.QueryRow(ctx, `
		UPDATE approvals SET state = $2, decided_at = $3
		WHERE handoff_id = $1 AND state = 'pending' AND ($2 <> 'expired' OR expires_at <= $3)
		RETURNING id`, handoffID, state, at).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return Approval{}, desk.Errorf(desk.NotFound, "no approval is pending for this package")
	}
	if err != nil {
		return Approval{}, err
	}
	return Get(ctx, tx, id)
}

// Due lists the packages whose pending request ran past its timeout at now, oldest first, at most
// limit: the sweeper locks those packages, skipping any locked, and then ends each request.
func Due(ctx context.Context, db Querier, now time.Time, limit int) ([]int64, error) {
	rows, err := db.Query(ctx, `
		SELECT handoff_id FROM approvals WHERE state = 'pending' AND expires_at <= $1
		ORDER BY expires_at LIMIT $2`, now, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// Covered reports, inside tx, whether refund r of the package was granted: that exact amount (as
// a number: 120.00 is 120.0) and currency.
func Covered(ctx context.Context, tx pgx.Tx, handoffID int64, r Refund) (bool, error) {
	var ok bool
	err := tx.QueryRow(ctx, `
		SELECT EXISTS (SELECT 1 FROM approvals WHERE handoff_id = $1 AND state = 'granted'
			AND amount = $2::numeric AND currency = $3)`, handoffID, r.Amount, r.Currency).Scan(&ok)
	return ok, err
}

// LastGranted is the package's latest grant, if any: what a refused resolve names.
func LastGranted(ctx context.Context, tx pgx.Tx, handoffID int64) (*Refund, error) {
	var r Refund
	err := tx.QueryRow(ctx, `
		SELECT amount::text, currency FROM approvals WHERE handoff_id = $1 AND state = 'granted'
		ORDER BY decided_at DESC LIMIT 1`, handoffID).Scan(&r.Amount, &r.Currency)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return &r, err
}

// RefundOf is the refund a package asks for, or nil.
func RefundOf(p handoff.Package) *Refund {
	if p.Refund == nil {
		return nil
	}
	return &Refund{Amount: p.Refund.Amount, Currency: p.Refund.Currency}
}
