// Package board is the desk's read model: packages as queue pages, held lists, the package view
// and live frames show them. It joins across the tables of their owners (handoffs and notes, which
// intake and actions write; queues; users) and writes nothing.
package board

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/jackc/pgx/v5"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
)

// Board reads packages for the desk's pages and live frames.
type Board struct {
	db *pgxpool.Pool
}

// New returns a Board over db.
func New(db *pgxpool.Pool) *Board { return &Board{db: db} }

// Item is a package as the desk shows it: its place and state, its queue's display rules, and
// the package itself (unmasked: callers mask per receiver with MaskFor before rendering).
type Item struct {
	// State is what the rules of actions.Check read.
	actions.State
	ID            int64
	QueueID       int64
	Queue         string
	PriorityRank  int
	EnqueuedAt    time.Time
	ExpiresAt     time.Time
	ReservedUntil *time.Time
	Outcome       string
	// Refund is, once resolved as refunded, what was paid back against what was asked.
	Refund *handoff.RefundOutcome
	SLA    time.Duration
	// CreatedAt is when the package arrived and AcceptedAt when its agent accepted it (nil until
	// then, and again once a customer's message reopened it): its SLA runs between the two, as
	// search's sla_breached counts it.
	CreatedAt     time.Time
	AcceptedAt    *time.Time
	PIIMinRole    string
	PIIEntityKeys []string
	// WithholdTranscript is the queue's choice to withhold the transcript below PIIMinRole.
	WithholdTranscript bool
	// CustomerIdle is the queue's customer_idle: how long a customer may leave the agent's reply
	// unanswered before the desk shows them idle.
	CustomerIdle time.Duration
	// RequiredEntityKeys are the entities the queue requires of every package: cards show them
	// first.
	RequiredEntityKeys []string
	// Repeat says the package is a repeat contact as the dashboard counts one (docs/metrics.md):
	// its contact had another package resolved or returned to the bot within the 7 days before
	// this one arrived. Intake decides it once, when it stores the package.
	Repeat bool
	// RefundThreshold and Currency are the queue's: a refund above the threshold, or in another
	// currency, needs a supervisor's approval (approvals.Needed).
	RefundThreshold string
	Currency        string
	Package         handoff.Package
}

// PIIRule is the item's queue's rule for personal data.
func (it Item) PIIRule() handoff.PIIRule {
	return handoff.PIIRule{MinRole: it.PIIMinRole, EntityKeys: it.PIIEntityKeys, WithholdTranscript: it.WithholdTranscript}
}

// Priority names the item's rank.
func (it Item) Priority() handoff.Priority { return handoff.PriorityOfRank(it.PriorityRank) }

// Cursor is a position in a queue's claim order, for keyset pagination: no OFFSET, no COUNT, the
// same cost on page 1 and page 200.
type Cursor struct {
	Rank       int
	EnqueuedAt time.Time
	ID         int64
}

// String encodes the cursor for a URL.
func (c Cursor) String() string {
	return fmt.Sprintf("%d.%d.%d", c.Rank, c.EnqueuedAt.UnixMicro(), c.ID)
}

// ParseCursor reads a cursor from a URL.
func ParseCursor(s string) (Cursor, error) {
	parts := strings.Split(s, ".")
	bad := desk.Errorf(desk.BadRequest, "cursor %q is not one this desk made", s)
	if len(parts) != 3 {
		return Cursor{}, bad
	}
	var nums [3]int64
	for i, p := range parts {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil {
			return Cursor{}, bad
		}
		nums[i] = n
	}
	// A rank no priority has would not even fit the column it is compared with.
	if nums[0] < 0 || nums[0] >= int64(len(handoff.Priorities())) {
		return Cursor{}, bad
	}
	return Cursor{Rank: int(nums[0]), EnqueuedAt: time.UnixMicro(nums[1]), ID: nums[2]}, nil
}

// SortKey orders cards on a page the way the claim does; browsers insert live cards with it.
func (it Item) SortKey() string {
	return fmt.Sprintf("%d-%016d-%012d", it.PriorityRank, it.EnqueuedAt.UnixMicro(), it.ID)
}

const itemSelect = `
	SELECT q.customer_idle, h.id, h.handoff_id, h.queue_id, q.name, h.status, h.priority_rank, h.enqueued_at, h.expires_at,
		h.reserved_until, h.assignee_id, coalesce(u.display_name, ''), h.rejections, h.rejected_by, h.needs_supervisor,
		h.offered_to, h.offered_until, coalesce(h.outcome, ''), q.sla, q.pii_min_role, q.pii_entity_keys, q.withhold_transcript,
		q.required_entity_keys, h.repeat_contact,
		q.refund_threshold::text, q.currency,
		-- Only a package awaiting approval has a pending request: the others skip the probe.
		CASE WHEN h.status = 'awaiting_approval' THEN
			(SELECT a.requested_by FROM approvals a WHERE a.handoff_id = h.id AND a.state = 'pending') END,
		h.refund, h.created_at, h.accepted_at, h.package
	FROM handoffs h JOIN queues q ON q.id = h.queue_id LEFT JOIN users u ON u.id = h.assignee_id`

// cardFields is the part of a stored package that lists show. Lists decode only it: the
// transcript and the rest are most of a package's bytes and none of a card's.
type cardFields struct {
	ProblemStatement   string                         `json:"problem_statement"`
	Contact            handoff.Contact                `json:"contact"`
	StructuredEntities map[string]handoff.EntityValue `json:"structured_entities"`
	Sentiment          handoff.Sentiment              `json:"sentiment"`
	ChannelOrigin      handoff.Channel                `json:"channel_origin"`
	ChannelTarget      handoff.Channel                `json:"channel_target"`
	// PrivacyFlags say whether masking must look for the contact in the problem statement.
	PrivacyFlags map[string]bool `json:"privacy_flags"`
}

// decodeCard fills only what a card shows. It reads with encoding/json/v2 (the out-of-tree
// module), which skips the fields cards do not show 3-6× faster than encoding/json: decoding was
// the largest part of a queue page's CPU (51 packages a page). Its stricter defaults (names
// matched by case, no duplicate names, valid UTF-8) hold for what is stored: intake stores each
// package as json.Marshal wrote it, and jsonb keeps one of each key.
func decodeCard(pkg []byte, p *handoff.Package) error {
	var c cardFields
	if err := jsonv2.Unmarshal(pkg, &c); err != nil {
		return err
	}
	*p = handoff.Package{ProblemStatement: c.ProblemStatement, Contact: c.Contact, StructuredEntities: c.StructuredEntities,
		Sentiment: c.Sentiment, ChannelOrigin: c.ChannelOrigin, ChannelTarget: c.ChannelTarget, PrivacyFlags: c.PrivacyFlags}
	return nil
}

// decodeFull fills the whole package.
func decodeFull(pkg []byte, p *handoff.Package) error { return json.Unmarshal(pkg, p) }

func scanItem(row pgx.Row, decode func([]byte, *handoff.Package) error) (Item, error) {
	var it Item
	var pkg []byte
	err := row.Scan(&it.CustomerIdle, &it.ID, &it.PublicID, &it.QueueID, &it.Queue, &it.Status, &it.PriorityRank, &it.EnqueuedAt,
		&it.ExpiresAt, &it.ReservedUntil, &it.AssigneeID, &it.Assignee, &it.Rejections, &it.RejectedBy, &it.NeedsSupervisor,
		&it.OfferedTo, &it.OfferedUntil, &it.Outcome, &it.SLA, &it.PIIMinRole, &it.PIIEntityKeys, &it.WithholdTranscript,
		&it.RequiredEntityKeys, &it.Repeat, &it.RefundThreshold, &it.Currency, &it.ApprovalBy, &it.Refund, &it.CreatedAt, &it.AcceptedAt, &pkg)
	if err != nil {
		return Item{}, err
	}
	// Stored packages were validated at intake; decoding them again only has to read them.
	if err := decode(pkg, &it.Package); err != nil {
		return Item{}, fmt.Errorf("stored package %s: %w", it.PublicID, err)
	}
	return it, nil
}

// collectCards reads list rows, decoding only what cards show.
func collectCards(rows pgx.Rows) ([]Item, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Item, error) { return scanItem(row, decodeCard) })
}

// PageSize is how many cards a queue page shows before "more".
const PageSize = 50

// Waiting lists a queue's open, unassigned-or-reserved packages in claim order, after the cursor
// if given, and returns the cursor of the next page (nil at the end).
//
// The waiting statuses are written out rather than passed: they are the predicate of the partial
// index handoffs_queue_page_idx, which the planner matches only against constants.
func (b *Board) Waiting(ctx context.Context, queueID int64, after *Cursor) ([]Item, *Cursor, error) {
	var rows pgx.Rows
	var err error
	if after == nil {
		rows, err = b.db.Query(ctx, itemSelect+`
			WHERE h.queue_id = $1 AND h.status IN ('queued', 'reserved')
			ORDER BY h.priority_rank, h.enqueued_at, h.id LIMIT $2`, queueID, PageSize+1)
	} else {
		rows, err = b.db.Query(ctx, itemSelect+`
			WHERE h.queue_id = $1 AND h.status IN ('queued', 'reserved')
				AND (h.priority_rank, h.enqueued_at, h.id) > ($2, $3, $4)
			ORDER BY h.priority_rank, h.enqueued_at, h.id LIMIT $5`, queueID, after.Rank, after.EnqueuedAt, after.ID, PageSize+1)
	}
	if err != nil {
		return nil, nil, err
	}
	items, err := collectCards(rows)
	if err != nil || len(items) <= PageSize {
		return items, nil, err
	}
	items = items[:PageSize]
	last := items[len(items)-1]
	return items, &Cursor{Rank: last.PriorityRank, EnqueuedAt: last.EnqueuedAt, ID: last.ID}, nil
}

// Held lists the open packages a user holds, oldest first.
func (b *Board) Held(ctx context.Context, userID int64) ([]Item, error) {
	var held []Item
	batch := &pgx.Batch{}
	QueueHeld(batch, userID, &held)
	return held, b.db.SendBatch(ctx, batch).Close()
}

// QueueHeld adds to b the read of Held into held, so that a page reads it in the round trip of
// its top bar.
func QueueHeld(b *pgx.Batch, userID int64, held *[]Item) {
	b.Queue(itemSelect+`
		WHERE h.assignee_id = $1 AND h.closed_at IS NULL
		ORDER BY h.accepted_at NULLS FIRST, h.id`, userID).Query(func(rows pgx.Rows) error {
		var err error
		*held, err = collectCards(rows)
		return err
	})
}

// Item returns one package by its public id.
func (b *Board) Item(ctx context.Context, publicID string) (Item, error) {
	it, err := scanItem(b.db.QueryRow(ctx, itemSelect+` WHERE h.handoff_id = $1`, publicID), decodeFull)
	if errors.Is(err, pgx.ErrNoRows) {
		return Item{}, NoItem(publicID)
	}
	return it, err
}

// NoItem is the answer for a package that is not there. A reader who may not see a package gets
// the same answer, word for word, so that no one can tell which ids exist where they cannot look.
func NoItem(publicID string) error {
	return desk.Errorf(desk.NotFound, "no handoff %q", publicID)
}

// Items loads packages by row id as cards (only what cards show is decoded), for the live desk
// to render what changed.
func (b *Board) Items(ctx context.Context, ids []int64) (map[int64]Item, error) {
	rows, err := b.db.Query(ctx, itemSelect+` WHERE h.id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	items, err := collectCards(rows)
	if err != nil {
		return nil, err
	}
	byID := make(map[int64]Item, len(items))
	for _, it := range items {
		byID[it.ID] = it
	}
	return byID, nil
}

// HeldIDsSQL selects the row ids of the open packages the user $1 holds: another package's read
// about those packages selects them with it in one statement (conversation.QueueWaitingIn), not
// after a round trip of its own.
const HeldIDsSQL = `SELECT id FROM handoffs WHERE assignee_id = $1 AND closed_at IS NULL`

// HeldIDs lists the row ids of the open packages a user holds.
func (b *Board) HeldIDs(ctx context.Context, userID int64) ([]int64, error) {
	var ids []int64
	batch := &pgx.Batch{}
	QueueHeldIDs(batch, userID, &ids)
	return ids, b.db.SendBatch(ctx, batch).Close()
}

// QueueHeldIDs adds to b the read of HeldIDs into ids.
func QueueHeldIDs(b *pgx.Batch, userID int64, ids *[]int64) {
	b.Queue(HeldIDsSQL, userID).Query(func(rows pgx.Rows) error {
		var err error
		*ids, err = pgx.CollectRows(rows, pgx.RowTo[int64])
		return err
	})
}

// HistoryLimit caps the list: a contact the intake guard lets through 10 times a day would
// otherwise fill the view.
const HistoryLimit = 20

// Earlier is one of a contact's earlier packages, as the package view lists it: nothing in it is
// masked by a queue's PII rule, so it needs no masking once the reader may see its queue.
type Earlier struct {
	PublicID  string
	CreatedAt time.Time
	Queue     string
	Trigger   string
	Status    handoff.Status
	Outcome   string
	// Handler is who held it last; empty if no one accepted it.
	Handler string
}

// History lists the contact's packages created before package id in the last 90 days, newest
// first, keeping only those in queues the reader may see: the reader's own queues, or every queue
// when allQueues. A package the reader may not open is left out rather than listed without a
// link, because its row alone would tell them that it exists, in which queue and how it ended.
func (b *Board) History(ctx context.Context, id, readerID int64, allQueues bool) ([]Earlier, error) {
	rows, err := b.db.Query(ctx, `
		SELECT p.handoff_id, p.created_at, q.name, coalesce(p.package->>'trigger', ''), p.status,
			coalesce(p.outcome, ''), coalesce(u.display_name, '')
		FROM handoffs cur
		JOIN handoffs p ON p.contact_id = cur.contact_id AND (p.created_at, p.id) < (cur.created_at, cur.id)
		JOIN queues q ON q.id = p.queue_id
		LEFT JOIN users u ON u.id = p.assignee_id
		WHERE cur.id = $1 AND p.created_at >= now() - interval '90 days'
			AND ($3 OR EXISTS (SELECT 1 FROM queue_members m WHERE m.queue_id = p.queue_id AND m.user_id = $2))
		ORDER BY p.created_at DESC, p.id DESC LIMIT $4`, id, readerID, allQueues, HistoryLimit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Earlier])
}
