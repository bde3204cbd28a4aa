package events

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// beforeProbe is readStatement as it was, its waiting check an EXISTS: kept here as the baseline
// the benchmark measures the read against, in the same run on the same database.
func beforeProbe(bound string) string {
	return strings.Replace(readStatement(bound),
		`(SELECT w.xid FROM events w WHERE w.xid >= greatest(upto, $1::text::xid8)
				ORDER BY w.xid LIMIT 1) IS NOT NULL`,
		`EXISTS (SELECT FROM events w WHERE w.xid >= greatest(upto, $1::text::xid8))`, 1)
}

// BenchmarkEventLog shows what the hub's idle read costs as the desk's history grows (make
// bench-events): the log is grown to 10,000, 100,000 and 1,000,000 events (BENCH_EVENTS sets
// the largest), and at each size the read is explained (ANALYZE, BUFFERS) in its custom and
// generic plans, beside the statement it replaced, and run back to back for two seconds while
// the CPU its PostgreSQL backend spends is read from /proc. An idle instance makes this read once
// a PollInterval (a second): the CPU per read is also the share of a core it keeps busy.
func BenchmarkEventLog(b *testing.B) {
	ctx := context.Background()
	largest := 1_000_000
	if v := os.Getenv("BENCH_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("BENCH_EVENTS=%q: want a positive number of events", v)
		}
		largest = n
	}
	if beforeProbe(oldestRunning) == readStatement(oldestRunning) {
		b.Fatal("beforeProbe no longer finds the probe in readStatement: update it")
	}
	db := pgtest.New(b)
	b.Logf("load average %s at the start; autovacuum is off on this machine's PostgreSQL: the log is VACUUM ANALYZEd after each growth, as autovacuum would", loadtest.LoadAverage())
	b.Logf("%10s  %-8s  %-7s  %8s  %9s  %12s  %s", "events", "read", "plan", "buffers", "exec ms", "PG CPU/read", "idle instance, % of a core")
	for _, size := range []int{10_000, 100_000, 1_000_000} {
		size = min(size, largest)
		start := time.Now()
		growLog(b, db, size)
		b.Logf("grew the log to %d events in %s (load average %s)", size, time.Since(start).Round(time.Millisecond), loadtest.LoadAverage())
		for _, st := range []struct{ name, sql string }{{"before", beforeProbe(oldestRunning)}, {"now", readStatement(oldestRunning)}} {
			for _, generic := range []bool{false, true} {
				args, err := idleArgs(ctx, db)
				if err != nil {
					b.Fatal(err)
				}
				p, err := explain(ctx, db, st.sql, readTypes, args, generic)
				if err != nil {
					b.Fatal(err)
				}
				kind := map[bool]string{false: "custom", true: "generic"}[generic]
				cpu := ""
				if generic { // pgx prepares the statement: after five executions it runs generic
					perRead, err := backendCPU(ctx, db, st.sql, 2*time.Second)
					if err != nil {
						b.Fatal(err)
					}
					cpu = fmt.Sprintf("%9.3f ms  %8.3f %%", float64(perRead.Microseconds())/1000, 100*perRead.Seconds()/time.Second.Seconds())
				}
				scan := ""
				if len(p.scans) > 0 {
					scan = " (Seq Scan " + strings.Join(p.scans, ", ") + ")"
				}
				b.Logf("%10d  %-8s  %-7s  %8d  %9.3f  %s%s", size, st.name, kind, p.buffers, p.millis, cpu, scan)
			}
		}
		if size == largest {
			break
		}
	}
	b.Logf("load average %s at the end", loadtest.LoadAverage())
}

// backendCPU runs the idle read with statement sql on one connection, back to back for d, and
// returns the CPU its PostgreSQL backend spent per read, read from /proc (the server must run on
// this machine, as `make bench-events` assumes).
func backendCPU(ctx context.Context, db *pgxpool.Pool, sql string, d time.Duration) (time.Duration, error) {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return 0, err
	}
	now, err := Now(ctx, conn)
	if err != nil {
		return 0, err
	}
	inc, xid, _ := now.split()
	from := strconv.FormatUint(xid, 10)
	before, err := processCPU(pid)
	if err != nil {
		return 0, err
	}
	reads := 0
	for end := time.Now().Add(d); time.Now().Before(end); reads++ {
		rows, err := conn.Query(ctx, sql, from, readLimit, inc)
		if err != nil {
			return 0, err
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return 0, err
		}
	}
	after, err := processCPU(pid)
	if err != nil {
		return 0, err
	}
	return (after - before) / time.Duration(reads), nil
}

// processCPU is the user and system CPU time process pid has used, from /proc/pid/stat (in clock
// ticks of 10 ms, as Linux reports them to every process).
func processCPU(pid int) (time.Duration, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("the PostgreSQL backend's CPU: %w (is the server on this machine?)", err)
	}
	// The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * 10 * time.Millisecond, nil
}
