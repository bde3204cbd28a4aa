package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// result is everything the report prints.
type result struct {
	database string // dropped by the time measure returns
	latency  *latencyResult
	fanout   *fanoutResult
	race     *raceResult
	page     *pageResult
	flood    *floodResult
	warnings map[string]int // the desk's own warnings and errors during the run, by message
	failures []string       // correctness checks that failed: the exit status
	vacuums  string         // what the tool did in autovacuum's place ("" when autovacuum runs, or it did not)
}

func (r *result) fail(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

// measure sets up, runs the chosen scenarios in order and tears down, printing progress to out.
func measure(ctx context.Context, cfg config, out io.Writer) (res result, err error) {
	b, teardown, err := setUp(ctx, cfg, out)
	if err != nil {
		return result{}, errors.Join(err, teardown())
	}
	defer func() { err = errors.Join(err, teardown()) }()
	res.database = b.dbName
	if b.autovacuumOff && cfg.playAutovacuum {
		v := playAutovacuum(ctx, b.db)
		defer func() { v.stop(); res.vacuums = v.summary() }()
	}

	stopProfile, err := loadtest.StartCPUProfile(cfg.cpuProfile)
	if err != nil {
		return result{}, err
	}
	defer func() { err = errors.Join(err, stopProfile()) }()

	step := func(name string, f func() error) error {
		t0, cpu0 := time.Now(), loadtest.OwnCPU()
		fmt.Fprintf(out, "%s ... (load average %s)\n", name, loadtest.LoadAverage())
		if err := f(); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("%s: interrupted: %w", name, ctx.Err())
			}
			return fmt.Errorf("%s: %w", name, err)
		}
		took, cpu := time.Since(t0), loadtest.OwnCPU()-cpu0
		fmt.Fprintf(out, "%s done in %s (load average %s; this process, server side, used %.1fs of CPU: %.0f%% of one core)\n\n",
			name, took.Round(100*time.Millisecond), loadtest.LoadAverage(), cpu.Seconds(), 100*cpu.Seconds()/took.Seconds())
		return nil
	}
	// 5 before 4: the race leaves a webhook backlog that the deliverers work off for minutes, and
	// the page figures should not carry it.
	scenarios := []struct {
		on   bool
		name string
		run  func() error
	}{
		{cfg.runs1(), "1. ingest→frame latency, two instances", func() (err error) {
			res.latency, err = b.latency(ctx, out, &res)
			return err
		}},
		{cfg.runs2(), "2+3. fan-out and memory per idle socket", func() (err error) {
			res.fanout, err = b.fanout(ctx, out, &res)
			return err
		}},
		{cfg.runs5(), "5. queue page over a deep queue", func() (err error) {
			res.page, err = b.queuePage(ctx, out, &res)
			return err
		}},
		{cfg.runs6(), "6. another agent's queue page during one agent's search flood", func() (err error) {
			res.flood, err = b.flood(ctx, out, &res)
			return err
		}},
		{cfg.runs4(), "4. agents racing to accept", func() (err error) {
			res.race, err = b.race(ctx, out, &res)
			return err
		}},
	}
	for _, sc := range scenarios {
		if !sc.on {
			continue
		}
		if err := step(sc.name, sc.run); err != nil {
			return res, err
		}
	}
	res.warnings = b.warns.all()
	return res, nil
}

func sorted(d []time.Duration) []time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d
}

// waitSampler samples what the bench database's backends are doing (pg_stat_activity) every
// sampleEvery, so a figure comes with where PostgreSQL spent the time: on CPU, waiting for the
// client, for a lock, or for the WAL to reach the disk.
type waitSampler struct {
	stop   func()
	counts map[string]int
	total  int
}

const sampleEvery = 50 * time.Millisecond

// sample runs take on one of the tool's connections every sampleEvery until the stop it returns
// is called; stop returns once sampling has ended. An error from take ends the sampling early.
func (b *bench) sample(ctx context.Context, take func(ctx context.Context, conn *pgxpool.Conn) error) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := b.db.Acquire(ctx)
		if err != nil {
			return
		}
		defer conn.Release()
		ticker := time.NewTicker(sampleEvery)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if take(ctx, conn) != nil {
				return
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func (b *bench) sampleWaits(ctx context.Context) *waitSampler {
	s := &waitSampler{counts: map[string]int{}}
	s.stop = b.sample(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		rows, err := conn.Query(ctx, `
			SELECT CASE WHEN state = 'active' THEN coalesce(wait_event_type || ':' || wait_event, 'CPU')
				ELSE state || coalesce(' (' || wait_event || ')', '') END
			FROM pg_stat_activity
			WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
				AND state <> 'idle'`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var what string
			if rows.Scan(&what) == nil {
				s.counts[what]++
				s.total++
			}
		}
		return nil
	})
	return s
}

// top stops the sampler and returns its n most frequent states as "share state" items.
func (s *waitSampler) top(n int) string {
	s.stop()
	type kv struct {
		k string
		v int
	}
	var all []kv
	for k, v := range s.counts {
		all = append(all, kv{k, v})
	}
	slices.SortFunc(all, func(a, b kv) int { return b.v - a.v })
	var parts []string
	for _, x := range all[:min(n, len(all))] {
		parts = append(parts, fmt.Sprintf("%.0f%% %s", 100*float64(x.v)/float64(s.total), x.k))
	}
	if len(parts) == 0 {
		return "no busy backends sampled"
	}
	return strings.Join(parts, ", ")
}

// xidSampler samples, cluster-wide, the oldest transaction that holds a transaction id. The live
// feed reads only events below the oldest running xid (pg_snapshot_xmin), and xids are shared by
// every database of a cluster, so any such transaction, here or in another database, holds back
// every card committed after it began until the hub reads again once it has ended.
type xidSampler struct {
	stop    func()
	ages    []time.Duration // per sample; 0 when no transaction held an xid
	foreign int             // samples whose oldest holder was in another database and older than xidOld
}

const xidOld = 20 * time.Millisecond

func (b *bench) sampleXIDs(ctx context.Context) *xidSampler {
	s := &xidSampler{}
	s.stop = b.sample(ctx, func(ctx context.Context, conn *pgxpool.Conn) error {
		var ageMS float64
		var here bool
		err := conn.QueryRow(ctx, `
			SELECT extract(epoch FROM clock_timestamp() - xact_start) * 1000, datname = current_database()
			FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()
			ORDER BY xact_start LIMIT 1`).Scan(&ageMS, &here)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			s.ages = append(s.ages, 0)
		case err != nil:
			return err
		default:
			age := time.Duration(ageMS * float64(time.Millisecond))
			s.ages = append(s.ages, age)
			if !here && age > xidOld {
				s.foreign++
			}
		}
		return nil
	})
	return s
}

// summary stops the sampler and describes what it saw.
func (s *xidSampler) summary() string {
	s.stop()
	if len(s.ages) == 0 {
		return "no samples"
	}
	d := sorted(s.ages)
	return fmt.Sprintf("oldest xid-holding transaction in the cluster, every %s: p50 %s, p99 %s, max %s; older than %s and in another database in %.0f%% of %d samples",
		sampleEvery, loadtest.Millis(loadtest.Percentile(d, 50)), loadtest.Millis(loadtest.Percentile(d, 99)), loadtest.Millis(d[len(d)-1]), xidOld, 100*float64(s.foreign)/float64(len(d)), len(d))
}
