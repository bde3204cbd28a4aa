package events

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

func insertEvent(t *testing.T, tx pgx.Tx) int64 {
	t.Helper()
	var seq int64
	if err := tx.QueryRow(context.Background(),
		`INSERT INTO events (kind, queue_id) VALUES ('queued', 1) RETURNING seq`).Scan(&seq); err != nil {
		t.Fatal(err)
	}
	return seq
}

func begin(t *testing.T, db *pgxpool.Pool) pgx.Tx {
	t.Helper()
	tx, err := db.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// readUntil reads from mark until want events arrived or 10s passed. A transaction of another
// test that ends while a read looks at it, in another database of the same server, can hold the
// mark back for a moment; that delays events, which is all it may do.
func readUntil(t *testing.T, db *pgxpool.Pool, mark Mark, want int) ([]Event, Mark) {
	t.Helper()
	var all []Event
	deadline := time.Now().Add(10 * time.Second)
	for len(all) < want && time.Now().Before(deadline) {
		events, next, _, err := Read(context.Background(), db, mark, 100)
		if err != nil {
			t.Fatal(err)
		}
		all, mark = append(all, events...), next
		if len(all) < want {
			time.Sleep(20 * time.Millisecond)
		}
	}
	return all, mark
}

// A transaction that took its sequence number first but commits last must still be read: a
// reader paging by seq would have moved past it.
func TestReadNeverSkipsALateCommit(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	mark, err := Now(ctx, db)
	if err != nil {
		t.Fatal(err)
	}

	early := begin(t, db) // takes the lower seq, commits last
	late := begin(t, db)  // takes the higher seq, commits first
	lowSeq := insertEvent(t, early)
	highSeq := insertEvent(t, late)
	if err := late.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	// The higher seq is committed and visible: exactly the moment a seq cursor would skip.
	var visible int64
	if err := db.QueryRow(ctx, `SELECT max(seq) FROM events`).Scan(&visible); err != nil || visible != highSeq {
		t.Fatalf("visible max seq %d, %v; want %d", visible, err, highSeq)
	}
	events, next, _, err := Read(ctx, db, mark, 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 0 {
		t.Fatalf("read %v while an older transaction is running; want nothing yet", events)
	}

	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	events, _ = readUntil(t, db, next, 2)
	if len(events) != 2 || events[0].Seq != lowSeq || events[1].Seq != highSeq {
		t.Fatalf("after both commits read %v, want seq %d then %d", events, lowSeq, highSeq)
	}
}

// The transaction with the lower xid may take the higher seq. Events are read in commit-safe
// order, each exactly once, whatever the order of seq, xid and commit.
func TestReadDeliversEachEventOnceUnderInterleaving(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	mark, err := Now(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	older := begin(t, db)
	if _, err := older.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil { // the lower xid
		t.Fatal(err)
	}
	younger := begin(t, db)
	youngSeq := insertEvent(t, younger) // the lower seq
	oldSeq := insertEvent(t, older)     // the higher seq, lower xid
	seen := map[int64]int{}
	read := func(want int) {
		var events []Event
		events, mark = readUntil(t, db, mark, want)
		for _, e := range events {
			seen[e.Seq]++
		}
	}
	if err := older.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	read(1)
	if seen[oldSeq] != 1 || seen[youngSeq] != 0 {
		t.Fatalf("after the older transaction committed: %v; want only seq %d", seen, oldSeq)
	}
	if err := younger.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	read(1)
	read(0)
	if seen[oldSeq] != 1 || seen[youngSeq] != 1 {
		t.Fatalf("delivered %v, want seq %d and %d once each", seen, youngSeq, oldSeq)
	}
}

// A transaction with more events than a read takes is read whole, and the reader moves on past it:
// a mark lies between transactions.
func TestReadTakesATransactionWhole(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	mark, err := Now(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	var big, small []int64
	if err := db.QueryRow(ctx, `WITH e AS (INSERT INTO events (kind, queue_id) SELECT 'queued', 1 FROM generate_series(1, 5) RETURNING seq)
		SELECT array_agg(seq ORDER BY seq) FROM e`).Scan(&big); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `INSERT INTO events (kind, queue_id) VALUES ('queued', 1) RETURNING ARRAY[seq]`).Scan(&small); err != nil {
		t.Fatal(err)
	}
	var got [][]int64
	for deadline := time.Now().Add(10 * time.Second); len(got) < 2 && time.Now().Before(deadline); {
		events, next, _, err := Read(ctx, db, mark, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) > 0 {
			var seqs []int64
			for _, e := range events {
				seqs = append(seqs, e.Seq)
			}
			got = append(got, seqs)
		} else {
			time.Sleep(20 * time.Millisecond)
		}
		mark = next
	}
	if want := [][]int64{big, small}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("reads of 2 took %v, want %v: the first transaction whole, then the second", got, want)
	}
}

// A writing transaction in another database of the cluster is the cluster's oldest running one,
// below the desk's new event, for as long as it stays open. It cannot have written the desk's
// events, so it must not hold them back. The reader is the tests' role, not a superuser, and the
// other transaction belongs to another role, whose sessions such a reader sees only in part.
func TestReadIsNotHeldBackByOtherDatabases(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	var super bool
	if err := db.QueryRow(ctx, `SELECT rolsuper FROM pg_roles WHERE rolname = current_user`).Scan(&super); err != nil || super {
		t.Fatalf("the reader is a superuser (%v): the test would prove nothing of the desk's own role", err)
	}
	other, err := url.Parse(pgtest.Unmigrated(t))
	if err != nil {
		t.Fatal(err)
	}
	admin, err := url.Parse(pgtest.AdminURL())
	if err != nil {
		t.Fatal(err)
	}
	other.User = admin.User
	conn, err := pgx.Connect(ctx, other.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	elsewhere, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var otherXID uint64
	if err := elsewhere.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&otherXID); err != nil {
		t.Fatal(err)
	}

	mark, err := Now(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	tx := begin(t, db)
	seq := insertEvent(t, tx)
	var eventXID uint64
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text::bigint`).Scan(&eventXID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if otherXID >= eventXID {
		t.Fatalf("the other database's transaction %d is not below the event's %d", otherXID, eventXID)
	}

	events, _ := readUntil(t, db, mark, 1)
	if len(events) != 1 || events[0].Seq != seq {
		t.Fatalf("read %v while a transaction of another database runs; want seq %d", events, seq)
	}
	var running string
	if err := elsewhere.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&running); err != nil || running != strconv.FormatUint(otherXID, 10) {
		t.Fatalf("the other database's transaction ended before the read (%v, %q)", err, running)
	}
}

func TestMarkValid(t *testing.T) {
	t.Parallel()
	for m, want := range map[Mark]bool{
		"0f3a9c1d2e4b5a6c:741":               true,
		"741":                                true, // before incarnations: valid, and answered with a resync
		"0":                                  true,
		"18446744073709551615":               true,
		"18446744073709551616":               false,
		"":                                   false,
		":741":                               false,
		"0f3a:":                              false,
		"0f3a:-1":                            false,
		"0F3A:741":                           false,
		"0f3a:741:1":                         false,
		"not-a-mark":                         false,
		"0f3a:741 ":                          false,
		Mark(strings.Repeat("a", 65) + ":1"): false,
	} {
		if got := m.Valid(); got != want {
			t.Errorf("Mark(%q).Valid() = %v, want %v", m, got, want)
		}
	}
}

// A browser coming back is caught up on what it missed while that is at most the window's worth of
// events; a mark it cannot be caught up from (too old, of another incarnation or format, or never
// handed out) answers an error that makes it reload instead of replaying history.
func TestMissedCatchesUpOnlyWithinTheWindow(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	since, err := Now(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	commit := func(n int) {
		t.Helper()
		if _, err := db.Exec(ctx, `INSERT INTO events (kind, queue_id) SELECT 'queued', 1 FROM generate_series(1, $1)`, n); err != nil {
			t.Fatal(err)
		}
	}
	commit(3)
	upto := readAll(t, db, since, 3)
	missed, err := Missed(ctx, db, since, upto, 3)
	if err != nil || len(missed) != 3 {
		t.Fatalf("missed %v, %v; want the 3 events", missed, err)
	}
	if _, err := Missed(ctx, db, since, upto, 2); !errors.Is(err, ErrTooFarBehind) {
		t.Fatalf("3 events with a window of 2: %v, want ErrTooFarBehind", err)
	}
	inc, _, _ := upto.split()
	for _, stale := range []Mark{"0", "741", "0f3a9c1d2e4b5a6c:1", Mark(inc + ":18446744073709551615")} {
		if _, err := Missed(ctx, db, stale, upto, 100); !errors.Is(err, ErrOtherIncarnation) {
			t.Errorf("missed since %s: %v, want ErrOtherIncarnation", stale, err)
		}
	}
	if _, _, _, err := Read(ctx, db, "741", 100); !errors.Is(err, ErrOtherIncarnation) {
		t.Errorf("read from a mark of the format before incarnations: %v, want ErrOtherIncarnation", err)
	}
}

// readAll reads from mark until want events arrived and returns the mark after them.
func readAll(t *testing.T, db *pgxpool.Pool, mark Mark, want int) Mark {
	t.Helper()
	events, next := readUntil(t, db, mark, want)
	if len(events) != want {
		t.Fatalf("read %d events, want %d", len(events), want)
	}
	return next
}

// Transaction ids of transactions that never reached the disk are handed out again after a crash,
// so a mark handed out before it can lie above events committed after it: reading on from it would
// skip them for good. Such a mark is refused, after a crash of the whole server as after the crash
// of one backend, which the postmaster recovers from without restarting; a mark of the running
// incarnation reads on.
func TestMarksDoNotOutliveTheDatabase(t *testing.T) {
	t.Parallel()
	cluster := pgtest.NewCluster(t)
	ctx := context.Background()
	db := pgtest.Open(t, cluster.URL(t))

	xid := func(m Mark) uint64 {
		_, x, _ := m.split()
		return x
	}
	lost := func() Mark {
		t.Helper()
		// Transactions that roll back write nothing that must reach the disk: a crash forgets
		// their xids, and the mark handed out after them lies above xids that come again.
		for range 3 {
			tx := begin(t, db)
			insertEvent(t, tx)
			if err := tx.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		}
		m, err := Now(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	commit := func() uint64 {
		t.Helper()
		var x uint64
		err := db.QueryRow(ctx, `INSERT INTO events (kind, queue_id) VALUES ('queued', 1) RETURNING xid::text::bigint`).Scan(&x)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	refused := func(what string, before Mark) Mark {
		t.Helper()
		events, now, _, err := Read(ctx, db, before, 100)
		if !errors.Is(err, ErrOtherIncarnation) || events != nil {
			t.Fatalf("%s: reading on from the mark before it: %v, %v; want ErrOtherIncarnation", what, events, err)
		}
		if now == before || !now.Valid() {
			t.Fatalf("%s: the current mark is %q, the one before was %q", what, now, before)
		}
		if _, err := Missed(ctx, db, before, now, 100); !errors.Is(err, ErrOtherIncarnation) {
			t.Fatalf("%s: catching up from the mark before it: %v; want ErrOtherIncarnation", what, err)
		}
		return now
	}

	before := lost()
	cluster.Stop("immediate")
	cluster.Start()
	db.Reset()
	if x := commit(); x < xid(before) {
		t.Logf("after the crash an event took xid %d, below the mark %s handed out before it", x, before)
	}
	now := refused("a restart after a crash", before)

	// A mark of the running incarnation reads on.
	next := commit()
	events, _ := readUntil(t, db, now, 1)
	if len(events) != 1 {
		t.Fatalf("after the restart read %v from the current mark, want the event of xid %d", events, next)
	}

	before = lost()
	var pid int
	if err := db.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	cluster.CrashBackend(ctx, pid)
	db.Reset()
	refused("a backend's crash", before)
}
