package pgtest

import (
	"context"
	"crypto/rand"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/peterldowns/pgtestdb"
	"github.com/peterldowns/pgtestdb/migrators/goosemigrator"

	"github.com/handoffdesk/desk/migrations"
)

// clusterTimeout bounds each pg_ctl and initdb run, and the wait for a cluster to answer.
const clusterTimeout = 60 * time.Second

// Cluster is a PostgreSQL cluster of one test's own, in a temporary directory on a free loopback
// port, for tests that stop, crash or restart the server: the shared one must not be. It is
// stopped and removed when the test ends. As scripts/localdb does, it runs as the postgres user
// when the tests run as root, since PostgreSQL refuses root.
type Cluster struct {
	t    testing.TB
	dir  string
	port int
	bin  string
	uid  int // the owner's, when the tests run as root; else -1
	// role is what the databases on the cluster are used as: like the shared server's, no
	// superuser, but a name of the cluster's own, since pgtestdb remembers for the whole test
	// binary which roles and templates it made, whatever the server.
	role pgtestdb.Role
}

// NewCluster creates and starts a cluster. It needs PostgreSQL's server programs (initdb,
// pg_ctl) installed.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin, err := serverBin()
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, bin: bin, uid: -1, role: pgtestdb.DefaultRole()}
	c.role.Username = "desk_" + strings.ToLower(rand.Text())
	if c.dir, err = os.MkdirTemp("", "desk-cluster-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(c.dir) })
	if os.Geteuid() == 0 {
		owner, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("a cluster cannot run as root and there is no postgres user: %v", err)
		}
		c.uid, _ = strconv.Atoi(owner.Uid)
		gid, _ := strconv.Atoi(owner.Gid)
		if err := os.Chown(c.dir, c.uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if c.port, err = freePort(); err != nil {
		t.Fatal(err)
	}
	c.run("initdb", "--pgdata", c.data(), "--username", "postgres", "--auth", "trust", "--encoding", "UTF8", "--no-sync", "--no-instructions")
	// Whatever state the test left it in: pg_ctl only complains when it is stopped already.
	t.Cleanup(func() { _, _ = c.output("pg_ctl", "--pgdata", c.data(), "--mode", "immediate", "--wait", "stop") })
	c.Start()
	return c
}

// serverBin finds the directory of PostgreSQL's server programs: Debian keeps them out of PATH,
// under /usr/lib/postgresql/<version>/bin.
func serverBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return vb - va
	})
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("PostgreSQL's server programs (initdb, pg_ctl) are not installed: apt-get install postgresql")
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// run runs one of PostgreSQL's programs and fails the test if it fails.
func (c *Cluster) run(program string, args ...string) {
	c.t.Helper()
	if out, err := c.output(program, args...); err != nil {
		c.t.Fatalf("%s: %v\n%s", program, err, out)
	}
}

// output runs one of PostgreSQL's programs as the cluster's owner, killed past clusterTimeout.
func (c *Cluster) output(program string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	name := filepath.Join(c.bin, program)
	if c.uid >= 0 {
		args = append([]string{"-u", "postgres", "--", name}, args...)
		name = "runuser"
	}
	return exec.CommandContext(ctx, name, args...).CombinedOutput() //nolint:gosec // G204: PostgreSQL's own initdb and pg_ctl, found in its install directory, with arguments this file builds.
}

// Start starts the cluster (again) on its port and waits until it answers.
func (c *Cluster) Start() {
	c.t.Helper()
	c.run("pg_ctl", "--pgdata", c.data(), "--log", filepath.Join(c.dir, "log"), "--wait", "--timeout", strconv.Itoa(int(clusterTimeout.Seconds())),
		"-o", fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c max_connections=40", c.port, c.dir), "start")
}

// Stop stops the cluster: "fast" as an operator would, "immediate" as a crash would, leaving
// recovery to the next start.
func (c *Cluster) Stop(mode string) {
	c.t.Helper()
	c.run("pg_ctl", "--pgdata", c.data(), "--mode", mode, "--wait", "stop")
}

// AdminURL is the cluster's superuser connection to its postgres database.
func (c *Cluster) AdminURL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", c.port)
}

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
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
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
