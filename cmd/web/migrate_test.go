package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/pressly/goose/v3"

	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/migrations"
)

// previousRelease is the last migration of the release before this one: the schema production
// runs while this release is deployed.
const previousRelease = 23

// An instance of a new release started on the previous release's schema refuses, in one line
// that says what to do, and leaves the schema alone: only `web migrate`, the deploy step, changes
// it. Every other command refuses the same way.
func TestCommandsRefuseAnOlderSchemaUntilMigrate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := pgtest.Unmigrated(t)
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, db, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.UpTo(ctx, previousRelease); err != nil {
		t.Fatal(err)
	}
	sources := provider.ListSources()
	latest := sources[len(sources)-1].Version
	want := fmt.Sprintf("the database schema is at migration %d and this binary needs %d: run `web migrate` first (docs/operations.md)", previousRelease, latest)

	getenv := env(t, "DATABASE_URL", url)
	for _, args := range [][]string{{"serve"}, {"queue", "add", "--name", "billing_t2"}, {"seed-demo"}} {
		// Bounded, so that a serve that starts instead of refusing ends the test rather than hangs it.
		runCtx, cancel := context.WithTimeout(ctx, time.Minute)
		err := run(runCtx, append([]string{"web"}, args...), getenv, io.Discard)
		cancel()
		if err == nil || err.Error() != want {
			t.Errorf("web %s on the previous release's schema: %v\nwant %s", strings.Join(args, " "), err, want)
		}
	}
	if current, err := provider.GetDBVersion(ctx); err != nil || current != previousRelease {
		t.Fatalf("schema after the refusals: %d (%v), want %d untouched", current, err, previousRelease)
	}

	if out, err := runCommand(t, getenv, "migrate"); err != nil {
		t.Fatalf("web migrate: %v\n%s", err, out)
	}
	if current, err := provider.GetDBVersion(ctx); err != nil || current != latest {
		t.Fatalf("schema after web migrate: %d (%v), want %d", current, err, latest)
	}
	if out, err := runCommand(t, getenv, "queue", "add", "--name", "billing_t2"); err != nil {
		t.Fatalf("web queue add after web migrate: %v\n%s", err, out)
	}
}
