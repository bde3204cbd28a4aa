package events

import (
	"context"
	"time"
)

// LastTransferOut returns when the package was last transferred out of the queue named from after
// since, or nil. By the queue's name, as the log has recorded it since before it kept queue ids.
func LastTransferOut(ctx context.Context, db Querier, handoffID int64, from string, since time.Time) (*time.Time, error) {
	var at *time.Time
	err := db.QueryRow(ctx, `
		SELECT max(at) FROM events
		WHERE handoff_id = $1 AND kind = $2 AND detail->>'from_queue' = $3 AND at > $4`,
		handoffID, Transferred, from, since).Scan(&at)
	return at, err
}
