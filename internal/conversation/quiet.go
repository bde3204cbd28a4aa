package conversation

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
)

// Quiet says, for each of rowIDs whose customer has the agent's reply to answer, since when: the
// time of the first agent reply after the customer's latest message (since the handoff, when the
// customer has written nothing). A package absent from the answer has no such reply: no agent has
// answered yet, or the customer wrote last and waits for the desk, which is not the customer going
// quiet. The queue's customer_idle and customer_gone count from here (or from the accept, if that
// came later: the agent who holds the package has had the customer for no longer).
//
// The first unanswered reply, not the last: an agent who writes "are you still there?" has not
// heard the customer since the first.
func Quiet(ctx context.Context, db querier, rowIDs []int64) (map[int64]time.Time, error) {
	rows, err := db.Query(ctx, `
		SELECT r.handoff_id, min(r.received_at)
		FROM messages r
		WHERE r.handoff_id = ANY($1) AND r.role = 'agent' AND r.seq > coalesce(
			(SELECT max(c.seq) FROM messages c WHERE c.handoff_id = r.handoff_id AND c.role = 'user'), 0)
		GROUP BY r.handoff_id`, rowIDs)
	if err != nil {
		return nil, err
	}
	out := map[int64]time.Time{}
	var id int64
	var since time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &since}, func() error {
		out[id] = since
		return nil
	})
	return out, err
}

// QuietSince is since when the customer of the package rowID has been quiet, by the answer quiet
// of Quiet: from the agent's first reply they left unanswered, or from start (when the agent who
// holds the package got it) if that came later. ok is false when the customer is not quiet.
func QuietSince(quiet map[int64]time.Time, rowID int64, start time.Time) (since time.Time, ok bool) {
	reply, ok := quiet[rowID]
	if !ok {
		return time.Time{}, false
	}
	if start.After(reply) {
		return start, true
	}
	return reply, true
}
