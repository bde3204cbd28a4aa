package postgres

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Reads opens a second pool on db's database for the reads whose cost a person's words decide
// (a search, the audit): each statement there is cut by the server after statementTimeout, and
// the pool holds half as many connections as db (at least four: two people's searches, at the
// per-person cap, leave room for a third's). A costly read then waits for one of these
// connections, or is cut, rather than hold one that an agent's queue page, an accept or a bot's
// intake needs. Like Open's pool it connects on first use and takes db's acquire deadline and
// tracing.
func Reads(ctx context.Context, db *pgxpool.Pool, statementTimeout time.Duration) (*pgxpool.Pool, error) {
	cfg := db.Config()
	cfg.MaxConns = max(4, cfg.MaxConns/2)
	cfg.MinConns, cfg.MinIdleConns = 0, 0
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(statementTimeout.Milliseconds(), 10)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// StatementTimedOut reports whether the server cut a statement at its statement_timeout (the
// reads pool's). pgx ends a statement whose context ends by closing the connection's deadline,
// not by a cancel request, so this SQLSTATE comes from the server's own timeout.
func StatementTimedOut(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "57014"
}
