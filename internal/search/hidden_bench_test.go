package search

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// BenchmarkHiddenMatches times an agent's search for a word that only packages whose contact they
// see masked hold ("Philomena", in the problem statement), against a word nothing holds, at 0, 1
// and 60 such packages, in a desk of BENCH_PACKAGES (default 20,000): what the time of a search
// still says about hidden rows, as medians and the ratio to the control word, with the load.
//
//	go test ./internal/search -run '^$' -bench HiddenMatches -benchtime 1x -v
func BenchmarkHiddenMatches(b *testing.B) {
	ctx := context.Background()
	db := pgtest.New(b)
	n := 20_000
	if v := os.Getenv("BENCH_PACKAGES"); v != "" {
		if _, err := fmt.Sscan(v, &n); err != nil {
			b.Fatal(err)
		}
	}
	var queues []int64
	for i := range 2 {
		var id int64
		if err := db.QueryRow(ctx, `INSERT INTO queues (name, pii_min_role) VALUES ($1, 'supervisor') RETURNING id`, fmt.Sprintf("q%d", i)).Scan(&id); err != nil {
			b.Fatal(err)
		}
		queues = append(queues, id)
	}
	var keyID int64
	if err := db.QueryRow(ctx, `INSERT INTO api_keys (name, key_prefix, key_hash, webhook_secret) VALUES ('bench', 'bench', '\x00', 's')
		RETURNING id`).Scan(&keyID); err != nil {
		b.Fatal(err)
	}
	agent, err := auth.CreateUser(ctx, db, auth.NewUser{Email: "agent@example.com", DisplayName: "Agent", Role: auth.RoleAgent, Password: "long-enough"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO queue_members (queue_id, user_id) VALUES ($1, $2)`, queues[0], agent.ID); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, seedSQL, queues, 0, n, keyID); err != nil {
		b.Fatal(err)
	}
	next := n
	// hide adds k packages in the agent's queue whose problem statement names their contact,
	// Philomena Quist, whom the agent sees as "P. Q.".
	hide := func(k int) {
		if _, err := db.Exec(ctx, `
			INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package, body_sha256, expires_at)
			SELECT 'ho_hidden_' || g, $3, $4, 'queued', 1, 'cust_hidden_' || g, 'bot-1',
				json_build_object('schema_version', '1.0', 'handoff_id', 'ho_hidden_' || g, 'trigger', 'user_request', 'source_agent', 'bot-1',
					'contact', json_build_object('id', 'cust_hidden_' || g, 'display_name', 'Philomena Quist'),
					'problem_statement', 'Philomena Quist asks about the refund on her order.'),
				'\x00', now() + interval '1 day'
			FROM generate_series($1::int + 1, $1::int + $2::int) g`, next, k, keyID, queues[0]); err != nil {
			b.Fatal(err)
		}
		next += k
	}
	if _, err := db.Exec(ctx, `VACUUM ANALYZE handoffs, package_search`); err != nil {
		b.Fatal(err)
	}
	s := New(db)
	const runs = 41
	median := func(q string) (time.Duration, int, bool) {
		var ds []time.Duration
		var found int
		var more bool
		for range runs {
			start := time.Now()
			rs, cursor, err := s.Page(ctx, agent, Filter{Q: q}, 0, PageSize)
			if err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
			found, more = len(rs), cursor != 0
		}
		slices.Sort(ds)
		return ds[len(ds)/2], found, more
	}
	fmt.Printf("hidden\tword\tfound\tnext\tp50 ms\tcontrol p50 ms\tratio\n")
	for _, step := range []int{0, 1, 59} {
		hide(step)
		hidden, found, more := median("Philomena")
		control, _, _ := median("Zebulon")
		fmt.Printf("%d\tPhilomena\t%d\t%v\t%.2f\t%.2f\t×%.2f\n", next-n, found, more, ms(hidden), ms(control), float64(hidden)/float64(control))
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("packages %d, %d runs each, load average %s\n", n, runs, strings.TrimSpace(string(load)))
}
