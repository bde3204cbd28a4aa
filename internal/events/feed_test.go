package events

import (
	"context"
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

// readUntil reads from mark until want events arrived or 10s passed. The watermark is
// cluster-wide, so transactions of other tests (other databases, same server) can hold it back for
// a moment; that delays events, which is all it may do.
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
