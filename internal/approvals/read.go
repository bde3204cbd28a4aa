package approvals

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/handoff"
)

// maxListed bounds the /approvals page: past it, something is wrong with staffing, not paging.
const maxListed = 500

// Listed is a pending request as /approvals shows it: with its package (unmasked: the caller masks
// per viewer through handoff.MaskFor before rendering) and its queue's display rules.
type Listed struct {
	Approval
	Queue           string
	ApprovalTimeout time.Duration
	PIIMinRole      string
	PIIEntityKeys   []string
	AssigneeID      *int64
	Assignee        string
	Package         handoff.Package
}

// PendingList lists the pending requests of every queue, the one nearest its expiry first: the
// one a supervisor must decide soonest. It joins the package,
// its queue and its holder, which the page shows beside each request.
func PendingList(ctx context.Context, db Querier) ([]Listed, error) {
	rows, err := db.Query(ctx, `
		SELECT a.id, a.handoff_id, h.handoff_id, a.queue_id, a.amount::text, a.currency, a.requested_by, r.display_name, a.requester_saw_contact,
			a.note, a.requested_at, a.expires_at, a.state, a.decided_by, a.decided_at,
			q.name, q.approval_timeout, q.pii_min_role, q.pii_entity_keys, h.assignee_id, coalesce(u.display_name, ''), h.package
		FROM approvals a JOIN handoffs h ON h.id = a.handoff_id JOIN queues q ON q.id = h.queue_id
		JOIN users r ON r.id = a.requested_by LEFT JOIN users u ON u.id = h.assignee_id
		WHERE a.state = 'pending'
		ORDER BY a.expires_at, a.id LIMIT $1`, maxListed)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Listed, error) {
		var l Listed
		a := &l.Approval
		err := row.Scan(&a.ID, &a.HandoffID, &a.PublicID, &a.QueueID, &a.Refund.Amount, &a.Refund.Currency, &a.RequestedBy, &a.Requester,
			&a.RequesterSawContact, &a.Note, &a.RequestedAt, &a.ExpiresAt, &a.State, &a.DecidedBy, &a.DecidedAt,
			&l.Queue, &l.ApprovalTimeout, &l.PIIMinRole, &l.PIIEntityKeys, &l.AssigneeID, &l.Assignee, &l.Package)
		return l, err
	})
}

// PendingCount is how many requests wait for a supervisor: the count beside "Approvals" in their
// top bar and in their pages' titles.
func PendingCount(ctx context.Context, db Querier) (int, error) {
	var n int
	err := db.QueryRow(ctx, pendingCountSQL).Scan(&n)
	return n, err
}

const pendingCountSQL = `SELECT count(*) FROM approvals WHERE state = 'pending'`

// QueuePendingCount adds to b the read of PendingCount into n, so that a supervisor's page reads
// it in the round trip of its top bar.
func QueuePendingCount(b *pgx.Batch, n *int) {
	b.Queue(pendingCountSQL).QueryRow(func(row pgx.Row) error { return row.Scan(n) })
}

// Times is how long supervisors took to decide requests: the median, the 90th percentile and how
// many were decided. Expired and withdrawn requests were not decided and do not count.
type Times struct {
	Count int
	P50   time.Duration
	P90   time.Duration
}

// DecisionTimes is the time from request to grant or denial of the requests decided in
// [from, to) on the packages now in queue queueID (0: every queue): for the supervisors' dashboard,
// which counts every figure in the queue a package is in now.
func DecisionTimes(ctx context.Context, db Querier, queueID int64, from, to time.Time) (Times, error) {
	var t Times
	var p50, p90 *float64
	err := db.QueryRow(ctx, `
		SELECT count(*),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM decided_at - requested_at)),
			percentile_cont(0.9) WITHIN GROUP (ORDER BY extract(epoch FROM decided_at - requested_at))
		FROM approvals
		WHERE decided_by IS NOT NULL AND decided_at >= $2 AND decided_at < $3
			AND ($1 = 0 OR handoff_id IN (SELECT id FROM handoffs WHERE queue_id = $1))`,
		queueID, from, to).Scan(&t.Count, &p50, &p90)
	if p50 != nil {
		t.P50 = time.Duration(*p50 * float64(time.Second))
	}
	if p90 != nil {
		t.P90 = time.Duration(*p90 * float64(time.Second))
	}
	return t, err
}
