package events

import (
	"context"
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// BenchmarkRead measures what the hub's read costs, against the statement it replaced (the
// snapshot's xmin alone, no incarnation) in the same run on the same database:
//   - before: the old statement, nothing new to read;
//   - idle: Read with nothing new to read, the hub's poll;
//   - elsewhere: Read while a writing transaction of another database holds the cluster's xmin
//     below one waiting event, which takes the second statement past it (the event is read once,
//     then Read goes on from the mark before it, so each iteration reads it again).
func BenchmarkRead(b *testing.B) {
	ctx := context.Background()
	db := pgtest.New(b)
	const before = `
		WITH bound AS (SELECT pg_snapshot_xmin(pg_current_snapshot()) AS upto)
		SELECT e.seq, e.kind, coalesce(e.queue_id, 0), coalesce(e.from_queue_id, 0), coalesce(e.handoff_id, 0),
			e.xid::text, bound.upto::text, EXISTS (SELECT 1 FROM events w WHERE w.xid >= bound.upto)
		FROM bound LEFT JOIN LATERAL (
			SELECT seq, kind, queue_id, from_queue_id, handoff_id, xid FROM events
			WHERE xid >= $1::text::xid8 AND xid < bound.upto
			ORDER BY xid, seq LIMIT $2
		) e ON true`
	b.Run("before", func(b *testing.B) {
		var xmin string
		if err := db.QueryRow(ctx, `SELECT pg_snapshot_xmin(pg_current_snapshot())::text`).Scan(&xmin); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			rows, err := db.Query(ctx, before, xmin, 10000)
			if err != nil {
				b.Fatal(err)
			}
			rows.Close()
		}
	})
	b.Run("idle", func(b *testing.B) {
		mark, err := Now(ctx, db)
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			if _, mark, _, err = Read(ctx, db, mark, 10000); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("elsewhere", func(b *testing.B) {
		other, err := url.Parse(pgtest.Unmigrated(b))
		if err != nil {
			b.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, other.String())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close(ctx) })
		tx, err := conn.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = tx.Rollback(ctx) })
		if _, err := tx.Exec(ctx, `SELECT pg_current_xact_id()`); err != nil {
			b.Fatal(err)
		}
		mark, err := Now(ctx, db)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO events (kind, queue_id) VALUES ('queued', 1)`); err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			events, _, _, err := Read(ctx, db, mark, 10000)
			if err != nil || len(events) != 1 {
				b.Fatalf("read %v, %v; want the one event", events, err)
			}
		}
	})
}
