package main

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/internal/postgres/cluster"
)

// clusterStopGrace is how long a fast shutdown may take before the postmaster is killed.
const clusterStopGrace = 20 * time.Second

// postmaster runs the tool's own cluster (in the run's directory, on a free loopback port) as a
// child process, so that the run may kill -9 it without touching any other PostgreSQL on the
// machine.
type postmaster struct {
	*cluster.Cluster
	proc   *proc
	starts int // postmasters started; a restart after a kill -9 may take several
}

// newPostmaster creates the cluster in dir.
func newPostmaster(ctx context.Context, dir string) (*postmaster, error) {
	c, err := cluster.New(ctx, dir, map[string]string{"max_connections": "200"})
	if err != nil {
		return nil, err
	}
	return &postmaster{Cluster: c}, nil
}

// start starts the postmaster and waits until it accepts connections. After a kill -9 the old
// postmaster's backends may linger a moment and hold its shared memory, and the new postmaster
// refuses to start beside them: it is started again until it stays up.
func (pm *postmaster) start(ctx context.Context) error {
	deadline := time.Now().Add(cluster.Timeout)
	for {
		p, err := startProc("postgres", pm.Program("postgres"), []string{"-D", pm.Data()}, pm.Env(), pm.Log(), pm.Owner)
		if err != nil {
			return err
		}
		pm.proc, pm.starts = p, pm.starts+1
		err = pm.waitReady(ctx, deadline)
		if err == nil || p.running() || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		if err := loadtest.Sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// waitReady waits until the postmaster accepts a connection, exits, or the deadline passes.
func (pm *postmaster) waitReady(ctx context.Context, deadline time.Time) error {
	for {
		attempt, cancel := context.WithTimeout(ctx, time.Second)
		conn, err := pgx.Connect(attempt, pm.URL("postgres"))
		cancel()
		if err == nil {
			return conn.Close(ctx)
		}
		if !pm.proc.running() {
			return fmt.Errorf("postgres exited (%v); the end of %s:\n%s", pm.proc.err, pm.Log(), tail(pm.Log(), 5))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres did not accept connections within %s: %w", cluster.Timeout, err)
		}
		if err := loadtest.Sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
}

// kill9 kills the postmaster with SIGKILL. Its backends notice and exit on their own.
func (pm *postmaster) kill9() error { return pm.proc.kill9() }

// stop shuts the cluster down fast (SIGINT: running transactions are rolled back).
func (pm *postmaster) stop() error {
	if pm.proc == nil {
		return nil
	}
	return pm.proc.stop(syscall.SIGINT, clusterStopGrace)
}

// createDatabase creates an empty database on the cluster and returns its URL.
func (pm *postmaster) createDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, pm.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }() // a close error cannot undo the statement
	if _, err := conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return pm.URL(name), nil
}

// describe is the server's version and the settings the figures depend on: a commit is durable
// across a kill only with fsync and synchronous_commit on.
func (pm *postmaster) describe(ctx context.Context) (string, error) {
	d, _, err := loadtest.DescribeServer(ctx, pm.URL("postgres"), "fsync", "synchronous_commit", "max_connections")
	return d, err
}
