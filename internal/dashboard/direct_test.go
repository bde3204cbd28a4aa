package dashboard

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The direct reads: each figure computed from handoffs and evals through their covering indexes,
// as Read did before the rollup. make bench-dashboard times them beside the rollup for the ratio.

// Every direct query reads the packages created in [previous.From, current.To) through
// handoffs_figures_idx, and splits them by period with "created_at >= current.From".

// readOutcomes counts the outcomes and takes the percentiles. percentile_cont interpolates
// between the two middle durations, as a median of times is usually read; docs/metrics.md says
// why not percentile_disc.
func readOutcomes(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
	rows, err := tx.Query(ctx, `
		SELECT h.created_at >= $3,
			count(*),
			count(*) FILTER (WHERE h.accepted_at IS NOT NULL),
			percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY extract(epoch FROM h.accepted_at - h.created_at))
				FILTER (WHERE h.accepted_at IS NOT NULL),
			count(*) FILTER (WHERE h.status = 'resolved'),
			percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY extract(epoch FROM h.closed_at - h.created_at))
				FILTER (WHERE h.status = 'resolved'),
			count(*) FILTER (WHERE h.rejections > 0),
			count(*) FILTER (WHERE h.status = 'returned_to_bot'),
			count(*) FILTER (WHERE h.status = 'expired'),
			count(*) FILTER (WHERE h.status = 'canceled'),
			count(*) FILTER (WHERE h.repeat_contact)
		FROM handoffs h WHERE `+span+`
		GROUP BY 1`, q.ids, s.Previous.From, s.Current.From, s.Current.To)
	if err != nil {
		return err
	}
	var current bool
	var in, accepted, resolved, rejected, returned, expired, canceled, repeats int
	var accept, resolve []*float64
	_, err = pgx.ForEachRow(rows, []any{&current, &in, &accepted, &accept, &resolved, &resolve, &rejected, &returned, &expired, &canceled, &repeats}, func() error {
		f := s.pick(current)
		f.In, f.Accepted, f.Resolved, f.Rejected, f.Returned, f.Expired, f.Canceled = in, accepted, resolved, rejected, returned, expired, canceled
		f.Repeats = repeats
		f.AcceptP50, f.AcceptP90 = seconds(accept, 0), seconds(accept, 1)
		f.ResolveP50, f.ResolveP90 = seconds(resolve, 0), seconds(resolve, 1)
		return nil
	})
	return err
}

// readMix counts packages in by trigger, by source agent, by queue (with its repeat contacts), and
// returns by reason, in one scan.
func readMix(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
	rows, err := tx.Query(ctx, `
		SELECT h.created_at >= $3 AS cur, GROUPING(h.trigger), GROUPING(h.source_agent), GROUPING(h.queue_id),
			coalesce(h.trigger, ''), coalesce(h.source_agent, ''), coalesce(h.queue_id, 0), coalesce(h.outcome, ''), count(*),
			count(*) FILTER (WHERE h.repeat_contact)
		FROM handoffs h WHERE `+span+`
		GROUP BY GROUPING SETS ((cur, h.trigger), (cur, h.source_agent), (cur, h.queue_id),
			(cur, h.status, h.outcome))
		HAVING GROUPING(h.status) = 1 OR h.status = 'returned_to_bot'`, q.ids, s.Previous.From, s.Current.From, s.Current.To)
	if err != nil {
		return err
	}
	in, repeats := map[int64]int{}, map[int64]int{}
	var current bool
	var noTrigger, noSource, noQueue int
	var trigger, source, outcome string
	var queueID int64
	var n, r int
	if _, err := pgx.ForEachRow(rows, []any{&current, &noTrigger, &noSource, &noQueue, &trigger, &source, &queueID, &outcome, &n, &r}, func() error {
		f := s.pick(current)
		switch {
		case noTrigger == 0:
			f.ByTrigger = append(f.ByTrigger, Count{trigger, n})
		case noSource == 0:
			f.BySource = append(f.BySource, Count{source, n})
		case noQueue == 0:
			if current {
				in[queueID], repeats[queueID] = n, r
			}
		default:
			f.ReturnedBy = append(f.ReturnedBy, Count{outcome, n})
		}
		return nil
	}); err != nil {
		return err
	}
	for _, f := range []*Figures{&s.Current, &s.Previous} {
		for _, cs := range [][]Count{f.ByTrigger, f.BySource, f.ReturnedBy} {
			sortCounts(cs)
		}
	}
	for _, id := range q.order {
		s.Queues = append(s.Queues, QueueFigures{Queue: q.names[id], In: in[id], Repeats: repeats[id]})
	}
	return nil
}

// readDrafts counts, over each period's packages, the replies sent to those that carried a bot's
// draft and those sent unchanged, and the packages that got a reply. A reply counts with its package: in the period it arrived in, in the queue it
// is in now.
func readDrafts(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
	rows, err := tx.Query(ctx, `
		SELECT h.created_at >= $3, h.queue_id, count(*) FILTER (WHERE r.first IS NOT NULL), coalesce(sum(r.drafts), 0),
			coalesce(sum(r.as_is), 0)
		FROM handoffs h CROSS JOIN LATERAL (
			SELECT min(e.at) AS first, count(*) FILTER (WHERE e.draft <> '') AS drafts,
				count(*) FILTER (WHERE e.draft <> '' AND e.accepted_as_is) AS as_is
			FROM evals e WHERE e.handoff_id = h.id AND e.kind = 'reply') r
		WHERE `+span+`
		GROUP BY 1, 2`, q.ids, s.Previous.From, s.Current.From, s.Current.To)
	if err != nil {
		return err
	}
	byQueue := map[int64]int{}
	var current bool
	var queueID int64
	var replied, drafts, asIs int
	if _, err := pgx.ForEachRow(rows, []any{&current, &queueID, &replied, &drafts, &asIs}, func() error {
		f := s.pick(current)
		f.Replied += replied
		f.Drafts += drafts
		f.AsIs += asIs
		if current {
			byQueue[queueID] = drafts
		}
		return nil
	}); err != nil {
		return err
	}
	for i, id := range q.order {
		s.Queues[i].Drafts = byQueue[id]
	}
	return nil
}

// readSeries cuts the current window into buckets from its start (not calendar days: every bucket
// is as long as the others, and the last one is the current one so far) with the packages in and the median time to
// resolution of each.
func readSeries(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
	n := s.buckets()
	s.Series = make([]Bucket, n)
	for i := range s.Series {
		s.Series[i].From = s.Current.From.Add(time.Duration(i) * s.Window.Bucket)
	}
	rows, err := tx.Query(ctx, `
		SELECT floor(extract(epoch FROM h.created_at - $2) / $4)::int, count(*),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM h.closed_at - h.created_at))
				FILTER (WHERE h.status = 'resolved')
		FROM handoffs h WHERE h.queue_id = ANY($1) AND h.created_at >= $2 AND h.created_at < $3
		GROUP BY 1`, q.ids, s.Current.From, s.Current.To, s.Window.Bucket.Seconds())
	if err != nil {
		return err
	}
	var i, in int
	var p50 *float64
	_, err = pgx.ForEachRow(rows, []any{&i, &in, &p50}, func() error {
		if i < 0 || i >= n {
			return fmt.Errorf("bucket %d outside the window's %d", i, n)
		}
		s.Series[i].In = in
		s.Series[i].ResolveP50 = seconds([]*float64{p50}, 0)
		return nil
	})
	return err
}

// readAgentCounts counts each agent's figures over the current period's packages, ordered as Read
// orders them (by name, then id).
func readAgentCounts(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
	rows, err := tx.Query(ctx, `
		WITH p AS (SELECT * FROM handoffs h WHERE h.queue_id = ANY($1) AND h.created_at >= $2 AND h.created_at < $3),
		held AS (SELECT assignee_id AS id, count(*) AS handled, count(*) FILTER (WHERE status = 'resolved') AS resolved
			FROM p WHERE accepted_at IS NOT NULL AND assignee_id IS NOT NULL GROUP BY 1),
		sent AS (SELECT e.editor_id AS id, count(*) AS replies, count(*) FILTER (WHERE e.draft <> '') AS drafts,
				count(*) FILTER (WHERE e.draft <> '' AND e.accepted_as_is) AS as_is
			FROM p JOIN evals e ON e.handoff_id = p.id AND e.kind = 'reply' GROUP BY 1)
		SELECT u.id, u.display_name, u.email, coalesce(held.handled, 0), coalesce(held.resolved, 0), coalesce(sent.replies, 0),
			coalesce(sent.drafts, 0), coalesce(sent.as_is, 0)
		FROM held FULL JOIN sent USING (id) JOIN users u ON u.id = coalesce(held.id, sent.id)
		ORDER BY u.display_name, u.id`, q.ids, s.Current.From, s.Current.To)
	if err != nil {
		return err
	}
	s.Agents, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (AgentFigures, error) {
		var a AgentFigures
		err := row.Scan(&a.UserID, &a.Name, &a.Email, &a.Handled, &a.Resolved, &a.Replies, &a.Drafts, &a.AsIs)
		return a, err
	})
	return err
}
