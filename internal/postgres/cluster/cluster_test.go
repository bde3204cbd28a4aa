package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/jackc/pgx/v5"
)

// A cluster serves only on its loopback port, with its socket in the caller's directory and the
// caller's settings, quoted values included, however the caller starts it.
func TestNewServesOnItsPortWithTheCallersSettings(t *testing.T) {
	t.Parallel()
	// Not t.TempDir: its parent is private to the test's user, and the cluster may run as another.
	dir, err := os.MkdirTemp("", "cluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c, err := New(t.Context(), dir, map[string]string{"max_connections": "23", "cluster_name": "it's mine"})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := c.Run(t.Context(), "pg_ctl", "--pgdata", c.Data(), "--log", c.Log(), "--wait", "start"); err != nil {
		t.Fatalf("pg_ctl start: %v\n%s", err, out)
	}
	t.Cleanup(func() {
		_, _ = c.Run(context.Background(), "pg_ctl", "--pgdata", c.Data(), "--mode", "immediate", "--wait", "stop")
	})

	conn, err := pgx.Connect(t.Context(), c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	want := map[string]string{"port": strconv.Itoa(c.Port), "listen_addresses": "127.0.0.1", "unix_socket_directories": dir,
		"max_connections": "23", "cluster_name": "it's mine"}
	for name, value := range want {
		var got string
		if err := conn.QueryRow(t.Context(), `SELECT current_setting($1)`, name).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != value {
			t.Errorf("%s = %q, want %q", name, got, value)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".s.PGSQL."+strconv.Itoa(c.Port))); err != nil {
		t.Errorf("no socket in the cluster's directory: %v", err)
	}
}
