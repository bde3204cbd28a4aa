package events

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// growLog adds events to the log until it holds total rows, spread over xids below the current
// one, as a desk's history is: every one of them final, none waiting. Seeded in SQL in one
// statement, so that a million rows take seconds; then VACUUM ANALYZE, which autovacuum would do
// on a real desk (it is off on this machine's PostgreSQL).
func growLog(tb testing.TB, db *pgxpool.Pool, total int) {
	tb.Helper()
	ctx := context.Background()
	if _, err := db.Exec(ctx, `
		INSERT INTO events (xid, kind, queue_id, handoff_id)
		SELECT ((i * (pg_current_xact_id()::text::bigint - 2)) / $1)::text::xid8, 'queued', 1 + i % 7, NULL
		FROM generate_series((SELECT count(*) FROM events) + 1, $1::bigint) i`, total); err != nil {
		tb.Fatal(err)
	}
	if _, err := db.Exec(ctx, `VACUUM ANALYZE events`); err != nil {
		tb.Fatal(err)
	}
}

// plan is what EXPLAIN (ANALYZE, BUFFERS) says of one execution of a statement.
type plan struct {
	scans   []string // the relations read by a Seq Scan
	buffers int64    // shared buffers hit or read, the whole statement
	millis  float64  // execution time
}

// explain runs EXPLAIN (ANALYZE, BUFFERS) of the prepared statement sql, with the parameter types
// and literal arguments given, in a custom or a generic plan: PostgreSQL switches a prepared
// statement, as pgx's statement cache prepares them, to the generic plan after five executions.
func explain(ctx context.Context, db *pgxpool.Pool, sql, types, args string, generic bool) (plan, error) {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return plan{}, err
	}
	defer conn.Release()
	mode := "force_custom_plan"
	if generic {
		mode = "force_generic_plan"
	}
	var raw []byte
	if _, err := conn.Exec(ctx, `SET plan_cache_mode = `+mode); err != nil {
		return plan{}, err
	}
	defer func() { _, _ = conn.Exec(context.WithoutCancel(ctx), `DEALLOCATE explained; RESET plan_cache_mode`) }()
	if _, err := conn.Exec(ctx, `PREPARE explained(`+types+`) AS `+sql); err != nil {
		return plan{}, err
	}
	if err := conn.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE explained(`+args+`)`).Scan(&raw); err != nil {
		return plan{}, err
	}
	var out []struct {
		Plan          node    `json:"Plan"`
		ExecutionTime float64 `json:"Execution Time"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		return plan{}, fmt.Errorf("explain: %d plans, %v", len(out), err)
	}
	p := plan{buffers: out[0].Plan.SharedHit + out[0].Plan.SharedRead, millis: out[0].ExecutionTime}
	out[0].Plan.walk(func(n node) {
		if n.Type == "Seq Scan" {
			p.scans = append(p.scans, n.Relation)
		}
	})
	return p, nil
}

// node is a plan node as EXPLAIN's JSON spells it; a node's buffers include its children's.
type node struct {
	Type       string `json:"Node Type"`
	Relation   string `json:"Relation Name"`
	SharedHit  int64  `json:"Shared Hit Blocks"`
	SharedRead int64  `json:"Shared Read Blocks"`
	Plans      []node `json:"Plans"`
}

func (n node) walk(f func(node)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// readLimit is the hub's (live.readLimit).
const readLimit = 10000

// readTypes are the parameter types of readStatement, for PREPARE.
const readTypes = "text, bigint, text"

// idleArgs are readStatement's arguments, as literals, for the hub's idle poll: a read from the
// current mark, as an instance with nothing new to read makes once a second.
func idleArgs(ctx context.Context, db *pgxpool.Pool) (string, error) {
	now, err := Now(ctx, db)
	if err != nil {
		return "", err
	}
	inc, xid, _ := now.split() // Now's marks are marks; inc is [0-9a-z]
	return fmt.Sprintf("'%d', %d, '%s'", xid, readLimit, inc), nil
}

// The hub reads the log once a second on every instance, idle or not: that read must look up the
// xid index, never scan the table, in the plan PostgreSQL picks for it first (custom) and the one
// it settles on after five executions (generic), with either bound.
func TestIdleReadDoesNotScanTheLog(t *testing.T) {
	ctx := context.Background()
	db := pgtest.New(t)
	growLog(t, db, 100_000)
	for _, bound := range []struct{ name, cte string }{{"oldest running", oldestRunning}, {"oldest here", oldestHere}} {
		for _, generic := range []bool{false, true} {
			kind := map[bool]string{false: "custom plan", true: "generic plan"}[generic]
			args, err := idleArgs(ctx, db)
			if err != nil {
				t.Fatal(err)
			}
			p, err := explain(ctx, db, readStatement(bound.cte), readTypes, args, generic)
			if err != nil {
				t.Fatal(err)
			}
			for _, rel := range p.scans {
				if rel == "events" {
					t.Errorf("%s, %s: the idle read scans the whole event log (%d buffers at 100,000 events)",
						bound.name, kind, p.buffers)
				}
			}
			// An index probe reads a handful of pages; a scan of 100,000 events reads ~1,000.
			if p.buffers > 100 {
				t.Errorf("%s, %s: the idle read touched %d buffers at 100,000 events; an index probe touches a few",
					bound.name, kind, p.buffers)
			}
		}
	}
}
