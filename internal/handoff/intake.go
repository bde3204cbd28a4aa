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
	// Position counts the waiting packages that will be offered before this one (0: next).
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
// cannot both pass.
func (in *Intake) Submit(ctx context.Context, sender Sender, p Package) (Receipt, error) {
	canonical, err := json.Marshal(p)
	if err != nil {
		return Receipt{}, err
	}
	digest := sha256.Sum256(canonical)

	var receipt Receipt
	err = pgx.BeginFunc(ctx, in.db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('contact:' || $1, 0))`, p.Contact.ID); err != nil {
			return err
		}
		if r, found, err := replay(ctx, tx, sender, p.HandoffID, digest[:]); found || err != nil {
			receipt = r
			return err
		}
		q, err := targetQueue(ctx, tx, sender, p)
		if err != nil {
			return err
		}
		if err := checkGuards(ctx, tx, q, p, in.now()); err != nil {
			return err
		}
		if len(p.HandoffChain) >= q.Guards.ChainLimit && q.EscalationQueueID != nil {
			if q, err = queueByID(ctx, tx, *q.EscalationQueueID); err != nil {
				return err
			}
			receipt.Escalated = true
		}
		priority := p.Priority
		if priority == "" {
			priority = Priority(q.DefaultPriority)
		}
		now := in.now()
		var id int64
		if err := tx.QueryRow(ctx, `
			INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent,
				package, body_sha256, created_at, enqueued_at, expires_at, updated_at)
			VALUES ($1, $2, $3, 'queued', $4, $5, $6, $7, $8, $9, $9, $10, $9)
			ON CONFLICT (handoff_id) DO NOTHING RETURNING id`,
			p.HandoffID, sender.APIKeyID, q.ID, priorityRank[priority], p.Contact.ID, p.SourceAgent,
			canonical, digest[:], now, now.Add(q.TTL)).Scan(&id); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				// Another contact's request took this id between our replay check and here.
				return desk.Errorf(desk.Conflict, "handoff_id %q was already used with a different body", p.HandoffID)
			}
			return err
		}
		if err := record(ctx, tx, change{
			HandoffID: id, PublicID: p.HandoffID, QueueID: q.ID, Queue: q.Name, APIKeyID: sender.APIKeyID,
			Kind: "queued", Status: StatusQueued, ActorBot: &sender.APIKeyID, Reason: string(p.Trigger), At: now,
		}); err != nil {
			return err
		}
		receipt.HandoffID, receipt.Status, receipt.Queue = p.HandoffID, StatusQueued, q.Name
		receipt.Position, err = position(ctx, tx, id)
		return err
	})
	if err == nil && !receipt.Replayed {
		in.changed()
	}
	return receipt, err
}

// replay answers a package id seen before: the same sender with the same body gets its receipt;
// anything else is a Conflict.
func replay(ctx context.Context, tx pgx.Tx, sender Sender, handoffID string, digest []byte) (Receipt, bool, error) {
	var r Receipt
	var id, apiKeyID int64
	var storedDigest []byte
	err := tx.QueryRow(ctx, `
		SELECT h.id, h.api_key_id, h.status, q.name, h.body_sha256 FROM handoffs h JOIN queues q ON q.id = h.queue_id
		WHERE h.handoff_id = $1`, handoffID).Scan(&id, &apiKeyID, &r.Status, &r.Queue, &storedDigest)
	if errors.Is(err, pgx.ErrNoRows) {
		return Receipt{}, false, nil
	}
	if err != nil {
		return Receipt{}, false, err
	}
	if apiKeyID != sender.APIKeyID || !bytes.Equal(storedDigest, digest) {
		return Receipt{}, true, desk.Errorf(desk.Conflict, "handoff_id %q was already used with a different body", handoffID)
	}
	r.HandoffID, r.Replayed = handoffID, true
	if r.Status == StatusQueued {
		r.Position, err = position(ctx, tx, id)
	}
	return r, true, err
}

// targetQueue finds the enabled queue the package names, one the sender may send to.
func targetQueue(ctx context.Context, tx pgx.Tx, sender Sender, p Package) (queue.Queue, error) {
	q, err := queue.ScanQueue(tx.QueryRow(ctx, `SELECT `+queue.Columns+` FROM queues WHERE name = $1 AND enabled`, p.TargetProfile))
	if desk.ErrorCode(err) == desk.NotFound {
		return queue.Queue{}, &ValidationError{Fields: []FieldError{{
			Field: "target_profile", Rule: "queue",
			Message: fmt.Sprintf("no enabled queue is named %q", p.TargetProfile),
		}}}
	}
	if err != nil {
		return queue.Queue{}, err
	}
	if !sender.allows(q.ID) {
		return queue.Queue{}, desk.Errorf(desk.Forbidden, "this API key may not send to queue %q", q.Name)
	}
	return q, p.ValidateForQueue(QueueRules{RequiredEntityKeys: q.RequiredEntityKeys})
}

func queueByID(ctx context.Context, tx pgx.Tx, id int64) (queue.Queue, error) {
	return queue.ScanQueue(tx.QueryRow(ctx, `SELECT `+queue.Columns+` FROM queues WHERE id = $1`, id))
}

// checkGuards applies the target queue's guards to the contact's recent handoffs, in one query.
func checkGuards(ctx context.Context, tx pgx.Tx, q queue.Queue, p Package, now time.Time) error {
	var openID *string
	var hourly, daily int
	var oldestHourly, oldestDaily, lastPair *time.Time
	err := tx.QueryRow(ctx, `
		SELECT
			(SELECT handoff_id FROM handoffs WHERE contact_id = $1 AND status IN `+openStatuses+` LIMIT 1),
			count(*) FILTER (WHERE created_at > $2::timestamptz - interval '1 hour'),
			min(created_at) FILTER (WHERE created_at > $2::timestamptz - interval '1 hour'),
			count(*),
			min(created_at),
			max(created_at) FILTER (WHERE source_agent = $3 AND queue_id = $4 AND created_at > $2::timestamptz - $5::interval)
		FROM handoffs WHERE contact_id = $1 AND created_at > $2::timestamptz - interval '1 day'`,
		p.Contact.ID, now, p.SourceAgent, q.ID, q.Guards.PairCooldown).
		Scan(&openID, &hourly, &oldestHourly, &daily, &oldestDaily, &lastPair)
	if err != nil {
		return err
	}
	switch {
	case q.Guards.OneOpen && openID != nil:
		return &desk.Error{
			Code: desk.Conflict, Reason: ReasonOpenHandoff, Details: map[string]string{"open_handoff_id": *openID},
			Message: fmt.Sprintf("contact %s already has handoff %s open; resume or cancel it first", p.Contact.ID, *openID),
		}
	case hourly >= q.Guards.ContactHourly:
		return refused(ReasonContactHourly, oldestHourly.Add(time.Hour).Sub(now),
			"contact %s already had %d handoffs in the last hour (limit %d)", p.Contact.ID, hourly, q.Guards.ContactHourly)
	case daily >= q.Guards.ContactDaily:
		return refused(ReasonContactDaily, oldestDaily.Add(24*time.Hour).Sub(now),
			"contact %s already had %d handoffs in the last day (limit %d)", p.Contact.ID, daily, q.Guards.ContactDaily)
	case lastPair != nil:
		return refused(ReasonCircular, lastPair.Add(q.Guards.PairCooldown).Sub(now),
			"%s already handed contact %s to queue %s in the last %s", p.SourceAgent, p.Contact.ID, q.Name, q.Guards.PairCooldown)
	}
	return nil
}

func refused(reason string, retryAfter time.Duration, format string, args ...any) error {
	return &desk.Error{Code: desk.RateLimited, Reason: reason, RetryAfter: max(retryAfter, time.Second), Message: fmt.Sprintf(format, args...)}
}

// position counts the waiting packages of the same queue that a "next" would take first.
func position(ctx context.Context, tx pgx.Tx, id int64) (int, error) {
	var n int
	err := tx.QueryRow(ctx, `
		SELECT count(*) FROM handoffs w, handoffs h
		WHERE h.id = $1 AND w.queue_id = h.queue_id AND w.status = 'queued'
			AND (w.priority_rank, w.enqueued_at, w.id) < (h.priority_rank, h.enqueued_at, h.id)`, id).Scan(&n)
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
