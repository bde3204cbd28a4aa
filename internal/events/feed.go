package events

import (
	"context"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Event is one committed change, as the live desk reads it. A presence event has no queue and no
// package (zero ids); a change of access names its person (UserID) and no package.
type Event struct {
	Seq         int64
	Kind        Kind
	QueueID     int64
	FromQueueID int64
	HandoffID   int64
	UserID      int64
}

// Mark is a position in the event stream: every event of a transaction whose xid is below it has
// been read. It is pg_snapshot_xmin at the time of reading, kept as text because it is a 64-bit
// unsigned xid8 that browsers carry back on reconnect.
type Mark string

// Querier is a pool or a connection.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Now returns the current mark: events from now on are after it.
func Now(ctx context.Context, db Querier) (Mark, error) {
	var m string
	err := db.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&m)
	return Mark(m), err
}

// Valid reports whether m could be a mark (a browser may send anything).
func (m Mark) Valid() bool {
	_, err := strconv.ParseUint(string(m), 10, 64)
	return err == nil
}

// Read returns the events committed between from and now, in commit-safe order, and the new mark.
// It also says whether committed or running events wait at or above the new mark, held back by an
// older transaction somewhere on the cluster, so that a reader can look again soon.
//
// A sequence number is taken before commit, so reading "seq > last seen" would skip an event whose
// transaction commits after a higher-numbered one was read. Instead a read returns only events of
// transactions below the oldest one still running (the snapshot's xmin): those are final, and no
// event can appear below that mark later. A long transaction delays events; it never hides one.
func Read(ctx context.Context, db Querier, from Mark, limit int) ([]Event, Mark, bool, error) {
	rows, err := db.Query(ctx, `
		WITH bound AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS upto)
		SELECT e.seq, e.kind, coalesce(e.queue_id, 0), coalesce(e.from_queue_id, 0), coalesce(e.handoff_id, 0),
			coalesce(e.subject_user, 0), e.xid::text, bound.upto::text, EXISTS (SELECT 1 FROM events w WHERE w.xid >= bound.upto)
		FROM bound LEFT JOIN LATERAL (
			SELECT seq, kind, queue_id, from_queue_id, handoff_id, subject_user, xid FROM events
			WHERE xid >= $1::text::xid8 AND xid < bound.upto
			ORDER BY xid, seq LIMIT $2
		) e ON true`, string(from), limit)
	if err != nil {
		return nil, from, false, err
	}
	defer rows.Close()
	var events []Event
	next := from
	var lastXID string
	var waiting bool
	for rows.Next() {
		var seq, queueID, fromQueueID, handoffID, userID *int64
		var kind *Kind
		var xid *string
		var upto string
		if err := rows.Scan(&seq, &kind, &queueID, &fromQueueID, &handoffID, &userID, &xid, &upto, &waiting); err != nil {
			return nil, from, false, err
		}
		next = Mark(upto)
		if seq == nil {
			continue
		}
		events = append(events, Event{Seq: *seq, Kind: *kind, QueueID: *queueID, FromQueueID: *fromQueueID,
			HandoffID: *handoffID, UserID: *userID})
		lastXID = *xid
	}
	if err := rows.Err(); err != nil {
		return nil, from, false, err
	}
	if len(events) == limit {
		// More may wait in the same transaction or later ones: resume at the last transaction
		// read (its remaining events are re-read, and re-delivering an event is harmless
		// because a fragment shows current state).
		next, waiting = Mark(lastXID), true
	}
	return events, next, waiting, nil
}
