package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/handoffdesk/desk/internal/logtest"
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

// previousRelease is the last migration of the release before this one: the schema production
// runs when this release's migrations start.
const previousRelease = 23

// A migration that cannot have its lock gives up after LockTimeout rather than wait in the lock
// queue, where every write to the table would wait behind it for as long as the lock is held; the
// runner tries again, and succeeds once the lock is free. Here a long transaction reads users
// while 00024 needs users to itself: a sign-up arriving meanwhile gets through.
func TestMigrationGivesUpABusyLockAndTriesAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, provider := unmigrated(t)
	if _, err := provider.UpTo(ctx, previousRelease); err != nil {
		t.Fatal(err)
	}
	holder, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback(ctx) }()
	if _, err := holder.Exec(ctx, `SELECT count(*) FROM users`); err != nil {
		t.Fatal(err)
	}

	rec, logger := logtest.New()
	done := make(chan error, 1)
	go func() {
		done <- migrate(ctx, pool, logger, retry{attempts: 100, wait: 50 * time.Millisecond, maxWait: 50 * time.Millisecond})
	}()
	waitFor(t, "the migration waiting for its lock on users", func() (bool, string) {
		var waiting int
		err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE relation = 'users'::regclass AND NOT granted`).Scan(&waiting)
		return err == nil && waiting > 0, fmt.Sprintf("%d waiting (%v)", waiting, err)
	})
	// Queued behind the migration's request, this write waits as long as the migration does.
	writeCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := pool.Exec(writeCtx, `INSERT INTO users (email, display_name, role, password_hash) VALUES ('erin@example.com', 'Erin', 'agent', 'x')`); err != nil {
		t.Fatalf("a sign-up while the migration wanted users: %v", err)
	}
	gaveUp := rec.Wait(t, "the migration giving up its lock", func(r slog.Record) bool {
		return r.Message == "migration could not take its lock; trying again"
	})
	var source, cause string
	gaveUp.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "source":
			source = a.Value.String()
		case "err":
			cause = a.Value.String()
		}
		return true
	})
	if !strings.HasSuffix(source, "00024_email_normalized.sql") || !strings.Contains(cause, "SQLSTATE 55P03") {
		t.Errorf("gave up on %q with %q, want 00024 and lock_not_available (55P03)", source, cause)
	}

	if err := holder.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("migrate once the lock was free: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("migrate did not end within 2 minutes of the lock being free")
	}
	if pending, err := provider.HasPending(ctx); err != nil || pending {
		t.Fatalf("after migrate: pending %v (%v), want every migration applied", pending, err)
	}
}

// A concurrent index build that failed leaves an invalid index behind, under the name the
// migration builds; run again, the migration drops it and builds the index it wants.
func TestConcurrentIndexMigrationReplacesAnInvalidIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, provider := unmigrated(t)
	if _, err := provider.UpTo(ctx, 24); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO users (email, display_name, role, password_hash) VALUES
		('a@example.com', 'Sam', 'agent', 'x'), ('b@example.com', 'Sam', 'agent', 'x')`); err != nil {
		t.Fatal(err)
	}
	// Unique on a column with duplicates: the build fails after creating the index, which stays, invalid.
	if _, err := pool.Exec(ctx, `CREATE UNIQUE INDEX CONCURRENTLY users_email_normalized_key ON users (display_name)`); err == nil {
		t.Fatal("the unique build over duplicates succeeded")
	}
	if err := Migrate(ctx, pool, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	var valid bool
	var def string
	if err := pool.QueryRow(ctx, `SELECT x.indisvalid, pg_get_indexdef(x.indexrelid) FROM pg_index x
		WHERE x.indexrelid = 'users_email_normalized_key'::regclass`).Scan(&valid, &def); err != nil {
		t.Fatal(err)
	}
	if !valid || !strings.HasSuffix(def, "USING btree (email)") {
		t.Errorf("users_email_normalized_key: valid %v, %s; want a valid index on email", valid, def)
	}
}

// waitFor polls cond until it holds, failing the test with what it last saw after a bound only a
// broken program reaches.
func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 30s for %s; last saw %s", what, saw)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
