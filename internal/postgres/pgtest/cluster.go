package pgtest

import (
	"context"
	"crypto/rand"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/peterldowns/pgtestdb"
	"github.com/peterldowns/pgtestdb/migrators/goosemigrator"

	"github.com/handoffdesk/desk/internal/postgres/cluster"
	"github.com/handoffdesk/desk/migrations"
)

// Cluster is a PostgreSQL cluster of one test's own, in a temporary directory on a free loopback
// port, for tests that stop, crash or restart the server: the shared one must not be. It is
// stopped and removed when the test ends.
type Cluster struct {
	t testing.TB
	c *cluster.Cluster
	// role is what the databases on the cluster are used as: like the shared server's, no
	// superuser, but a name of the cluster's own, since pgtestdb remembers for the whole test
	// binary which roles and templates it made, whatever the server.
	role pgtestdb.Role
}

// NewCluster creates and starts a cluster. It needs PostgreSQL's server programs (initdb,
// pg_ctl) installed.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "desk-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	// No fsync: a test's cluster never outlives the machine, and its crashes are the server's.
	c, err := cluster.New(t.Context(), dir, map[string]string{"fsync": "off", "max_connections": "40"})
	if err != nil {
		t.Fatal(err)
	}
	tc := &Cluster{t: t, c: c, role: pgtestdb.DefaultRole()}
	tc.role.Username = "desk_" + strings.ToLower(rand.Text())
	// Whatever state the test left it in: pg_ctl only complains when it is stopped already. Not
	// the test's context, which has ended by then.
	t.Cleanup(func() {
		_, _ = c.Run(context.Background(), "pg_ctl", "--pgdata", c.Data(), "--mode", "immediate", "--wait", "stop")
	})
	tc.Start()
	return tc
}

// pgCtl runs pg_ctl and fails the test if it fails.
func (c *Cluster) pgCtl(args ...string) {
	c.t.Helper()
	if out, err := c.c.Run(context.Background(), "pg_ctl", append([]string{"--pgdata", c.c.Data()}, args...)...); err != nil {
		c.t.Fatalf("pg_ctl: %v\n%s", err, out)
	}
}

// Start starts the cluster (again) on its port and waits until it answers.
func (c *Cluster) Start() {
	c.t.Helper()
	c.pgCtl("--log", c.c.Log(), "--wait", "--timeout", strconv.Itoa(int(cluster.Timeout.Seconds())), "start")
}

// Stop stops the cluster: "fast" as an operator would, "immediate" as a crash would, leaving
// recovery to the next start.
func (c *Cluster) Stop(mode string) {
	c.t.Helper()
	c.pgCtl("--mode", mode, "--wait", "stop")
}

// AdminURL is the cluster's superuser connection to its postgres database.
func (c *Cluster) AdminURL() string { return c.c.URL("postgres") }

// URL returns the connection URL of a fresh, migrated database on the cluster, as URL does on the
// shared server.
func (c *Cluster) URL(t testing.TB) string {
	t.Helper()
	migrator := goosemigrator.New(".", goosemigrator.WithFS(migrations.FS))
	conf := configFor(t, c.AdminURL())
	conf.TestRole = &c.role
	return pgtestdb.Custom(t, conf, migrator).URL()
}

// CrashBackend kills the backend pid as a crash would (SIGKILL) and waits until the cluster has
// recovered: the postmaster restarts every other process, recovers, and accepts connections again
// without restarting itself.
func (c *Cluster) CrashBackend(ctx context.Context, pid int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(ctx, cluster.Timeout)
	defer cancel()
	// The checkpointer is one of the processes a crash restarts: a new one, on a connection that
	// works, says the recovery is over. Asked before the kill, which the postmaster notices later.
	before, err := c.checkpointer(ctx)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	for {
		now, err := c.checkpointer(ctx)
		if err == nil && now != before {
			return
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("the cluster did not recover from the crash of backend %d: %v", pid, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (c *Cluster) checkpointer(ctx context.Context) (int, error) {
	conn, err := pgx.Connect(ctx, c.AdminURL())
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close(ctx) }()
	var pid int
	err = conn.QueryRow(ctx, `SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'`).Scan(&pid)
	return pid, err
}
