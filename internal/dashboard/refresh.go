package dashboard

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/handoffdesk/desk/internal/events"
	"github.com/jackc/pgx/v5"
)

// RefreshEvery is how often each instance runs Refresh. Between runs the figures of hours before
// the last run can lag by at most this much behind the packages' later changes (an accept, a
// close); the hours from the last run on are read from handoffs directly (Read).
const RefreshEvery = 15 * time.Second

// rollupVersion is the version of what dashboard_hours' rows hold and how they count it. A
// rollup of another version is rebuilt by the next Refresh, and read past until then (Read reads
// every hour directly, as before a first refresh): migration 00035 added the replies' columns and
// counted the replies to drafts by their packages' arrival, which rows of version 1 did by the
// replies' time.
const rollupVersion = 2

// rollupLock is the advisory lock one Refresh holds at a time, whichever instance runs it.
const rollupLock = 0x64617368 // "dash"

// Refreshed says what a Refresh did: whether it ran (another instance's may hold the lock) and
// how many hours it computed again.
type Refreshed struct {
	Ran, Rebuilt bool
	Hours        int
}

// Refresh brings dashboard_hours up to date: it computes again, whole, every hour that a package
// which changed since the last run (a reply is a change of its package) arrived in, from handoffs
// and evals. The changes are read from the event log by transaction id up to the mark events.Now
// hands out (the oldest transaction of this database still running), so a change that commits
// late is read on a later run, never skipped. Each hour is rewritten from its packages as they
// stand, so a run that repeats an hour (after a crash, or two instances one after the other)
// writes the same rows. Only one instance runs at a time (pg_try_advisory_xact_lock); the others
// return without waiting. With no rollup yet (the first run after migration 00023), or one of
// another rollupVersion, every hour is computed.
func Refresh(ctx context.Context, db DB) (Refreshed, error) { return refresh(ctx, db, false) }

// Rebuild computes every hour again, from the packages as they stand (web dashboard rebuild). It
// waits for a refresh another instance is running.
func Rebuild(ctx context.Context, db DB) (Refreshed, error) { return refresh(ctx, db, true) }

func refresh(ctx context.Context, db DB, rebuild bool) (Refreshed, error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return Refreshed{}, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	lock := `SELECT pg_try_advisory_xact_lock($1)`
	if rebuild {
		lock = `SELECT true FROM pg_advisory_xact_lock($1)`
	}
	var locked bool
	if err := tx.QueryRow(ctx, lock, rollupLock).Scan(&locked); err != nil || !locked {
		return Refreshed{}, err
	}
	var through *string
	if err := tx.QueryRow(ctx, `SELECT (SELECT through FROM dashboard_rollup WHERE version = $1)`, rollupVersion).Scan(&through); err != nil {
		return Refreshed{}, err
	}
	mark, err := events.Now(ctx, tx)
	if err != nil {
		return Refreshed{}, err
	}
	// A mark of another life of the server (after a crash or a failover, xids are handed out
	// again) says nothing about which changes were read: every hour is computed again.
	inc, bound, _ := strings.Cut(string(mark), ":")
	var since *string
	if through != nil {
		if i, x, ok := strings.Cut(*through, ":"); ok && i == inc {
			since = &x
		}
	}
	var ids []int64
	if err := tx.QueryRow(ctx, `SELECT coalesce(array_agg(id), '{}') FROM queues`).Scan(&ids); err != nil {
		return Refreshed{}, err
	}
	r := Refreshed{Ran: true, Rebuilt: since == nil || rebuild}
	var in spans
	if r.Rebuilt {
		if _, err := tx.Exec(ctx, `DELETE FROM dashboard_hours`); err != nil {
			return Refreshed{}, err
		}
		in = spans{from: []time.Time{time.Unix(0, 0)}, to: []time.Time{time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}}
	} else {
		// A reply is an event of its package, so its package's hour is among these.
		rows, err := tx.Query(ctx, `
			SELECT DISTINCT to_timestamp(floor(extract(epoch FROM h.created_at) / 3600) * 3600)
			FROM events e JOIN handoffs h ON h.id = e.handoff_id
			WHERE e.xid >= $1::xid8 AND e.xid < $2::xid8`, *since, bound)
		if err != nil {
			return Refreshed{}, err
		}
		hours, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
		if err != nil {
			return Refreshed{}, err
		}
		slices.SortFunc(hours, func(a, b time.Time) int { return a.Compare(b) })
		for _, h := range hours {
			in.from, in.to = append(in.from, h), append(in.to, h.Add(time.Hour))
		}
		r.Hours = len(hours)
		if _, err := tx.Exec(ctx, `DELETE FROM dashboard_hours WHERE hours = 1 AND hour = ANY($1)`, in.from); err != nil {
			return Refreshed{}, err
		}
	}
	if len(in.from) > 0 {
		hours, err := aggregate(ctx, tx, ids, in)
		if err != nil {
			return Refreshed{}, err
		}
		if err := write(ctx, tx, 1, hours); err != nil {
			return Refreshed{}, err
		}
		// Then the days those hours are in, each the sum of its hours' rows.
		seen := map[time.Time]bool{}
		var days spans
		for _, h := range in.from {
			if d := h.Truncate(24 * time.Hour); !seen[d] {
				seen[d] = true
				days.from, days.to = append(days.from, d), append(days.to, d.Add(24*time.Hour))
			}
		}
		if r.Rebuilt {
			days = in
			hs := map[time.Time]bool{}
			for k := range hours {
				hs[k.hour] = true
			}
			r.Hours = len(hs)
		}
		if _, err := tx.Exec(ctx, `
			DELETE FROM dashboard_hours d USING unnest($1::timestamptz[], $2::timestamptz[]) AS s(from_, to_)
			WHERE d.hours = 24 AND d.hour >= s.from_ AND d.hour < s.to_`, days.from, days.to); err != nil {
			return Refreshed{}, err
		}
		hs, err := stored(ctx, tx, ids, 1, days)
		if err != nil {
			return Refreshed{}, err
		}
		sums := map[hourKey]*hour{}
		for _, h := range hs {
			k := hourKey{h.Hour.Truncate(24 * time.Hour), h.Queue}
			if sums[k] == nil {
				sums[k] = newHour(k)
			}
			sums[k].add(h)
		}
		if err := write(ctx, tx, 24, sums); err != nil {
			return Refreshed{}, err
		}
	}
	if _, err := tx.Exec(ctx, `
		INSERT INTO dashboard_rollup (through, refreshed_at, version) VALUES ($1, now(), $2)
		ON CONFLICT (one) DO UPDATE SET through = excluded.through, refreshed_at = excluded.refreshed_at, version = excluded.version`,
		string(mark), rollupVersion); err != nil {
		return Refreshed{}, err
	}
	return r, tx.Commit(ctx)
}

// write stores rows of the grain given (1: hours, 24: days).
func write(ctx context.Context, tx pgx.Tx, grain int, hs map[hourKey]*hour) error {
	rows := make([][]any, 0, len(hs))
	for _, h := range hs {
		agents, figures := packAgents(h.Agents)
		rows = append(rows, []any{h.Hour, grain, h.Queue, h.In, h.Accepted, h.Resolved, h.Rejected, h.Returned, h.Expired, h.Canceled,
			h.Repeats, h.ByTrigger, h.BySource, h.ReturnedBy, []int32(h.AcceptBins), []int32(h.ResolveBins), h.Drafts, h.AsIs,
			h.Replied, []int32(h.ReplyBins), agents, figures})
	}
	_, err := tx.CopyFrom(ctx, pgx.Identifier{"dashboard_hours"}, []string{"hour", "hours", "queue_id", "packages", "accepted",
		"resolved", "rejected", "returned", "expired", "canceled", "repeats", "by_trigger", "by_source", "returned_by",
		"accept_bins", "resolve_bins", "drafts", "as_is", "replied", "reply_bins", "agents", "agent_figures"}, pgx.CopyFromRows(rows))
	return err
}

// RunRefresher runs Refresh every interval until ctx ends; a failure is a warning and the next
// run tries again (the watermark did not move).
func RunRefresher(ctx context.Context, db DB, interval time.Duration, logger *slog.Logger) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if r, err := Refresh(ctx, db); err != nil && ctx.Err() == nil {
			logger.Warn("dashboard refresh failed", "err", err)
		} else if r.Rebuilt {
			logger.Info("dashboard rollup built", "hours", r.Hours)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
