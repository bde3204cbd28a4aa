package live

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/logtest"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// A user whose last socket closes while the database refuses the write is not forgotten: once the
// write goes through, their row is deleted and the desk is told they went (which withdraws their
// ring), without another socket having to change anything.
func TestPresenceRetriesAFailedWriteAndForgetsNobody(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := t.Context()
	var userID int64
	if err := db.QueryRow(ctx, `INSERT INTO users (email, display_name, role, password_hash)
		VALUES ('alex@example.com', 'alex', 'agent', 'x') RETURNING id`).Scan(&userID); err != nil {
		t.Fatal(err)
	}
	// The presence's own pool gives up on a lock after a moment, as a write during an outage
	// fails.
	cfg, err := pgxpool.ParseConfig(db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["lock_timeout"] = "100ms"
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	logs, logger := logtest.New()
	p := NewPresence(pool, logger, func() {})
	gone := make(chan []int64, 10)
	p.WhenGone(func(_ context.Context, ids []int64) { gone <- ids })
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		p.Run(runCtx)
		close(done)
	}()
	t.Cleanup(func() {
		stop()
		<-done
	})
	rows := func() int {
		t.Helper()
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM presence WHERE user_id = $1`, userID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	p.Connect(userID)
	waitUntil(t, "alex's presence", func() bool { return rows() == 1 })

	// The table is locked: the write of alex's going fails, and is tried again.
	tx, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE presence IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	p.Disconnect(userID)
	logs.Wait(t, "a failed presence write", logtest.Message("writing presence"))
	select {
	case ids := <-gone:
		t.Fatalf("told %v went before the write went through", ids)
	default:
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case ids := <-gone:
		if len(ids) != 1 || ids[0] != userID {
			t.Fatalf("told %v went, want alex (%d)", ids, userID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("alex's going was never written: the failed write was forgotten")
	}
	if n := rows(); n != 0 {
		t.Errorf("alex has %d presence rows after going", n)
	}
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
