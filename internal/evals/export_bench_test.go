package evals

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"runtime/metrics"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff/handofftest"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
)

// benchRecords is how many records the export benchmark stores; it exports the first 10,000 and
// then all of them, to see whether memory grows with the export.
const benchRecords = 100_000

// BenchmarkExport exports 10,000 and 100,000 records in the desk's format and as OpenAI SFT lines
// (which decode each record's whole package and build its prompt), each in turns with a bare scan
// of the same query's rows into the same row (the baseline: what reading from PostgreSQL costs
// before anything is encoded), and reports the medians as records/s, their ratio, and the peak of
// the heap's live objects above where it stood before the export.
//
//	go test ./internal/evals -run '^$' -bench Export -benchtime 3x
func BenchmarkExport(b *testing.B) {
	db := seedRecords(b, benchRecords)
	ctx := context.Background()
	for _, format := range []Format{FormatRecords, FormatOpenAISFT} {
		for _, n := range []int{10_000, benchRecords} {
			b.Run(fmt.Sprintf("%s/%d", format, n), func(b *testing.B) {
				f := Filter{Format: format, Until: benchStart.Add(time.Duration(n) * time.Millisecond)}
				var export, scan []float64
				var peak uint64
				for b.Loop() {
					start := time.Now()
					if got := bareScan(b, db, f); got != n {
						b.Fatalf("scanned %d rows, want %d", got, n)
					}
					scan = append(scan, float64(n)/time.Since(start).Seconds())
					stop := watchHeap()
					start = time.Now()
					lines, err := Export(ctx, db, auth.RoleSupervisor, f, io.Discard, nil)
					took := time.Since(start)
					peak = max(peak, stop())
					if err != nil || lines != n {
						b.Fatalf("exported %d lines (%v), want %d", lines, err, n)
					}
					export = append(export, float64(n)/took.Seconds())
				}
				b.ReportMetric(median(export), "records/s")
				b.ReportMetric(median(scan), "scanned-rows/s")
				b.ReportMetric(median(export)/median(scan), "ratio")
				b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			})
		}
	}
}

func median(xs []float64) float64 {
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// bareScan reads the rows an export of f reads, and nothing more.
func bareScan(b *testing.B, db *pgxpool.Pool, f Filter) int {
	sql, args := exportQuery(f)
	rows, err := db.Query(context.Background(), sql, args...)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	var r row
	n := 0
	for rows.Next() {
		if err := rows.Scan(r.dest()...); err != nil {
			b.Fatal(err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return n
}

// watchHeap samples the bytes of live and not yet swept heap objects every millisecond until
// the function it returns is called, which returns the highest sample above the first.
func watchHeap() func() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	base := read()
	done := make(chan struct{})
	var wg sync.WaitGroup
	var peak uint64
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				peak = max(peak, read())
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		if peak < base {
			return 0
		}
		return peak - base
	}
}

var benchStart = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// seedRecords stores n reply records, a millisecond apart from benchStart, spread over 1,000
// Harbor packages (edited drafts, as most records are), in a queue where a supervisor sees the
// contact masked, so that the export masks every record.
func seedRecords(b *testing.B, n int) *pgxpool.Pool {
	b.Helper()
	ctx := context.Background()
	db, err := pgxpool.New(ctx, pgtest.URL(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(db.Close)
	q, err := queue.NewService(db).Create(ctx, queue.New{Name: "billing_t2"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE queues SET pii_min_role = 'admin', pii_entity_keys = '{account_id}' WHERE id = $1`, q.ID); err != nil {
		b.Fatal(err)
	}
	as := auth.NewService(db)
	u, err := as.CreateUser(ctx, auth.NewUser{Email: "ann@example.com", DisplayName: "Ann", Role: auth.RoleAgent, Password: "long-enough-password"})
	if err != nil {
		b.Fatal(err)
	}
	key, err := as.CreateAPIKey(ctx, auth.NewAPIKey{Name: "tier1", QueueIDs: []int64{q.ID}})
	if err != nil {
		b.Fatal(err)
	}
	p := handofftest.Harbor(b)
	pkg, err := json.Marshal(p)
	if err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(pkg)
	if _, err := db.Exec(ctx, `
		INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package,
			body_sha256, expires_at, closed_at)
		SELECT 'ho_bench_' || i, $1, $2, 'resolved', 1, 'cust_' || i, 'tier1-support', $3, $4, now(), now()
		FROM generate_series(1, 1000) AS i`, key.ID, q.ID, string(pkg), sum[:]); err != nil {
		b.Fatal(err)
	}
	final := "Hi Dana, I reversed the duplicate charge ch_44c today. The refund reaches your card in 3-5 business days."
	e := Compare(p.DraftReply, final)
	words, err := json.Marshal(e.Words)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `
		INSERT INTO evals (kind, handoff_id, queue_id, editor_id, at, source_agent, source_run_id, trigger, locale,
			draft, final, word_diff, unified_diff, edit_distance_chars, edit_distance_words, accepted_as_is, tags, editing_ms)
		SELECT 'reply', h.id, $2, $3, $4::timestamptz + (i - 1) * interval '1 millisecond', 'tier1-support', 'run_t1_22a7',
			'policy_boundary', 'en-US', $5, $6, $7, $8, $9, $10, false, '{tone}', 30000
		FROM generate_series(1, $1::int) AS i JOIN handoffs h ON h.handoff_id = 'ho_bench_' || (i % 1000 + 1)`,
		n, q.ID, u.ID, benchStart, p.DraftReply, final, string(words), e.Unified, e.CharDistance, e.WordDistance); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	return db
}
