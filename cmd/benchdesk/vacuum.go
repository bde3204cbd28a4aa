package main

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// vacuumer stands in for autovacuum on a PostgreSQL that runs without it, as this machine's does:
// without it the hot tables' dead rows pile up through a run, as no deployment's would. Every
// vacuumEvery it asks which tables are past autovacuum's thresholds, with each table's own
// settings (migrations/00040) and the server's defaults, and vacuums or analyzes those, one at a
// time, as autovacuum's worker would, and paced as it is (its cost delay and limit, not a manual
// VACUUM's none).
type vacuumer struct {
	mu   sync.Mutex
	runs map[string]int // "VACUUM handoffs" → times
	errs []string
	stop func()
}

// vacuumEvery is autovacuum_naptime's default: autovacuum looks at a database at most this often.
// Looking every second instead vacuumed handoffs a dozen times or more in a 15-second race, which
// no deployment does, and moved the race's figures with how many vacuums fell within it.
const vacuumEvery = time.Minute

// due is autovacuum's rule (the PostgreSQL manual, "The Autovacuum Daemon"): a table is vacuumed
// when its dead rows pass threshold + scale factor × its rows, or its rows inserted since the last
// vacuum pass the insert threshold + insert scale factor × its rows; analyzed when its rows changed
// since the last analyze pass the analyze threshold + scale factor × its rows. A table's own
// setting (reloptions) wins over the server's.
const due = `
	WITH t AS (
		SELECT c.relname, greatest(c.reltuples, 0) AS n, s.n_dead_tup, s.n_ins_since_vacuum, s.n_mod_since_analyze, c.reloptions
		FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid WHERE s.schemaname = 'public'
	), o AS (
		SELECT t.*, (SELECT coalesce(jsonb_object_agg(split_part(r, '=', 1), split_part(r, '=', 2)::float8), '{}')
			FROM unnest(t.reloptions) r) AS opt FROM t
	)
	SELECT relname,
		n_dead_tup > coalesce((opt->>'autovacuum_vacuum_threshold')::float8, current_setting('autovacuum_vacuum_threshold')::float8)
			+ coalesce((opt->>'autovacuum_vacuum_scale_factor')::float8, current_setting('autovacuum_vacuum_scale_factor')::float8) * n
		OR n_ins_since_vacuum > coalesce((opt->>'autovacuum_vacuum_insert_threshold')::float8, current_setting('autovacuum_vacuum_insert_threshold')::float8)
			+ coalesce((opt->>'autovacuum_vacuum_insert_scale_factor')::float8, current_setting('autovacuum_vacuum_insert_scale_factor')::float8) * n,
		n_mod_since_analyze > coalesce((opt->>'autovacuum_analyze_threshold')::float8, current_setting('autovacuum_analyze_threshold')::float8)
			+ coalesce((opt->>'autovacuum_analyze_scale_factor')::float8, current_setting('autovacuum_analyze_scale_factor')::float8) * n,
		coalesce((opt->>'autovacuum_vacuum_cost_delay')::float8, nullif((SELECT setting::float8 FROM pg_settings WHERE name = 'autovacuum_vacuum_cost_delay'), -1),
			(SELECT setting::float8 FROM pg_settings WHERE name = 'vacuum_cost_delay'))::text,
		coalesce((opt->>'autovacuum_vacuum_cost_limit')::float8, nullif(current_setting('autovacuum_vacuum_cost_limit')::float8, -1),
			current_setting('vacuum_cost_limit')::float8)::int::text
	FROM o`

// playAutovacuum starts the vacuumer on db; its stop ends it and waits for a vacuum under way.
func playAutovacuum(ctx context.Context, db *pgxpool.Pool) *vacuumer {
	v := &vacuumer{runs: map[string]int{}}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		ticker := time.NewTicker(vacuumEvery)
		defer ticker.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-ticker.C:
			}
			if err := v.once(ctx, db); err != nil && ctx.Err() == nil {
				v.mu.Lock()
				v.errs = append(v.errs, err.Error())
				v.mu.Unlock()
			}
		}
	}()
	v.stop = func() { cancel(); <-done }
	return v
}

func (v *vacuumer) once(ctx context.Context, db *pgxpool.Pool) error {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	rows, err := conn.Query(ctx, due)
	if err != nil {
		return err
	}
	type work struct {
		table           string
		vacuum, analyze bool
		delay, limit    string // autovacuum's pacing for the table: cost delay (ms) and limit
	}
	todo, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (work, error) {
		var w work
		err := row.Scan(&w.table, &w.vacuum, &w.analyze, &w.delay, &w.limit)
		return w, err
	})
	if err != nil {
		return err
	}
	for _, w := range todo {
		var stmt string
		switch {
		case w.vacuum && w.analyze:
			stmt = "VACUUM (ANALYZE) "
		case w.vacuum:
			stmt = "VACUUM "
		case w.analyze:
			stmt = "ANALYZE "
		default:
			continue
		}
		if _, err := conn.Exec(ctx, `SELECT set_config('vacuum_cost_delay', $1, false), set_config('vacuum_cost_limit', $2, false)`,
			w.delay, w.limit); err != nil {
			return err
		}
		if _, err := conn.Exec(ctx, stmt+pgx.Identifier{w.table}.Sanitize()); err != nil {
			return fmt.Errorf("%s%s: %w", stmt, w.table, err)
		}
		v.mu.Lock()
		v.runs[stmt+w.table]++
		v.mu.Unlock()
	}
	return nil
}

// summary says what the vacuumer did, for the report.
func (v *vacuumer) summary() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.runs) == 0 && len(v.errs) == 0 {
		return "no table passed autovacuum's thresholds"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(v.runs)) {
		parts = append(parts, fmt.Sprintf("%s ×%d", strings.TrimSpace(k), v.runs[k]))
	}
	s := strings.Join(parts, ", ")
	if len(v.errs) > 0 {
		s += fmt.Sprintf("; %d failed, first: %s", len(v.errs), v.errs[0])
	}
	return s
}
