// Package pgtest gives each test its own PostgreSQL database, cloned in milliseconds from a
// template migrated once with the desk's migrations. A failing test keeps its database and logs
// how to connect to it.
package pgtest

import (
	"context"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver pgtestdb connects with
	"github.com/peterldowns/pgtestdb"
	"github.com/peterldowns/pgtestdb/migrators/goosemigrator"

	"github.com/handoffdesk/desk/migrations"
)

// DefaultAdminURL is where tests find PostgreSQL when TEST_DATABASE_URL is unset.
const DefaultAdminURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// AdminURL is the server tests create their databases on.
func AdminURL() string {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u
	}
	return DefaultAdminURL
}

func config(t testing.TB) pgtestdb.Config {
	return configFor(t, AdminURL())
}

// configFor is how pgtestdb reaches the server that adminURL names.
func configFor(t testing.TB, adminURL string) pgtestdb.Config {
	u, err := url.Parse(adminURL)
	if err != nil {
		t.Fatalf("admin URL %s: %v", adminURL, err)
	}
	password, _ := u.User.Password()
	return pgtestdb.Config{
		DriverName:                "pgx",
		Host:                      u.Hostname(),
		Port:                      u.Port(),
		User:                      u.User.Username(),
		Password:                  password,
		Database:                  u.Path[1:],
		Options:                   u.RawQuery,
		ForceTerminateConnections: true,
	}
}

// URL returns the connection URL of a fresh, migrated database that lives as long as the test.
func URL(t testing.TB) string {
	t.Helper()
	migrator := goosemigrator.New(".", goosemigrator.WithFS(migrations.FS))
	return pgtestdb.Custom(t, config(t), migrator).URL()
}

// Unmigrated returns the connection URL of a fresh database without the desk's schema, for tests
// of the migrations themselves.
func Unmigrated(t testing.TB) string {
	t.Helper()
	return pgtestdb.Custom(t, config(t), pgtestdb.NoopMigrator{}).URL()
}

// New returns a pool on a fresh, migrated database, closed when the test ends.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return Open(t, URL(t))
}

// Open returns a pool on the database at url, closed when the test ends.
func Open(t testing.TB, url string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatalf("connect to test database: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
