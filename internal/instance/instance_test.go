package instance_test

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/instance"
	"github.com/handoffdesk/desk/internal/logtest"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/server"
)

// deadDatabase is a PostgreSQL URL nothing answers at.
const deadDatabase = "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"

// A sweep that fails leaves reservations and TTLs unenforced: an operator must see it among the
// warnings, not among the routine lines.
func TestFailedSweepIsAWarning(t *testing.T) {
	t.Parallel()
	db, err := pgxpool.New(context.Background(), deadDatabase)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log, logger := logtest.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := instance.Options{Server: server.Config{Addr: ln.Addr().String(), BaseURL: "http://" + ln.Addr().String()}, DatabaseURL: deadDatabase}
	go func() { done <- instance.Run(ctx, opts, logger, db, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	if rec := log.Wait(t, "about the failed sweep", logtest.Message("sweep failed")); rec.Level < slog.LevelWarn {
		t.Errorf("a failed sweep is logged at %v, want WARN or above", rec.Level)
	}
}

// Every instance keeps the dashboard's rollup: its first run builds it, and the rollup's mark is
// stored for the next runs to start from.
func TestInstanceBuildsTheDashboardRollup(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	log, logger := logtest.New()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	opts := instance.Options{Server: server.Config{Addr: ln.Addr().String(), BaseURL: "http://" + ln.Addr().String()},
		DatabaseURL: db.Config().ConnString()}
	go func() { done <- instance.Run(ctx, opts, logger, db, ln) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	log.Wait(t, "the rollup built", logtest.Message("dashboard rollup built"))
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM dashboard_rollup`).Scan(&n); err != nil || n != 1 {
		t.Errorf("dashboard_rollup rows: %d, %v; want 1", n, err)
	}
}
