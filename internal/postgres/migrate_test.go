package postgres

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// unmigrated is a database with no migrations applied and the provider that applies them.
func unmigrated(t *testing.T) (*pgxpool.Pool, *goose.Provider) {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), pgtest.Unmigrated(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	db := stdlib.OpenDBFromPool(pool)
	t.Cleanup(func() { db.Close() })
	provider, err := newProvider(db)
	if err != nil {
		t.Fatal(err)
	}
	return pool, provider
}

// Migration 00007 makes desk_events and audit_log one events table: every audited row must
// come over, in its order, with its actor, package, detail and queue, and the way down must give
// them back.
func TestEventLogMigrationKeepsTheAudit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, provider := unmigrated(t)
	if _, err := provider.UpTo(ctx, 6); err != nil {
		t.Fatal(err)
	}
	exec := func(sql string) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	exec(`INSERT INTO queues (name) VALUES ('billing')`)
	exec(`INSERT INTO users (email, display_name, role, password_hash) VALUES ('a@example.com', 'Ada', 'agent', 'x')`)
	exec(`INSERT INTO api_keys (name, key_prefix, key_hash, webhook_secret) VALUES ('bot', 'hdk_bot', '\x01', 's')`)
	exec(`INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package, body_sha256, expires_at)
		SELECT 'h1', k.id, q.id, 'accepted', 2, 'c1', 'bot', '{}', '\x02', now() + interval '1 day' FROM api_keys k, queues q`)
	exec(`INSERT INTO audit_log (at, actor_bot, action, handoff_id, detail)
		SELECT '2026-11-01T10:00:00Z', k.id, 'queued', h.id, '{"status": "queued", "queue": "billing"}' FROM api_keys k, handoffs h`)
	exec(`INSERT INTO audit_log (at, actor_user, action, handoff_id, detail)
		SELECT '2026-11-01T10:05:00Z', u.id, 'accepted', h.id, '{"status": "accepted", "queue": "billing"}' FROM users u, handoffs h`)
	exec(`INSERT INTO desk_events (queue_id, handoff_id, kind) SELECT queue_id, id, 'accepted' FROM handoffs`)

	if _, err := provider.UpTo(ctx, 7); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := pool.QueryRow(ctx, `
		SELECT string_agg(concat_ws(' ', e.kind, e.at AT TIME ZONE 'UTC', u.display_name, k.name, h.handoff_id, q.name,
			e.detail->>'status', e.xid), ', ' ORDER BY e.seq)
		FROM events e LEFT JOIN users u ON u.id = e.actor_user LEFT JOIN api_keys k ON k.id = e.actor_bot
			LEFT JOIN handoffs h ON h.id = e.handoff_id LEFT JOIN queues q ON q.id = e.queue_id`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	const want = "queued 2026-11-01 10:00:00 bot h1 billing queued 0, accepted 2026-11-01 10:05:00 Ada h1 billing accepted 0"
	if got != want {
		t.Fatalf("events after the migration:\n%s\nwant\n%s", got, want)
	}

	if _, err := provider.DownTo(ctx, 6); err != nil {
		t.Fatal(err)
	}
	var actions string
	if err := pool.QueryRow(ctx, `SELECT string_agg(action, ' ' ORDER BY id) FROM audit_log`).Scan(&actions); err != nil {
		t.Fatal(err)
	}
	if actions != "queued accepted" {
		t.Fatalf("audit_log after the way down: %q, want the two rows back", actions)
	}
}

// Migrations 00024 and 00025 store emails as auth.NormalizeEmail writes them, checked by the
// database, with a unique index on the stored form built concurrently in place of the one on
// lower(email); the way down gives the old index back.
func TestEmailMigrationNormalizesStoredAddresses(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, provider := unmigrated(t)
	if _, err := provider.UpTo(ctx, 23); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO users (email, display_name, role, password_hash) VALUES
		(' Dana@Example.COM', 'Dana', 'agent', 'x'), (e'rene\u0301@example.com', 'René', 'agent', 'x'), ('Ünal@example.com', 'Ünal', 'agent', 'x')`); err != nil {
		t.Fatal(err)
	}
	if _, err := provider.UpTo(ctx, 25); err != nil {
		t.Fatal(err)
	}
	var emails string
	if err := pool.QueryRow(ctx, `SELECT string_agg(email, ' ' ORDER BY id) FROM users`).Scan(&emails); err != nil {
		t.Fatal(err)
	}
	if want := "dana@example.com ren\u00e9@example.com Ünal@example.com"; emails != want {
		t.Errorf("emails after the migration: %q, want %q", emails, want)
	}
	indexes := func() string {
		t.Helper()
		var got string
		if err := pool.QueryRow(ctx, `SELECT string_agg(i.relname || CASE WHEN x.indisvalid THEN '' ELSE ' (invalid)' END, ' ' ORDER BY i.relname)
			FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid
			WHERE x.indrelid IN ('users'::regclass, 'login_failures'::regclass) AND i.relname LIKE '%email%'`).Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got, want := indexes(), "login_failures_email_normalized_at_idx users_email_normalized_key"; got != want {
		t.Errorf("email indexes: %q, want %q", got, want)
	}
	for _, bad := range []string{"Erin@example.com", "dana@example.com"} {
		if _, err := pool.Exec(ctx, `INSERT INTO users (email, display_name, role, password_hash) VALUES ($1, 'X', 'agent', 'x')`, bad); err == nil {
			t.Errorf("the database took %q", bad)
		}
	}
	if _, err := provider.DownTo(ctx, 23); err != nil {
		t.Fatal(err)
	}
	if got, want := indexes(), "login_failures_email_at_idx users_email_key"; got != want {
		t.Errorf("email indexes after the way down: %q, want %q", got, want)
	}
}
