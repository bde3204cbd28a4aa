package intake

import (
	"context"
	"fmt"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/queue"
)

// Overflow policies: what intake does when a queue cannot serve a customer soon.
const (
	OverflowAccept = "accept" // queue it anyway
	OverflowRoute  = "route"  // send it to the queue's overflow queue
	OverflowDefer  = "defer"  // answer 503 so the bot keeps the customer
)

// ReasonDeferred is the 503 reason of the defer policy.
const ReasonDeferred = "deferred"

// deferRetry is the Retry-After of a deferred package: long enough for an agent to log in or the
// backlog to move, short enough that the customer is not kept waiting on the bot for long.
const deferRetry = 60 * time.Second

// overflow applies q's overflow policy. A queue is healthy while one of its agents is online and
// its oldest waiting package is within the SLA; otherwise the policy decides. It returns the
// queue the package goes to.
func overflow(ctx context.Context, db queue.Querier, q queue.Queue, now time.Time) (queue.Queue, error) {
	if q.OverflowPolicy == OverflowAccept {
		return q, nil
	}
	online, err := queue.AgentsOnline(ctx, db, q.ID)
	if err != nil {
		return q, err
	}
	var oldest *time.Time
	if err := db.QueryRow(ctx, `SELECT min(enqueued_at) FROM handoffs WHERE queue_id = $1 AND status = 'queued'`, q.ID).
		Scan(&oldest); err != nil {
		return q, err
	}
	pastSLA := oldest != nil && now.Sub(*oldest) > q.SLA
	if online > 0 && !pastSLA {
		return q, nil
	}
	why := "no agent of queue " + q.Name + " is online"
	if online > 0 {
		why = fmt.Sprintf("queue %s's oldest package has waited past its %s SLA", q.Name, q.SLA)
	}
	if q.OverflowPolicy == OverflowRoute && q.OverflowQueueID != nil {
		return queue.ByID(ctx, db, *q.OverflowQueueID)
	}
	return q, &desk.Error{Code: desk.Unavailable, Reason: ReasonDeferred, RetryAfter: deferRetry,
		Message: why + "; keep the customer with the bot and try again later"}
}

// offer finds the preferred agent when they work the queue, are online and have room: the
// package is theirs alone to take for one reservation timeout, then anyone's. An email the desk
// refuses as a look-alike (auth.NormalizeEmail) names nobody: the package goes to the queue.
func offer(ctx context.Context, db queue.Querier, q queue.Queue, email string, now time.Time) (*int64, *time.Time, error) {
	email, err := auth.NormalizeEmail(email)
	if email == "" || err != nil {
		return nil, nil, nil // a refused address is no one's: the package is not refused for it
	}
	userID, err := queue.MemberByEmail(ctx, db, q.ID, email)
	if err != nil || userID == 0 {
		return nil, nil, err
	}
	ok, err := queue.OnlineWithRoom(ctx, db, userID)
	if err != nil || !ok {
		return nil, nil, err
	}
	until := now.Add(q.ReservationTimeout)
	return &userID, &until, nil
}
