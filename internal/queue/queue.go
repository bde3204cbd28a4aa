// Package queue holds the desk's queues: where handoff packages wait, who works them and the
// rules each queue sets (TTL, reservation timeout, refund threshold, guards).
package queue

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/desk"
)

// Queue is a queue and the settings intake and the desk read from it.
type Queue struct {
	ID                 int64
	Name               string
	ParentID           *int64
	Enabled            bool
	TTL                time.Duration
	ReservationTimeout time.Duration
	// RefundThreshold is a decimal in Currency: a refund above it, or in another currency, waits
	// for a supervisor's approval, which expires after ApprovalTimeout (internal/approvals).
	RefundThreshold    string
	Currency           string
	ApprovalTimeout    time.Duration
	DefaultPriority    string
	SLA                time.Duration
	Skills             []string
	RequiredEntityKeys []string
	PIIEntityKeys      []string
	PIIMinRole         string
	TransferPolicy     []string
	MaxRejections      int
	Guards             Guards
	EscalationQueueID  *int64
	OverflowPolicy     string
	OverflowQueueID    *int64

	// AcceptsTopLevelTransfers lets other top-level queues transfer packages into this one, when
	// it is top-level itself (see CheckTransfer).
	AcceptsTopLevelTransfers bool

	// Warm transfers: how long a ring waits for its agent to accept, and how long a warm package
	// goes on ringing agents before it waits like any other.
	AcceptWindow time.Duration
	WarmWait     time.Duration
	// MissedRingsAway is how many of this queue's rings an agent may let run out in a row before
	// the desk sets them away.
	MissedRingsAway int
	// WithholdTranscript drops the transcript for roles below PIIMinRole instead of masking it.
	WithholdTranscript bool
	// ReopenWindow is how long after a resolve a customer's message reopens the package (SPEC §2a).
	ReopenWindow time.Duration
	// CustomerIdle is how long a customer may leave the agent's reply unanswered before the desk
	// shows them idle, and CustomerGone (0: never) how long before the sweeper resolves the package
	// as customer_unreachable (SPEC §3; conversation.Quiet says since when).
	CustomerIdle time.Duration
	CustomerGone time.Duration
}

// Guards keep bots from flooding a contact with handoffs or bouncing one between agents.
type Guards struct {
	ContactHourly int           // most handoffs per contact in an hour
	ContactDaily  int           // most handoffs per contact in a day
	PairCooldown  time.Duration // the same source→queue pair for a contact is refused this long
	ChainLimit    int           // a handoff_chain this long goes to the escalation queue
	OneOpen       bool          // a contact has at most one open handoff
}

// New is a queue to create: what `web queue add` supplies (the admin form reads every setting, see Save).
type New struct {
	Name               string
	Parent             string
	TTL                time.Duration
	ReservationTimeout time.Duration
	RefundThreshold    string
	Currency           string        // of the threshold; default DefaultCurrency
	ApprovalTimeout    time.Duration // default DefaultApprovalTimeout
	AcceptWindow       time.Duration // a warm package's ring; default DefaultAcceptWindow
	WarmWait           time.Duration // how long a warm package rings; default DefaultWarmWait
	MissedRingsAway    int           // rings run out in a row before the agent is set away; default DefaultMissedRingsAway

	AcceptsTopLevelTransfers bool // as Queue.AcceptsTopLevelTransfers
}

// Defaults for a new queue, matching the column defaults.
const (
	DefaultTTL                = 24 * time.Hour
	DefaultReservationTimeout = 2 * time.Minute
	DefaultRefundThreshold    = "50.00"
	DefaultCurrency           = "USD"
	DefaultApprovalTimeout    = 4 * time.Hour
	DefaultReopenWindow       = 24 * time.Hour
	DefaultCustomerIdle       = 10 * time.Minute
)

var (
	namePattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	amountPattern   = regexp.MustCompile(`^[0-9]{1,10}(\.[0-9]{1,4})?$`)
	currencyPattern = regexp.MustCompile(`^[A-Z]{3}$`)
)

func (n *New) validate() error {
	if !namePattern.MatchString(n.Name) {
		return desk.Errorf(desk.Invalid, "queue name %q must be 1-63 of a-z, 0-9, _ and -, starting with a letter or digit", n.Name)
	}
	if n.TTL == 0 {
		n.TTL = DefaultTTL
	}
	if n.ReservationTimeout == 0 {
		n.ReservationTimeout = DefaultReservationTimeout
	}
	if n.RefundThreshold == "" {
		n.RefundThreshold = DefaultRefundThreshold
	}
	if n.Currency == "" {
		n.Currency = DefaultCurrency
	}
	if n.ApprovalTimeout == 0 {
		n.ApprovalTimeout = DefaultApprovalTimeout
	}
	if n.AcceptWindow == 0 {
		n.AcceptWindow = DefaultAcceptWindow
	}
	if n.WarmWait == 0 {
		n.WarmWait = DefaultWarmWait
	}
	if n.MissedRingsAway == 0 {
		n.MissedRingsAway = DefaultMissedRingsAway
	}
	// The admin form's bounds (settings.go), so that a queue the command line made opens in the
	// form as it was saved.
	if n.AcceptWindow < time.Second {
		return desk.Errorf(desk.Invalid, "accept window %s is shorter than a second", n.AcceptWindow)
	}
	if n.WarmWait < time.Second {
		return desk.Errorf(desk.Invalid, "warm wait %s is shorter than a second", n.WarmWait)
	}
	if n.MissedRingsAway < 1 || n.MissedRingsAway > maxCount {
		return desk.Errorf(desk.Invalid, "missed rings %d is not a whole number from 1 to %d", n.MissedRingsAway, maxCount)
	}
	if !currencyPattern.MatchString(n.Currency) {
		return desk.Errorf(desk.Invalid, "currency %q is not an ISO 4217 code like USD", n.Currency)
	}
	if n.ApprovalTimeout < time.Minute {
		return desk.Errorf(desk.Invalid, "approval timeout %s is shorter than a minute", n.ApprovalTimeout)
	}
	if n.TTL < time.Minute {
		return desk.Errorf(desk.Invalid, "ttl %s is shorter than a minute", n.TTL)
	}
	if n.ReservationTimeout < time.Second {
		return desk.Errorf(desk.Invalid, "reservation timeout %s is shorter than a second", n.ReservationTimeout)
	}
	if !amountPattern.MatchString(n.RefundThreshold) {
		return desk.Errorf(desk.Invalid, "refund threshold %q is not a decimal amount like 50.00", n.RefundThreshold)
	}
	if n.AcceptsTopLevelTransfers && n.Parent != "" {
		return desk.Errorf(desk.Invalid, "queue %q has a parent, so it is not top-level and cannot accept top-level transfers", n.Name)
	}
	return nil
}

// Service stores queues and their members.
type Service struct {
	db *pgxpool.Pool
}

// NewService returns a Service over db.
func NewService(db *pgxpool.Pool) *Service { return &Service{db: db} }

// Create adds a queue; its parent, if named, must exist.
func (s *Service) Create(ctx context.Context, n New) (Queue, error) {
	if err := n.validate(); err != nil {
		return Queue{}, err
	}
	var parentID *int64
	if n.Parent != "" {
		parent, err := s.ByName(ctx, n.Parent)
		if err != nil {
			return Queue{}, desk.Errorf(desk.Invalid, "parent queue %q does not exist", n.Parent)
		}
		parentID = &parent.ID
	}
	row := s.db.QueryRow(ctx, `
		INSERT INTO queues (name, parent_id, ttl, reservation_timeout, refund_threshold, accepts_top_level_transfers,
			currency, approval_timeout, accept_window, warm_wait, missed_rings_away)
		VALUES ($1, $2, $3, $4, $5::numeric, $6, $7, $8, $9, $10, $11) RETURNING `+columns,
		n.Name, parentID, n.TTL, n.ReservationTimeout, n.RefundThreshold, n.AcceptsTopLevelTransfers, n.Currency, n.ApprovalTimeout,
		n.AcceptWindow, n.WarmWait, n.MissedRingsAway)
	q, err := scanQueue(row)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23505" {
		return Queue{}, desk.Errorf(desk.Conflict, "queue %q already exists", n.Name)
	}
	return q, err
}

// columns is the select list scanQueue reads.
const columns = `id, name, parent_id, enabled, ttl, reservation_timeout, refund_threshold::text,
	default_priority, sla, skills, required_entity_keys, pii_entity_keys, pii_min_role, transfer_policy,
	max_rejections, guard_contact_hourly, guard_contact_daily, guard_pair_cooldown, guard_chain_limit,
	guard_one_open, escalation_queue_id, overflow_policy, overflow_queue_id, accepts_top_level_transfers,
	accept_window, warm_wait, withhold_transcript, currency, approval_timeout, missed_rings_away, reopen_window,
	customer_idle, customer_gone`

func (q *Queue) scanTargets() []any {
	return []any{&q.ID, &q.Name, &q.ParentID, &q.Enabled, &q.TTL, &q.ReservationTimeout, &q.RefundThreshold,
		&q.DefaultPriority, &q.SLA, &q.Skills, &q.RequiredEntityKeys, &q.PIIEntityKeys, &q.PIIMinRole, &q.TransferPolicy,
		&q.MaxRejections, &q.Guards.ContactHourly, &q.Guards.ContactDaily, &q.Guards.PairCooldown, &q.Guards.ChainLimit,
		&q.Guards.OneOpen, &q.EscalationQueueID, &q.OverflowPolicy, &q.OverflowQueueID, &q.AcceptsTopLevelTransfers,
		&q.AcceptWindow, &q.WarmWait, &q.WithholdTranscript, &q.Currency, &q.ApprovalTimeout, &q.MissedRingsAway, &q.ReopenWindow,
		&q.CustomerIdle, &q.CustomerGone}
}

func scanQueue(row pgx.Row) (Queue, error) {
	var q Queue
	err := row.Scan(q.scanTargets()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Queue{}, desk.Errorf(desk.NotFound, "no such queue")
	}
	return q, err
}

// Querier runs the lookups that may happen inside a caller's transaction: a pool, a connection or
// a pgx.Tx.
type Querier interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}

// ByID reads a queue through db.
func ByID(ctx context.Context, db Querier, id int64) (Queue, error) {
	return scanQueue(db.QueryRow(ctx, `SELECT `+columns+` FROM queues WHERE id = $1`, id))
}

// QueueEnabled adds to b a read of the enabled queues among names, each of which found receives,
// so that a caller reads them in the round trip of its own batch. The rows stay key-share locked
// until the caller commits (the lock its inserts' foreign keys take anyway, taken earlier): a
// disable (SetEnabled, FOR UPDATE) then either waits for the caller's packages and finds them
// open, or commits first, and this read waits for it and finds the queue disabled. Without the
// early lock a package admitted while the disable committed landed in the disabled queue.
func QueueEnabled(b *pgx.Batch, names []string, found func(Queue)) {
	b.Queue(`SELECT `+columns+` FROM queues WHERE name = ANY($1) AND enabled FOR KEY SHARE`, names).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			q, err := scanQueue(rows)
			if err != nil {
				return err
			}
			found(q)
		}
		return rows.Err()
	})
}

// Enabled reads a queue through db by name, if it is enabled; otherwise the error is NotFound.
func Enabled(ctx context.Context, db Querier, name string) (Queue, error) {
	return scanQueue(db.QueryRow(ctx, `SELECT `+columns+` FROM queues WHERE name = $1 AND enabled`, name))
}

// ByName finds a queue by its name.
func (s *Service) ByName(ctx context.Context, name string) (Queue, error) {
	q, err := scanQueue(s.db.QueryRow(ctx, `SELECT `+columns+` FROM queues WHERE name = $1`, name))
	if desk.ErrorCode(err) == desk.NotFound {
		return Queue{}, desk.Errorf(desk.NotFound, "queue %q does not exist", name)
	}
	return q, err
}

// QueueNamedFor adds to b the read of queue name and whether userID works it, so that a page reads
// them in the round trip of its top bar. A queue that does not exist leaves found false.
func QueueNamedFor(b *pgx.Batch, name string, userID int64, q *Queue, member, found *bool) {
	b.Queue(`SELECT `+columns+`, EXISTS (SELECT 1 FROM queue_members m WHERE m.queue_id = queues.id AND m.user_id = $2)
		FROM queues WHERE name = $1`, name, userID).QueryRow(func(row pgx.Row) error {
		err := row.Scan(append(q.scanTargets(), member)...)
		*found = err == nil
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
}

// Unknown is what a person is told of a queue that does not exist or that they may not see: one
// answer for both, so that nobody learns which queues exist by asking for the ones they do not work.
func Unknown(name string) error {
	return desk.Errorf(desk.NotFound, "queue %q does not exist, or you do not work it", name)
}

// IDsByName resolves queue names, in their order, in one query; NotFound names the first that
// does not exist.
func (s *Service) IDsByName(ctx context.Context, names []string) ([]int64, error) {
	rows, err := s.db.Query(ctx, `SELECT name, id FROM queues WHERE name = ANY($1)`, names)
	if err != nil {
		return nil, err
	}
	byName := map[string]int64{}
	for rows.Next() {
		var name string
		var id int64
		if err := rows.Scan(&name, &id); err != nil {
			return nil, err
		}
		byName[name] = id
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	ids := make([]int64, 0, len(names))
	for _, name := range names {
		id, ok := byName[name]
		if !ok {
			return nil, &desk.Error{Code: desk.NotFound, Message: fmt.Sprintf("queue %q does not exist", name),
				Details: map[string]string{"queue": name}}
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// AddMembers makes a user a member of the named queues; adding an existing membership is a no-op.
func (s *Service) AddMembers(ctx context.Context, userID int64, queueNames []string) error {
	ids, err := s.IDsByName(ctx, queueNames)
	if err != nil {
		return err
	}
	_, err = s.db.Exec(ctx, `
		INSERT INTO queue_members (queue_id, user_id) SELECT unnest($1::bigint[]), $2
		ON CONFLICT DO NOTHING`, ids, userID)
	return err
}

// Summary is one line of "my queues".
type Summary struct {
	ID         int64
	Name       string
	Open       int
	Waiting    int
	OldestWait *time.Time
	SLA        time.Duration
	Member     bool
}

// summarySelect counts each queue's open and waiting packages; $1 is the user whose membership
// Member tells.
const summarySelect = `
	SELECT q.id, q.name, q.sla, m.user_id IS NOT NULL AS member,
		count(h.id) AS open,
		count(h.id) FILTER (WHERE h.status = 'queued') AS waiting,
		min(h.enqueued_at) FILTER (WHERE h.status = 'queued') AS oldest
	FROM queues q
	LEFT JOIN queue_members m ON m.queue_id = q.id AND m.user_id = $1
	LEFT JOIN handoffs h ON h.queue_id = q.id
		AND h.closed_at IS NULL`

// Summaries lists the queues a user works: agents see the queues they are members of;
// supervisors and admins, who oversee every queue, see all of them, members' first.
func (s *Service) Summaries(ctx context.Context, userID int64, allQueues bool) ([]Summary, error) {
	rows, err := s.db.Query(ctx, summarySelect+`
		WHERE q.enabled AND ($2 OR m.user_id IS NOT NULL)
		GROUP BY q.id, m.user_id
		ORDER BY member DESC, q.name`, userID, allQueues)
	if err != nil {
		return nil, err
	}
	return collectSummaries(rows)
}

// SummariesOf counts the queues ids as Summaries does, for no one in particular (Member is false):
// the live "my queues" pages of everyone who sees a queue share one count of it.
func (s *Service) SummariesOf(ctx context.Context, ids []int64) (map[int64]Summary, error) {
	rows, err := s.db.Query(ctx, summarySelect+`
		WHERE q.id = ANY($2)
		GROUP BY q.id, m.user_id`, 0, ids)
	if err != nil {
		return nil, err
	}
	list, err := collectSummaries(rows)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]Summary, len(list))
	for _, sum := range list {
		out[sum.ID] = sum
	}
	return out, nil
}

func collectSummaries(rows pgx.Rows) ([]Summary, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Summary, error) {
		var s Summary
		err := row.Scan(&s.ID, &s.Name, &s.SLA, &s.Member, &s.Open, &s.Waiting, &s.OldestWait)
		return s, err
	})
}

// CheckTransfer says whether from's transfer policy lets a package move to to, and if not, why.
// A queue's neighbours are its children, its parent and its peers: the queues under the same
// parent, which an admin linked by giving them that parent. Top-level queues were linked by
// nobody, so one takes packages from another only when it accepts top-level transfers; otherwise
// an agent could push work into any queue at all.
func CheckTransfer(from, to Queue) error {
	var rule, relation string
	switch {
	case from.ID == to.ID:
		return desk.Errorf(desk.Invalid, "the package is already in %s", to.Name)
	case to.ParentID != nil && *to.ParentID == from.ID:
		rule, relation = "children", "child"
	case from.ParentID != nil && *from.ParentID == to.ID:
		rule, relation = "parent", "parent"
	case from.ParentID != nil && to.ParentID != nil && *from.ParentID == *to.ParentID:
		rule, relation = "peers", "sibling"
	case from.ParentID == nil && to.ParentID == nil:
		if !to.AcceptsTopLevelTransfers {
			return desk.Errorf(desk.Forbidden, "%s and %s are both top-level queues, and %s does not accept transfers from other top-level queues",
				from.Name, to.Name, to.Name)
		}
		rule, relation = "peers", "top-level peer"
	default:
		return desk.Errorf(desk.Forbidden, "%s is not a child, the parent or a sibling of %s", to.Name, from.Name)
	}
	if !slices.Contains(from.TransferPolicy, rule) {
		policy := strings.Join(from.TransferPolicy, ", ")
		if policy == "" {
			policy = "none"
		}
		return desk.Errorf(desk.Forbidden, "%s's transfer policy (%s) does not allow %s, its %s", from.Name, policy, to.Name, relation)
	}
	return nil
}

// TransferTargets lists the enabled queues a package in from may be transferred to.
func (s *Service) TransferTargets(ctx context.Context, from Queue) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT `+columns+` FROM queues WHERE enabled ORDER BY name`)
	if err != nil {
		return nil, err
	}
	all, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Queue, error) { return scanQueue(row) })
	if err != nil {
		return nil, err
	}
	var names []string
	for _, to := range all {
		if CheckTransfer(from, to) == nil {
			names = append(names, to.Name)
		}
	}
	return names, nil
}

// IsMember reports whether the user works the queue.
func (s *Service) IsMember(ctx context.Context, userID, queueID int64) (bool, error) {
	return IsMember(ctx, s.db, userID, queueID)
}

// IsMember is Service.IsMember inside a caller's transaction.
func IsMember(ctx context.Context, db Querier, userID, queueID int64) (bool, error) {
	var member bool
	err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM queue_members WHERE queue_id = $1 AND user_id = $2)`,
		queueID, userID).Scan(&member)
	return member, err
}

// MemberOf returns those of the queues that the user works.
func (s *Service) MemberOf(ctx context.Context, userID int64, queueIDs []int64) ([]int64, error) {
	rows, err := s.db.Query(ctx, `SELECT queue_id FROM queue_members WHERE user_id = $1 AND queue_id = ANY($2)`,
		userID, queueIDs)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// RemoveMember takes the user off the queue inside tx; NotFound when they did not work it.
func RemoveMember(ctx context.Context, tx pgx.Tx, userID, queueID int64) error {
	tag, err := tx.Exec(ctx, `DELETE FROM queue_members WHERE queue_id = $1 AND user_id = $2`, queueID, userID)
	if err == nil && tag.RowsAffected() == 0 {
		return desk.Errorf(desk.NotFound, "the user does not work this queue")
	}
	return err
}

// SplitNames reads a comma-separated list of queue names, as the CLI and the websocket take them:
// "a, b,,c" is [a b c].
func SplitNames(list string) []string {
	var names []string
	for _, part := range strings.Split(list, ",") {
		if part = strings.TrimSpace(part); part != "" {
			names = append(names, part)
		}
	}
	return names
}

// Route picks a queue among ids: the one named toAgent if it is enabled; otherwise the first by
// name whose skills cover every capability (none when there are none). NotFound when no queue fits.
func Route(ctx context.Context, db Querier, ids []int64, toAgent string, capabilities []string) (string, error) {
	var name string
	err := db.QueryRow(ctx, `
		SELECT name FROM queues
		WHERE enabled AND id = ANY($1) AND (name = $2 OR ($3::text[] <@ skills AND cardinality($3::text[]) > 0))
		ORDER BY name = $2 DESC, name LIMIT 1`, ids, toAgent, capabilities).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", desk.Errorf(desk.NotFound, "no queue is named %q or has the skills %v", toAgent, capabilities)
	}
	return name, err
}

// MemberByEmail returns the id of the enabled user with this email, as auth.NormalizeEmail writes
// it, who works the queue, or 0.
func MemberByEmail(ctx context.Context, db Querier, queueID int64, email string) (int64, error) {
	var userID int64
	err := db.QueryRow(ctx, `
		SELECT u.id FROM users u JOIN queue_members m ON m.user_id = u.id AND m.queue_id = $2
		WHERE u.email = $1 AND NOT u.disabled`, email, queueID).Scan(&userID)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	return userID, err
}
