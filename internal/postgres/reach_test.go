package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// Errors a real database gives while it cannot be reached are told from those of a statement
// that failed: the first are retried and logged as warnings, the second are bugs.
func TestOutOfReach(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.URL(t)

	_, refused := pgx.Connect(ctx, "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=5")

	victim, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer victim.Close(ctx)
	killer, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close(ctx)
	if _, err := killer.Exec(ctx, `SELECT pg_terminate_backend($1)`, victim.PgConn().PID()); err != nil {
		t.Fatal(err)
	}
	_, terminated := victim.Exec(ctx, `SELECT 1`)

	_, divided := killer.Exec(ctx, `SELECT 1/0`)
	_, syntax := killer.Exec(ctx, `SELEKT 1`)

	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	pool.Close()
	_, closed := pool.Exec(ctx, `SELECT 1`)

	for _, c := range []struct {
		what string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"backend terminated", terminated, true},
		{"pool closed", closed, true},
		{"division by zero", divided, false},
		{"syntax error", syntax, false},
		{"canceled", context.Canceled, false},
		{"another error", errors.New("boom"), false},
	} {
		if c.err == nil {
			t.Fatalf("%s: no error", c.what)
		}
		if got := OutOfReach(c.err); got != c.want {
			t.Errorf("%s (%v): OutOfReach = %v, want %v", c.what, c.err, got, c.want)
		}
	}
}
