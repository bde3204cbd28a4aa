package events

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// BenchmarkRecordWithAuditIndexes measures what the audit view's four indexes (migration 00018:
// by time, actor, queue and kind) add to writing the log, per change, in intake's batches of 32:
// the log as migrated, against the same log in a database of its own with those indexes dropped.
// Commits do not wait for the disk, whose flush would hide the difference.
func BenchmarkRecordWithAuditIndexes(b *testing.B) {
	ctx := context.Background()
	open := func(dropIndexes bool) (*pgxpool.Pool, []Change) {
		db, err := pgxpool.New(ctx, pgtest.URL(b)+"&options=-c%20synchronous_commit%3Doff")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(db.Close)
		if dropIndexes {
			if _, err := db.Exec(ctx, `DROP INDEX events_at_idx, events_actor_idx, events_queue_idx, events_kind_idx`); err != nil {
				b.Fatal(err)
			}
		}
		var handoffID, apiKeyID, userID int64
		err = db.QueryRow(ctx, `
			WITH q AS (INSERT INTO queues (name) VALUES ('billing') RETURNING id),
			k AS (INSERT INTO api_keys (name, key_prefix, key_hash, webhook_secret) VALUES ('bot', 'hdk_bot', '\x01', 's') RETURNING id),
			u AS (INSERT INTO users (email, display_name, role, password_hash) VALUES ('a@example.com', 'A', 'agent', 'x') RETURNING id)
			INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package,
				body_sha256, expires_at)
			SELECT 'h1', k.id, q.id, 'queued', 2, 'c1', 'bot', '{}', '\x02', now() + interval '1 day' FROM q, k
			RETURNING id, api_key_id, (SELECT id FROM u)`).Scan(&handoffID, &apiKeyID, &userID)
		if err != nil {
			b.Fatal(err)
		}
		changes := make([]Change, recordBatch)
		for i := range changes {
			// Reserved: a change the desk's users make, which no webhook follows.
			changes[i] = Change{HandoffID: handoffID, PublicID: "h1", QueueID: 1, Queue: "billing", APIKeyID: apiKeyID,
				Kind: Reserved, Status: handoff.StatusReserved, ActorUser: &userID, At: time.Now()}
		}
		return db, changes
	}
	for _, c := range []struct {
		name string
		drop bool
	}{{"with_audit_indexes", false}, {"without", true}} {
		db, changes := open(c.drop)
		b.Run(c.name, func(b *testing.B) {
			benchmarkBatches(b, db, func(batch *pgx.Batch) {
				if err := Queue(batch, changes...); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}
