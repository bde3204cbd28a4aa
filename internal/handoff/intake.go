package handoff

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/queue"
)

// Status is where a package is in its life at the desk.
type Status string

const (
	StatusQueued           Status = "queued"
	StatusReserved         Status = "reserved"
	StatusAccepted         Status = "accepted"
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusResolved         Status = "resolved"
	StatusReturnedToBot    Status = "returned_to_bot"
	StatusExpired          Status = "expired"
	StatusCanceled         Status = "canceled"
)

// openStatuses are the statuses in which a package still occupies its queue and its contact.
const openStatuses = `('queued', 'reserved', 'accepted', 'awaiting_approval')`

// Guard reasons, as a refused bot reads them.
const (
	ReasonContactHourly = "contact_hourly_limit"
	ReasonContactDaily  = "contact_daily_limit"
	ReasonCircular      = "circular_handoff"
	ReasonOpenHandoff   = "open_handoff"
)

var priorityRank = map[Priority]int{PriorityUrgent: 0, PriorityHigh: 1, PriorityNormal: 2, PriorityLow: 3}

// Sender is the bot submitting a package: its key and the queues the key may send to.
type Sender struct {
	APIKeyID int64
	QueueIDs []int64
}

func (s Sender) allows(queueID int64) bool {
	for _, id := range s.QueueIDs {
		if id == queueID {
			return true
		}
	}
	return false
}

// Receipt is what intake answers a bot.
type Receipt struct {
	HandoffID string `json:"handoff_id"`
	Status    Status `json:"status"`
	Queue     string `json:"queue"`
	// Position counts the waiting packages that will be offered before this one (0: next), up
	// to maxPosition.
	Position int `json:"position"`
	// Escalated is set when a long handoff chain sent the package to the queue's escalation target.
	Escalated bool `json:"escalated,omitempty"`
	// Replayed is set when the same id and body had already been accepted.
	Replayed bool `json:"-"`
}

// Intake puts packages from bots into queues.
type Intake struct {
	db      *pgxpool.Pool
	now     func() time.Time
	changed func() // called after a commit, to wake the live desk
}

// NewIntake returns an Intake over db; changed is called after every committed change.
func NewIntake(db *pgxpool.Pool, changed func()) *Intake {
	if changed == nil {
		changed = func() {}
	}
	return &Intake{db: db, now: time.Now, changed: changed}
}

// Submit queues a decoded, valid package. The same id with the same body answers the first
// receipt again (Replayed); the same id with another body is a Conflict. Guards are checked under
// a per-contact lock in the same transaction as the insert, so two racing requests for one contact
// cannot both pass. The transaction costs two round trips: one batch that begins, takes the lock
// and reads everything the decision needs, and one that writes and commits. Only a queue that
// overflows when nobody is online, a long handoff chain or a preferred agent costs more.
func (in *Intake) Submit(ctx context.Context, sender Sender, p Package) (Receipt, error) {
	canonical, err := json.Marshal(p)
	if err != nil {
		return Receipt{}, err
	}
	digest := sha256.Sum256(canonical)

	conn, err := in.db.Acquire(ctx)
	if err != nil {
		return Receipt{}, err
	}
	defer conn.Release()
	receipt, err := in.submit(ctx, conn.Conn(), sender, p, canonical, digest[:])
	if err != nil {
		// The connection may sit in an open or failed transaction. Should ROLLBACK fail too, the
		// pool sees the transaction still open on release and discards the connection.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		return Receipt{}, err
	}
	if !receipt.Replayed {
		in.changed()
	}
	return receipt, nil
}

// submit runs Submit's transaction on conn. BEGIN travels with the reads and COMMIT with the
// writes; on any error the caller rolls back.
func (in *Intake) submit(ctx context.Context, conn *pgx.Conn, sender Sender, p Package, canonical, digest []byte) (Receipt, error) {
	now := in.now()
	s, err := readSituation(ctx, conn, p, now)
	if err != nil {
		return Receipt{}, err
	}
	if s.replay != nil {
		if s.replay.apiKeyID != sender.APIKeyID || !bytes.Equal(s.replay.digest, digest) {
			return Receipt{}, desk.Errorf(desk.Conflict, "handoff_id %q was already used with a different body", p.HandoffID)
		}
		receipt := Receipt{HandoffID: p.HandoffID, Status: s.replay.status, Queue: s.replay.queue, Replayed: true}
		if receipt.Status == StatusQueued {
			if receipt.Position, err = position(ctx, conn, s.replay.id); err != nil {
				return Receipt{}, err
			}
		}
		_, err := conn.Exec(ctx, "COMMIT")
		return receipt, err
	}
	q := s.queue
	if q == nil {
		return Receipt{}, &ValidationError{Fields: []FieldError{{
			Field: "target_profile", Rule: "queue", Message: fmt.Sprintf("no enabled queue is named %q", p.TargetProfile),
		}}}
	}
	if !sender.allows(q.ID) {
		return Receipt{}, desk.Errorf(desk.Forbidden, "this API key may not send to queue %q", q.Name)
	}
	if err := p.ValidateForQueue(QueueRules{RequiredEntityKeys: q.RequiredEntityKeys}); err != nil {
		return Receipt{}, err
	}
	if err := s.guards.check(*q, p, now); err != nil {
		return Receipt{}, err
	}
	receipt := Receipt{HandoffID: p.HandoffID, Status: StatusQueued}
	if len(p.HandoffChain) >= q.Guards.ChainLimit && q.EscalationQueueID != nil {
		escalation, err := queue.ScanQueue(conn.QueryRow(ctx, `SELECT `+queue.Columns+` FROM queues WHERE id = $1`, *q.EscalationQueueID))
		if err != nil {
			return Receipt{}, err
		}
		q, receipt.Escalated = &escalation, true
	}
	// The policy of the queue the package would land in decides whether it may wait there.
	routed, err := overflow(ctx, conn, *q, now)
	if err != nil {
		return Receipt{}, err
	}
	q = &routed
	receipt.Queue = q.Name
	offeredTo, offeredUntil, err := offer(ctx, conn, *q, p.PreferredAgent, now)
	if err != nil {
		return Receipt{}, err
	}
	priority := p.Priority
	if priority == "" {
		priority = Priority(q.DefaultPriority)
	}
	rank := priorityRank[priority]

	b := &pgx.Batch{}
	b.Queue(`
		INSERT INTO handoffs (id, handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent,
			package, body_sha256, created_at, enqueued_at, expires_at, updated_at, offered_to, offered_until)
		OVERRIDING SYSTEM VALUE
		VALUES ($1, $2, $3, $4, 'queued', $5, $6, $7, $8, $9, $10, $10, $11, $10, $12, $13)`,
		s.newID, p.HandoffID, sender.APIKeyID, q.ID, rank, p.Contact.ID, p.SourceAgent,
		canonical, digest, now, now.Add(q.TTL), offeredTo, offeredUntil)
	if err := queueChange(b, change{
		HandoffID: s.newID, PublicID: p.HandoffID, QueueID: q.ID, Queue: q.Name, APIKeyID: sender.APIKeyID,
		Kind: "queued", Status: StatusQueued, ActorBot: &sender.APIKeyID, Reason: string(p.Trigger), At: now,
	}); err != nil {
		return Receipt{}, err
	}
	// With the parameters in view the planner always finds a custom plan cheaper, and planning
	// the count costs PostgreSQL more than running it; the generic plan walks the queue's index
	// in claim order just the same.
	b.Queue("SET LOCAL plan_cache_mode = force_generic_plan")
	b.Queue(positionQuery, q.ID, rank, now, s.newID, maxPosition).QueryRow(func(row pgx.Row) error {
		return row.Scan(&receipt.Position)
	})
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.ConstraintName == "handoffs_handoff_id_key" {
			// Another contact's request took this id between our read and our insert.
			return Receipt{}, desk.Errorf(desk.Conflict, "handoff_id %q was already used with a different body", p.HandoffID)
		}
		return Receipt{}, err
	}
	return receipt, nil
}

// situation is what intake reads before deciding: a package seen before, the target queue, the
// contact's recent handoffs, and an id for the new row.
type situation struct {
	replay *struct {
		id, apiKeyID int64
		status       Status
		queue        string
		digest       []byte
	}
	queue  *queue.Queue
	guards guardCounts
	newID  int64
}

// guardCounts are the contact's recent handoffs as the guards need them.
type guardCounts struct {
	openID                              *string
	hourly, daily                       int
	oldestHourly, oldestDaily, lastPair *time.Time
}

// readSituation begins the transaction, takes the per-contact lock and then reads, in the same
// round trip, everything Submit decides on. Statements of a batch run in order, so the reads see
// the data as of after the lock was granted.
func readSituation(ctx context.Context, conn *pgx.Conn, p Package, now time.Time) (situation, error) {
	var s situation
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(`SELECT pg_advisory_xact_lock(hashtextextended('contact:' || $1, 0))`, p.Contact.ID)
	b.Queue(`
		SELECT h.id, h.api_key_id, h.status, q.name, h.body_sha256 FROM handoffs h JOIN queues q ON q.id = h.queue_id
		WHERE h.handoff_id = $1`, p.HandoffID).QueryRow(func(row pgx.Row) error {
		var r struct {
			id, apiKeyID int64
			status       Status
			queue        string
			digest       []byte
		}
		err := row.Scan(&r.id, &r.apiKeyID, &r.status, &r.queue, &r.digest)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		s.replay = &r
		return err
	})
	b.Queue(`SELECT `+queue.Columns+` FROM queues WHERE name = $1 AND enabled`, p.TargetProfile).QueryRow(func(row pgx.Row) error {
		q, err := queue.ScanQueue(row)
		if desk.ErrorCode(err) == desk.NotFound {
			return nil
		}
		s.queue = &q
		return err
	})
	g := &s.guards
	b.Queue(`
		SELECT
			(SELECT handoff_id FROM handoffs WHERE contact_id = $1 AND status IN `+openStatuses+` LIMIT 1),
			count(*) FILTER (WHERE h.created_at > $2::timestamptz - interval '1 hour'),
			min(h.created_at) FILTER (WHERE h.created_at > $2::timestamptz - interval '1 hour'),
			count(*),
			min(h.created_at),
			max(h.created_at) FILTER (WHERE h.source_agent = $3 AND h.queue_id = q.id
				AND h.created_at > $2::timestamptz - q.guard_pair_cooldown)
		FROM handoffs h LEFT JOIN queues q ON q.name = $4
		WHERE h.contact_id = $1 AND h.created_at > $2::timestamptz - interval '1 day'`,
		p.Contact.ID, now, p.SourceAgent, p.TargetProfile).QueryRow(func(row pgx.Row) error {
		return row.Scan(&g.openID, &g.hourly, &g.oldestHourly, &g.daily, &g.oldestDaily, &g.lastPair)
	})
	// The sequence by the name the migration gives it: pg_get_serial_sequence would search the
	// catalog for it on every call.
	b.Queue(`SELECT nextval('handoffs_id_seq')`).QueryRow(func(row pgx.Row) error {
		return row.Scan(&s.newID)
	})
	return s, conn.SendBatch(ctx, b).Close()
}

func queueByID(ctx context.Context, tx pgx.Tx, id int64) (queue.Queue, error) {
	return queue.ScanQueue(tx.QueryRow(ctx, `SELECT `+queue.Columns+` FROM queues WHERE id = $1`, id))
}

// check applies the target queue's guards to the contact's recent handoffs.
func (g guardCounts) check(q queue.Queue, p Package, now time.Time) error {
	switch {
	case q.Guards.OneOpen && g.openID != nil:
		return &desk.Error{
			Code: desk.Conflict, Reason: ReasonOpenHandoff, Details: map[string]string{"open_handoff_id": *g.openID},
			Message: fmt.Sprintf("contact %s already has handoff %s open; resume or cancel it first", p.Contact.ID, *g.openID),
		}
	case g.hourly >= q.Guards.ContactHourly:
		return refused(ReasonContactHourly, g.oldestHourly.Add(time.Hour).Sub(now),
			"contact %s already had %d handoffs in the last hour (limit %d)", p.Contact.ID, g.hourly, q.Guards.ContactHourly)
	case g.daily >= q.Guards.ContactDaily:
		return refused(ReasonContactDaily, g.oldestDaily.Add(24*time.Hour).Sub(now),
			"contact %s already had %d handoffs in the last day (limit %d)", p.Contact.ID, g.daily, q.Guards.ContactDaily)
	case g.lastPair != nil:
		return refused(ReasonCircular, g.lastPair.Add(q.Guards.PairCooldown).Sub(now),
			"%s already handed contact %s to queue %s in the last %s", p.SourceAgent, p.Contact.ID, q.Name, q.Guards.PairCooldown)
	}
	return nil
}

func refused(reason string, retryAfter time.Duration, format string, args ...any) error {
	return &desk.Error{Code: desk.RateLimited, Reason: reason, RetryAfter: max(retryAfter, time.Second), Message: fmt.Sprintf(format, args...)}
}

// maxPosition caps the position count: past it a bot learns only that the wait is long, and
// counting stays cheap however deep the queue grows.
const maxPosition = 100

// positionQuery counts the waiting packages of a queue that "next" takes before the given
// (rank, enqueued_at, id), walking the claim index and stopping at maxPosition. The count needs no
// order, but asking for the index's makes it the only good plan even when the parameters are
// unknown (a generic plan), where another index of queued packages would otherwise look as cheap.
const positionQuery = `
	SELECT count(*) FROM (
		SELECT 1 FROM handoffs
		WHERE queue_id = $1 AND status = 'queued' AND (priority_rank, enqueued_at, id) < ($2, $3, $4)
		ORDER BY priority_rank, enqueued_at, id
		LIMIT $5) ahead`

// position is a package's place in its queue's claim order.
func position(ctx context.Context, tx interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}, id int64) (int, error) {
	var queueID int64
	var rank int
	var enqueuedAt time.Time
	if err := tx.QueryRow(ctx, `SELECT queue_id, priority_rank, enqueued_at FROM handoffs WHERE id = $1`, id).
		Scan(&queueID, &rank, &enqueuedAt); err != nil {
		return 0, err
	}
	var n int
	err := tx.QueryRow(ctx, positionQuery, queueID, rank, enqueuedAt, id, maxPosition).Scan(&n)
	return n, err
}

// AddQueueRules adds the errors of the queue a package names to the errors its decoding found,
// so that one answer lists every problem.
func (in *Intake) AddQueueRules(ctx context.Context, p Package, decodeErr error) error {
	if p.TargetProfile == "" {
		return decodeErr
	}
	q, err := queue.ScanQueue(in.db.QueryRow(ctx, `SELECT `+queue.Columns+` FROM queues WHERE name = $1 AND enabled`, p.TargetProfile))
	if err != nil {
		return decodeErr
	}
	return MergeErrors(decodeErr, p.ValidateForQueue(QueueRules{RequiredEntityKeys: q.RequiredEntityKeys}))
}

// Route picks the queue for a SW4RM request: to_agent when it names an enabled queue the sender
// may use; otherwise the sender's first queue (by name) whose skills cover every required
// capability.
func (in *Intake) Route(ctx context.Context, sender Sender, toAgent string, capabilities []string) (string, error) {
	var name string
	err := in.db.QueryRow(ctx, `
		SELECT name FROM queues
		WHERE enabled AND id = ANY($1) AND (name = $2 OR ($3::text[] <@ skills AND cardinality($3::text[]) > 0))
		ORDER BY name = $2 DESC, name LIMIT 1`, sender.QueueIDs, toAgent, capabilities).Scan(&name)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", &ValidationError{Fields: []FieldError{{Field: "to_agent", Rule: "route",
			Message: fmt.Sprintf("no queue of this key is named %q or has the skills %v", toAgent, capabilities)}}}
	}
	return name, err
}
