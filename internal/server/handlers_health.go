package server

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/postgres"
)

const (
	// readyTimeout bounds /readyz: a database that does not answer within it is not ready.
	readyTimeout = 2 * time.Second
	// readyPoolWait is how long /readyz waits for a pooled connection before it asks the
	// database on a connection of its own.
	readyPoolWait = 500 * time.Millisecond
)

// handleFavicon sends browsers and tools that ask for /favicon.ico by habit (pages name their icon)
// to the desk's icon, rather than a 404 in every log.
func handleFavicon(c echo.Context) error {
	return c.Redirect(http.StatusMovedPermanently, "/static/img/favicon.svg")
}

// handleHealthz answers while the process is up; load balancers use /readyz to route traffic.
func (s *Server) handleHealthz(c echo.Context) error {
	return c.String(http.StatusOK, "ok\n")
}

// handleReadyz answers 200 only when the database answers and carries every migration this
// binary knows, so a new instance takes no traffic before its schema is in place, and 503 while
// the server drains before it stops. A pool whose every connection is busy is no outage: under
// load every instance would be pulled at once. Then the database is asked on a connection of
// its own. Nor is a lock on the migrations' table: once the database carried every migration this
// binary knows, it goes on carrying them (migrations only go forward while instances run), so
// readiness answers from that state and asks only whether the database answers, never waiting
// behind a migration's or a maintenance job's lock.
func (s *Server) handleReadyz(c echo.Context) error {
	if s.draining.Load() {
		return c.String(http.StatusServiceUnavailable, "draining\n")
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), readyTimeout)
	defer cancel()
	db, busy, err := s.answeringDB(ctx)
	if err != nil {
		return c.String(http.StatusServiceUnavailable, "database unreachable\n")
	}
	// Closing hands a pooled connection back, or closes the one of its own; neither can fail in
	// a way that would change the answer.
	defer func() { _ = db.Close() }()
	if !s.migrated.Load() {
		pending, err := postgres.Pending(ctx, db)
		if err != nil {
			return c.String(http.StatusServiceUnavailable, "cannot read migration state\n")
		}
		if pending {
			return c.String(http.StatusServiceUnavailable, "migrations pending\n")
		}
		s.migrated.Store(true)
	}
	if busy {
		return c.String(http.StatusOK, "ready (every pooled connection is busy)\n")
	}
	return c.String(http.StatusOK, "ready\n")
}

// answeringDB returns the database, once it answered a ping, through the pool or, when the pool
// has no connection to spare in time, on a connection of its own (busy).
func (s *Server) answeringDB(ctx context.Context) (db *sql.DB, busy bool, err error) {
	if stat := s.db.Stat(); stat.AcquiredConns() < stat.MaxConns() {
		pooled := stdlib.OpenDBFromPool(s.db)
		poolCtx, cancel := context.WithTimeout(ctx, readyPoolWait)
		err := pooled.PingContext(poolCtx)
		cancel()
		if err == nil {
			return pooled, false, nil
		}
		_ = pooled.Close() // it holds no connection after a failed ping
		if !errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
			return nil, false, err
		}
	}
	alone := stdlib.OpenDB(*s.db.Config().ConnConfig)
	alone.SetMaxOpenConns(1)
	if err := alone.PingContext(ctx); err != nil {
		_ = alone.Close() // the ping's error is the one that counts
		return nil, true, err
	}
	return alone, true, nil
}
