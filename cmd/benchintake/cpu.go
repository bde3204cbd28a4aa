package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// On a machine shared with other work, rates move with the neighbours' load; the CPU time each
// operation costs moves less, and it tells which side the time goes to. A meter reads it for this
// process (server, bots and baseline workers alike) and for the processes connected to the bench
// database (its backends, and autovacuum workers while they run). The latter needs PostgreSQL on
// this machine with its /proc readable; without it the PostgreSQL side reads as unknown.
// PostgreSQL's shared background processes (WAL writer, checkpointer, background writer) are not
// counted.
type meter struct {
	conn *pgx.Conn // to the bench database, to list its backends
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times: 100 on every Linux Go runs on.
const clockTicks = 100

// cpuReading is one snapshot of the CPU time used so far.
type cpuReading struct {
	self     time.Duration
	backends map[int]time.Duration // by pid; nil when unknown
}

// cpuUse is the CPU time a window of operations cost.
type cpuUse struct {
	self, postgres time.Duration
	postgresKnown  bool
}

func (m *meter) read(ctx context.Context) cpuReading {
	r := cpuReading{self: loadtest.OwnCPU()}
	rows, err := m.conn.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`)
	if err != nil {
		return r
	}
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int])
	if err != nil {
		return r
	}
	r.backends = make(map[int]time.Duration, len(pids))
	for _, pid := range pids {
		used, err := processCPU(pid)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			// The backend ended after the listing: like one that ends inside the window, lost.
		case err != nil:
			return cpuReading{self: r.self}
		default:
			r.backends[pid] = used
		}
	}
	return r
}

// since is the CPU time used between an earlier reading and this one. A backend that started in
// between counts from its start; one that ended in between is lost, which the bench avoids by
// keeping its connections open through each window.
func (r cpuReading) since(earlier cpuReading) cpuUse {
	u := cpuUse{self: r.self - earlier.self, postgresKnown: r.backends != nil && earlier.backends != nil}
	for pid, used := range r.backends {
		u.postgres += used - earlier.backends[pid]
	}
	return u
}

// processCPU reads the user and system time of a process from /proc/PID/stat.
func processCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: the fields that follow it are counted
	// from its closing parenthesis. utime and stime are fields 14 and 15 of the whole line.
	_, rest, ok := strings.Cut(string(raw), ") ")
	fields := strings.Fields(rest)
	if !ok || len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
