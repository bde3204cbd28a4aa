package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

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
	// ActorUser is the person who made the change, if a person did: their own pages follow the
	// packages they act on (the count of what they hold, "My work"), in whichever queue.
	ActorUser int64
	// At is when the change was made, by the clock of the instance that made it.
	At time.Time
}

// Mark is a position in the event stream: every event of a transaction whose xid is below it has
// been read, and no other can appear there. It reads "<incarnation>:<xid>", text because the xid
// is a 64-bit unsigned xid8 and browsers carry marks back on reconnect. The xid means something
// only within the incarnation it was handed out in (see incarnation).
type Mark string

// Errors of a mark that cannot be read on from.
var (
	// ErrOtherIncarnation: the mark was not handed out by the database as it runs now: before a
	// restart, a crash or a failover, in the format of marks before incarnations, or above any
	// mark this incarnation handed out. Its xid may be handed out again, so reading on from it
	// could skip events; the reader starts over from the current mark instead.
	ErrOtherIncarnation = errors.New("the mark is not from this incarnation of the database")
	// ErrTooFarBehind: more events committed since the mark than a catch-up replays.
	ErrTooFarBehind = errors.New("more events committed since the mark than a catch-up replays")
)

// Valid reports whether m could be a mark (a browser may send anything). A mark of an older
// format or another incarnation is valid: reading from it answers ErrOtherIncarnation.
func (m Mark) Valid() bool {
	_, _, ok := m.split()
	return ok
}

// split parses m into its incarnation ("" in the format before incarnations: an xid alone) and xid.
func (m Mark) split() (incarnation string, xid uint64, ok bool) {
	inc, x, found := strings.Cut(string(m), ":")
	if !found {
		inc, x = "", inc
	} else if inc == "" || len(inc) > 64 || strings.Trim(inc, "0123456789abcdefghijklmnopqrstuvwxyz") != "" {
		return "", 0, false
	}
	xid, err := strconv.ParseUint(x, 10, 64)
	return inc, xid, err == nil
}

func mark(incarnation string, xid uint64) Mark {
	return Mark(incarnation + ":" + strconv.FormatUint(xid, 10))
}

// Querier is a pool or a connection.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// incarnation is SQL naming the life of the database server that runs the statement. Transaction
// ids are handed out again after a crash (those of transactions that never reached the disk) and
// after a failover (those the new primary never received), so an xid means something only within
// one life: one timeline (new at a failover), one postmaster (new at a restart) and one reset of
// the shared statistics (new at the crash recovery the postmaster runs, without restarting, when a
// backend dies). Each is readable without superuser. Hashed, because browsers carry marks and need
// not learn when the server started.
const incarnation = `substr(encode(sha256(convert_to(concat_ws(' ',
	substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8),
	extract(epoch FROM pg_postmaster_start_time()),
	extract(epoch FROM (SELECT stats_reset FROM pg_stat_bgwriter))), 'UTF8')), 'hex'), 1, 16)`

// The bound of a read: every transaction with a lower xid has ended or cannot write events, so
// the events below it are final. Both queries define the CTE "bound" (inc, upto), materialized so
// that the incarnation is worked out once per statement, not once per event read.
const (
	// oldestRunning is the oldest transaction running anywhere on the cluster: cheap, but held
	// back by a transaction in any database.
	oldestRunning = `bound AS MATERIALIZED (SELECT ` + incarnation + ` AS inc, pg_snapshot_xmin(pg_current_snapshot()) AS upto)`
	// oldestHere passes over the running transactions that pg_stat_activity or pg_prepared_xacts
	// place in another database: those cannot write this database's events. A transaction it
	// cannot place (one that ended meanwhile, or a process without a database) still holds the
	// bound, which only delays.
	oldestHere = `elsewhere AS (
		SELECT a.backend_xid AS x FROM pg_stat_activity a
		WHERE a.backend_xid IS NOT NULL AND a.datid <> (SELECT oid FROM pg_database WHERE datname = current_database())
		UNION ALL
		SELECT p.transaction FROM pg_prepared_xacts p WHERE p.database <> current_database()
	), bound AS MATERIALIZED (
		SELECT ` + incarnation + ` AS inc, least(pg_snapshot_xmax(s),
			(SELECT min(r) FROM pg_snapshot_xip(s) r WHERE NOT EXISTS (SELECT FROM elsewhere WHERE elsewhere.x = r::xid))) AS upto
		FROM pg_current_snapshot() s
	)`
)

// Now returns the current mark: events from now on are after it.
func Now(ctx context.Context, db Querier) (Mark, error) {
	var inc, upto string
	if err := db.QueryRow(ctx, `WITH `+oldestHere+` SELECT inc, upto::text FROM bound`).Scan(&inc, &upto); err != nil {
		return "", err
	}
	return Mark(inc + ":" + upto), nil // upto is an xid8 spelled as text, as mark spells it
}

// Read returns the events committed between from and now, in commit-safe order, and the new mark.
// It reads up to limit events, and past it only the rest of the last transaction: a mark lies
// between transactions. It also says whether committed or running events wait at or above the new
// mark, held back by an older transaction of this database, so that a reader can look again soon.
// If from was not handed out by this incarnation of the database, Read returns ErrOtherIncarnation
// with the current mark.
//
// A sequence number is taken before commit, so reading "seq > last seen" would skip an event whose
// transaction commits after a higher-numbered one was read. Instead a read returns only events of
// transactions below the oldest one still running (the snapshot's xmin): those are final, and no
// event can appear below that mark later. A long transaction delays events; it never hides one.
// That xmin is the cluster's, so when events wait above it, Read looks once more past the running
// transactions of other databases, in a second statement that costs a look at pg_stat_activity.
func Read(ctx context.Context, db Querier, from Mark, limit int) ([]Event, Mark, bool, error) {
	inc, xid, ok := from.split()
	if !ok {
		return nil, from, false, fmt.Errorf("read events from %q: not a mark", from)
	}
	first, err := read(ctx, db, oldestRunning, inc, xid, limit)
	if err != nil {
		return nil, failed(from, first, err), false, err
	}
	if !first.waiting || len(first.events) >= limit {
		return first.events, first.next, first.waiting, nil
	}
	more, err := read(ctx, db, oldestHere, inc, first.nextXID, limit-len(first.events))
	if err != nil {
		return nil, failed(from, more, err), false, err
	}
	return append(first.events, more.events...), more.next, more.waiting, nil
}

// failed is the mark a failed read leaves its reader at: the current one when from is of another
// incarnation, else from.
func failed(from Mark, p page, err error) Mark {
	if errors.Is(err, ErrOtherIncarnation) {
		return p.next
	}
	return from
}

type page struct {
	events  []Event
	next    Mark
	nextXID uint64
	waiting bool
}

// readStatement is the statement read runs with the CTE bound: $1 the xid to read from (text),
// $2 the limit, $3 the incarnation.
//
// Whether events wait at or above the bound is asked as a scalar probe, the first such xid in
// events_xid_idx (ORDER BY … LIMIT 1), not as an EXISTS: PostgreSQL drops an ORDER BY and a LIMIT
// inside an EXISTS and, custom and generic plans alike, answers it with a Seq Scan of the whole
// log, a cost that grows with the desk's history and that every instance paid once a second
// while idle (TestIdleReadDoesNotScanTheLog, make bench-events).
func readStatement(bound string) string {
	return `WITH ` + bound + `, head AS MATERIALIZED (
			SELECT inc, upto, (SELECT w.xid FROM events w WHERE w.xid >= greatest(upto, $1::text::xid8)
				ORDER BY w.xid LIMIT 1) IS NOT NULL AS waiting
			FROM bound
		)
		SELECT head.inc, head.upto::text, head.waiting,
			e.seq, e.kind, coalesce(e.queue_id, 0), coalesce(e.from_queue_id, 0), coalesce(e.handoff_id, 0),
			coalesce(e.subject_user, 0), coalesce(e.actor_user, 0), e.xid::text, e.at
		FROM head LEFT JOIN LATERAL (
			SELECT seq, kind, queue_id, from_queue_id, handoff_id, subject_user, actor_user, xid, at FROM events
			WHERE xid >= $1::text::xid8 AND xid < head.upto
			ORDER BY xid, seq LIMIT $2
		) e ON head.inc = $3`
}

// read reads from xid of incarnation inc up to the bound the CTE bound defines.
func read(ctx context.Context, db Querier, bound, inc string, xid uint64, limit int) (page, error) {
	rows, err := db.Query(ctx, readStatement(bound), strconv.FormatUint(xid, 10), limit, inc)
	if err != nil {
		return page{}, err
	}
	defer rows.Close()
	var p page
	var current, upto, lastXID string
	for rows.Next() {
		var seq, queueID, fromQueueID, handoffID, userID, actorUser *int64
		var kind *Kind
		var eventXID *string
		var at *time.Time
		if err := rows.Scan(&current, &upto, &p.waiting, &seq, &kind, &queueID, &fromQueueID, &handoffID, &userID, &actorUser,
			&eventXID, &at); err != nil {
			return page{}, err
		}
		if seq == nil {
			continue
		}
		p.events = append(p.events, Event{Seq: *seq, Kind: *kind, QueueID: *queueID, FromQueueID: *fromQueueID,
			HandoffID: *handoffID, UserID: *userID, ActorUser: *actorUser, At: *at})
		lastXID = *eventXID
	}
	if err := rows.Err(); err != nil {
		return page{}, err
	}
	bound64, err := strconv.ParseUint(upto, 10, 64)
	if err != nil {
		return page{}, fmt.Errorf("read events: bound %q: %w", upto, err)
	}
	if current != inc {
		return page{next: mark(current, bound64), nextXID: bound64}, ErrOtherIncarnation
	}
	// Never back: a mark past the bound (one that looked past other databases' transactions, or
	// another instance's) stays where it is.
	p.nextXID = max(xid, bound64)
	if len(p.events) == limit {
		// More may wait. The last transaction read may have more events: they are read now, so
		// that the reader resumes after it, wherever the limit fell.
		last, err := strconv.ParseUint(lastXID, 10, 64)
		if err != nil {
			return page{}, fmt.Errorf("read events: xid %q: %w", lastXID, err)
		}
		rest, err := rest(ctx, db, lastXID, p.events[len(p.events)-1].Seq)
		if err != nil {
			return page{}, err
		}
		p.events = append(p.events, rest...)
		p.nextXID, p.waiting = last+1, true
	}
	p.next = mark(inc, p.nextXID)
	return p, nil
}

// rest returns the events of the transaction xid after seq.
func rest(ctx context.Context, db Querier, xid string, seq int64) ([]Event, error) {
	rows, err := db.Query(ctx, `
		SELECT seq, kind, coalesce(queue_id, 0), coalesce(from_queue_id, 0), coalesce(handoff_id, 0), coalesce(subject_user, 0),
			coalesce(actor_user, 0), at
		FROM events WHERE xid = $1::text::xid8 AND seq > $2 ORDER BY seq`, xid, seq)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Event, error) {
		var e Event
		err := row.Scan(&e.Seq, &e.Kind, &e.QueueID, &e.FromQueueID, &e.HandoffID, &e.UserID, &e.ActorUser, &e.At)
		return e, err
	})
}

// Missed returns the events a browser missed between since, the mark it comes back with, and upto,
// a mark read up to already (the hub's): at most limit of them, or ErrTooFarBehind. A since that
// upto's incarnation of the database did not hand out, or that is not the current one's, answers
// ErrOtherIncarnation.
func Missed(ctx context.Context, db Querier, since, upto Mark, limit int) ([]Event, error) {
	inc, from, ok := since.split()
	if !ok {
		return nil, fmt.Errorf("events missed since %q: not a mark", since)
	}
	uptoInc, to, ok := upto.split()
	if !ok || inc == "" || inc != uptoInc {
		return nil, ErrOtherIncarnation
	}
	// Below upto every event is final, so no snapshot bound is needed; since above every xid
	// handed out (the snapshot's xmax) is not a mark of this incarnation.
	rows, err := db.Query(ctx, `
		WITH cur AS MATERIALIZED (SELECT `+incarnation+` AS inc, pg_snapshot_xmax(pg_current_snapshot()) AS xmax)
		SELECT cur.inc = $3 AND $1::text::xid8 <= cur.xmax, e.seq, e.kind, coalesce(e.queue_id, 0),
			coalesce(e.from_queue_id, 0), coalesce(e.handoff_id, 0), coalesce(e.subject_user, 0), coalesce(e.actor_user, 0), e.at
		FROM cur LEFT JOIN LATERAL (
			SELECT seq, kind, queue_id, from_queue_id, handoff_id, subject_user, actor_user, xid, at FROM events
			WHERE xid >= $1::text::xid8 AND xid < $2::text::xid8
			ORDER BY xid, seq LIMIT $4
		) e ON cur.inc = $3 AND $1::text::xid8 <= cur.xmax`,
		strconv.FormatUint(from, 10), strconv.FormatUint(to, 10), inc, limit+1)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var missed []Event
	var here bool
	for rows.Next() {
		var seq, queueID, fromQueueID, handoffID, userID, actorUser *int64
		var kind *Kind
		var at *time.Time
		if err := rows.Scan(&here, &seq, &kind, &queueID, &fromQueueID, &handoffID, &userID, &actorUser, &at); err != nil {
			return nil, err
		}
		if seq != nil {
			missed = append(missed, Event{Seq: *seq, Kind: *kind, QueueID: *queueID, FromQueueID: *fromQueueID,
				HandoffID: *handoffID, UserID: *userID, ActorUser: *actorUser, At: *at})
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	switch {
	case !here:
		return nil, ErrOtherIncarnation
	case len(missed) > limit:
		return nil, ErrTooFarBehind
	}
	return missed, nil
}
