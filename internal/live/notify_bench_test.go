package live

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// BenchmarkCommit measures what NOTIFY inside a change's transaction costs its commit, against
// the same transaction without it (what the desk does: one coalesced NOTIFY per instance, outside
// any data transaction). NOTIFY serializes committing transactions on a database-wide lock, so the
// difference grows with concurrency. Run with:
//
//	go test ./internal/live -run '^$' -bench Commit -benchtime 3000x -count 5
func BenchmarkCommit(b *testing.B) {
	for _, variant := range []struct {
		name   string
		notify bool
	}{{"event-only", false}, {"event+notify-in-tx", true}} {
		b.Run(variant.name, func(b *testing.B) {
			db := pgtest.New(b)
			b.SetParallelism(4) // 8 committers on 2 cores
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				ctx := context.Background()
				for pb.Next() {
					err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
						if _, err := tx.Exec(ctx, `INSERT INTO events (kind, queue_id) VALUES ('queued', 1)`); err != nil {
							return err
						}
						if variant.notify {
							_, err := tx.Exec(ctx, `SELECT pg_notify($1, '1')`, Channel)
							return err
						}
						return nil
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}
