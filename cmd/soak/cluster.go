package main

import (
	"context"
	"errors"
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
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/loadtest"
)

const (
	// clusterStartLimit bounds a start of the cluster, crash recovery included.
	clusterStartLimit = time.Minute
	// clusterStopGrace is how long a fast shutdown may take before the postmaster is killed.
	clusterStopGrace = 20 * time.Second
)

// cluster is a PostgreSQL of the tool's own, in the run's directory on a free loopback port, so
// that the run may kill -9 its postmaster without touching any other PostgreSQL on the machine.
type cluster struct {
	dir      string // the run's directory: the socket lives here
	data     string
	logPath  string
	postgres string // the server binary
	port     int
	cred     *syscall.Credential // the owner's, when the tool runs as root
	proc     *proc
	starts   int // postmasters started; a restart after a kill -9 may take several
}

// newCluster creates the cluster's data directory with initdb, trusting loopback connections.
// PostgreSQL refuses to run as root, so a root run makes the files and runs the server as the
// postgres user, as scripts/localdb does.
func newCluster(dir string) (*cluster, error) {
	bin, err := pgBinDir()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, data: filepath.Join(dir, "pgdata"), logPath: filepath.Join(dir, "postgres.log"),
		postgres: filepath.Join(bin, "postgres"), port: port}
	if os.Geteuid() == 0 {
		owner, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root, the cluster needs a postgres user to run as: %w", err)
		}
		uid, uidErr := strconv.ParseUint(owner.Uid, 10, 32)
		gid, gidErr := strconv.ParseUint(owner.Gid, 10, 32)
		if err := errors.Join(uidErr, gidErr); err != nil {
			return nil, fmt.Errorf("user postgres: %w", err)
		}
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, int(uid), int(gid)); err != nil {
			return nil, err
		}
	}
	// --no-sync: a scratch cluster need not survive a power cut before its first checkpoint. The
	// server itself keeps fsync and synchronous_commit on, as a deployment does.
	_, err = runCommand("initdb", filepath.Join(bin, "initdb"),
		[]string{"--pgdata=" + c.data, "--username=postgres", "--auth=trust", "--encoding=UTF8", "--no-instructions", "--no-sync"},
		[]string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}, c.cred)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// pgBinDir finds PostgreSQL's programs: the newest /usr/lib/postgresql/*/bin (Debian keeps them off
// PATH), else where initdb is on PATH.
func pgBinDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin") // the pattern is well-formed
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(b) - versionOf(a) })
	for _, dir := range dirs {
		if _, err := os.Stat(filepath.Join(dir, "postgres")); err == nil {
			return dir, nil
		}
	}
	initdb, err := exec.LookPath("initdb")
	if err != nil {
		return "", errors.New("PostgreSQL's initdb is not installed (apt-get install postgresql)")
	}
	return filepath.Dir(initdb), nil
}

// versionOf reads the major version out of /usr/lib/postgresql/<version>/bin, 0 if there is none.
func versionOf(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir))) // not a number sorts last
	return v
}

// freePort is a port nothing listens on just now on the loopback interface. An instance that is
// started again after a kill needs its address back, so the tool picks ports rather than asking
// each child to.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	return port, ln.Close()
}

// url is the address of database db on the cluster.
func (c *cluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// start starts the postmaster and waits until it accepts connections. After a kill -9 the old
// postmaster's backends may linger a moment and hold its shared memory, and the new postmaster
// refuses to start beside them: it is started again until it stays up.
func (c *cluster) start(ctx context.Context) error {
	deadline := time.Now().Add(clusterStartLimit)
	for {
		p, err := startProc("postgres", c.postgres, []string{"-D", c.data, "-p", strconv.Itoa(c.port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=" + c.dir, "-c", "max_connections=200"},
			[]string{"PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8"}, c.logPath, c.cred)
		if err != nil {
			return err
		}
		c.proc, c.starts = p, c.starts+1
		err = c.waitReady(ctx, deadline)
		if err == nil || p.running() || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// waitReady waits until the postmaster accepts a connection, exits, or the deadline passes.
func (c *cluster) waitReady(ctx context.Context, deadline time.Time) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(attempt, c.url("postgres"))
		cancel()
		if err == nil {
			return conn.Close(ctx)
		}
		if !c.proc.running() {
			return fmt.Errorf("postgres exited (%v); the end of %s:\n%s", c.proc.err, c.logPath, tail(c.logPath, 5))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %s: %w", clusterStartLimit, err)
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// kill9 kills the postmaster with SIGKILL. Its backends notice and exit on their own.
func (c *cluster) kill9() error { return c.proc.kill9() }

// stop shuts the cluster down fast (SIGINT: running transactions are rolled back).
func (c *cluster) stop() error {
	if c.proc == nil {
		return nil
	}
	return c.proc.stop(syscall.SIGINT, clusterStopGrace)
}

// createDatabase creates an empty database on the cluster and returns its URL.
func (c *cluster) createDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, c.url("postgres"))
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }() // a close error cannot undo the statement
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return c.url(name), nil
}

// tail is the last n lines of a log, for an error message.
func tail(path string, n int) string {
	raw, err := os.ReadFile(path) //nolint:gosec // G304: a log in the run's own directory.
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(raw), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// sleep waits for d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// sleepUntil waits until t or until ctx is done.
func sleepUntil(ctx context.Context, t time.Time) error { return sleep(ctx, time.Until(t)) }

// describe is the server's version and the settings the figures depend on: a commit is durable
// across a kill only with fsync and synchronous_commit on.
func (c *cluster) describe(ctx context.Context) (string, error) {
	d, _, err := loadtest.DescribeServer(ctx, c.url("postgres"), "fsync", "synchronous_commit", "max_connections")
	return d, err
}
