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

// BenchmarkRecordQueued measures what recording intake's changes costs PostgreSQL, per package,
// in batches of 32, as intake writes them under load: one log row each, against the two rows each change wrote
// before the log was one table (desk_events for the live feed, audit_log for the audit, created
// here as migration 00004 had them). Webhooks are left out of both, and commits do not wait for
// the disk, whose flush would hide the difference.
func BenchmarkRecordQueued(b *testing.B) {
	ctx := context.Background()
	db, err := pgxpool.New(ctx, pgtest.URL(b)+"&options=-c%20synchronous_commit%3Doff")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	if _, err := db.Exec(ctx, `
		CREATE TABLE desk_events (seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
			xid xid8 NOT NULL DEFAULT pg_current_xact_id(), queue_id bigint NOT NULL, handoff_id bigint NOT NULL,
			kind text NOT NULL, created_at timestamptz NOT NULL DEFAULT now());
		CREATE INDEX desk_events_xid_idx ON desk_events (xid, seq);
		CREATE TABLE audit_log (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, at timestamptz NOT NULL DEFAULT now(),
			actor_user bigint REFERENCES users (id), actor_bot bigint REFERENCES api_keys (id), action text NOT NULL,
			handoff_id bigint REFERENCES handoffs (id), detail jsonb NOT NULL DEFAULT '{}');
		CREATE INDEX audit_log_handoff_idx ON audit_log (handoff_id, id)`); err != nil {
		b.Fatal(err)
	}
	var handoffID, apiKeyID int64
	err = db.QueryRow(ctx, `
		WITH q AS (INSERT INTO queues (name) VALUES ('billing') RETURNING id),
		k AS (INSERT INTO api_keys (name, key_prefix, key_hash, webhook_secret) VALUES ('bot', 'hdk_bot', '\x01', 's') RETURNING id)
		INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package,
			body_sha256, expires_at)
		SELECT 'h1', k.id, q.id, 'queued', 2, 'c1', 'bot', '{}', '\x02', now() + interval '1 day' FROM q, k
		RETURNING id, api_key_id`).Scan(&handoffID, &apiKeyID)
	if err != nil {
		b.Fatal(err)
	}
	changes := make([]Change, recordBatch)
	for i := range changes {
		changes[i] = Change{HandoffID: handoffID, PublicID: "h1", QueueID: 1, Queue: "billing", APIKeyID: apiKeyID,
			Kind: Reserved, Status: handoff.StatusQueued, ActorBot: &apiKeyID, Reason: "policy_boundary", At: time.Now()}
	}
	b.Run("events", func(b *testing.B) {
		benchmarkBatches(b, db, func(batch *pgx.Batch) {
			if err := Queue(batch, changes...); err != nil {
				b.Fatal(err)
			}
		})
	})
	b.Run("desk_events+audit_log", func(b *testing.B) {
		n := len(changes)
		queues, handoffs, at := make([]int64, n), make([]int64, n), make([]time.Time, n)
		kinds, details, bots := make([]string, n), make([]string, n), make([]*int64, n)
		users := make([]*int64, n)
		for i, c := range changes {
			detail, err := c.detail()
			if err != nil {
				b.Fatal(err)
			}
			queues[i], handoffs[i], at[i], kinds[i], details[i], bots[i] = c.QueueID, c.HandoffID, c.At, string(c.Kind), string(detail), c.ActorBot
		}
		benchmarkBatches(b, db, func(batch *pgx.Batch) {
			batch.Queue(`INSERT INTO desk_events (queue_id, handoff_id, kind, created_at)
				SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::timestamptz[])`, queues, handoffs, kinds, at)
			batch.Queue(`INSERT INTO audit_log (at, actor_user, actor_bot, action, handoff_id, detail)
				SELECT * FROM unnest($1::timestamptz[], $2::bigint[], $3::bigint[], $4::text[], $5::bigint[], $6::text[]::jsonb[])`,
				at, users, bots, kinds, handoffs, details)
		})
	})
}

// benchmarkBatches sends one transaction per iteration, holding what queue adds, and reports the
// time per package.
func benchmarkBatches(b *testing.B, db *pgxpool.Pool, queue func(*pgx.Batch)) {
	ctx := context.Background()
	b.ResetTimer()
	for b.Loop() {
		batch := &pgx.Batch{}
		batch.Queue("BEGIN")
		queue(batch)
		batch.Queue("COMMIT")
		if err := db.SendBatch(ctx, batch).Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*recordBatch), "ns/package")
}

// recordBatch is intake's largest batch: the per-transaction costs matter least there.
const recordBatch = 32
