package dashboard

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/approvals"
)

// readHours reads the hours of [from, to): from the rollup up to the hour its last refresh ran in,
// and from handoffs and evals after it (the current hour, and any since a refresh last ran), so
// packages show as they arrive. Before the first refresh of the rollup's version every hour is
// read from handoffs.
func readHours(ctx context.Context, tx pgx.Tx, q queues, from, to time.Time, grain time.Duration) ([]*hour, error) {
	direct := from
	var refreshed *time.Time
	if err := tx.QueryRow(ctx, `SELECT (SELECT refreshed_at FROM dashboard_rollup WHERE version = $1)`, rollupVersion).Scan(&refreshed); err != nil {
		return nil, err
	}
	if refreshed != nil {
		direct = hourOf(*refreshed)
		if hourOf(to).Before(direct) {
			direct = hourOf(to)
		}
		if direct.Before(from) {
			direct = from
		}
	}
	// The 7- and 30-day windows read whole days as days' rows; the day of the last refresh, and the
	// 24-hour window, as hours' rows.
	coarse := from
	if grain > time.Hour {
		coarse = direct.Truncate(grain)
		if coarse.Before(from) {
			coarse = from
		}
	}
	hs, err := stored(ctx, tx, q.ids, 24, spans{from: []time.Time{from}, to: []time.Time{coarse}})
	if err != nil {
		return nil, err
	}
	hours, err := stored(ctx, tx, q.ids, 1, spans{from: []time.Time{coarse}, to: []time.Time{direct}})
	if err != nil {
		return nil, err
	}
	hs = append(hs, hours...)
	if direct.Before(to) {
		recent, err := aggregate(ctx, tx, q.ids, spans{from: []time.Time{direct}, to: []time.Time{to}})
		if err != nil {
			return nil, err
		}
		for _, h := range recent {
			hs = append(hs, h)
		}
	}
	return hs, nil
}

// times are the merged histograms of each period (current, previous) and of each bucket of the
// current one.
type times struct {
	accept, resolve, reply [2]histogram
	series                 []histogram
	// agents are the current period's agents' rows summed, by user id.
	agents map[int64]*agentHour
}

// buckets is how many points the sparklines have: one per Window.Bucket from the window's start,
// the last one the current bucket so far.
func (s *Stats) buckets() int {
	return int((s.Current.To.Sub(s.Current.From) + s.Window.Bucket - 1) / s.Window.Bucket)
}

// sum adds the rows up into the figures, the bars and the sparklines' buckets.
func (s *Stats) sum(hs []*hour, q queues) times {
	n := s.buckets()
	s.Series = make([]Bucket, n)
	for i := range s.Series {
		s.Series[i].From = s.Current.From.Add(time.Duration(i) * s.Window.Bucket)
	}
	t := times{series: make([]histogram, n), agents: map[int64]*agentHour{}}
	s.Queues = make([]QueueFigures, len(q.order))
	bars := map[int64]*QueueFigures{}
	for i, id := range q.order {
		s.Queues[i].Queue = q.names[id]
		bars[id] = &s.Queues[i]
	}
	trig, src, ret := [2]map[string]int{{}, {}}, [2]map[string]int{{}, {}}, [2]map[string]int{{}, {}}
	for _, h := range hs {
		p := 1
		if !h.Hour.Before(s.Current.From) {
			p = 0
		}
		f := s.pick(p == 0)
		f.In += h.In
		f.Accepted += h.Accepted
		f.Resolved += h.Resolved
		f.Rejected += h.Rejected
		f.Returned += h.Returned
		f.Expired += h.Expired
		f.Canceled += h.Canceled
		f.Repeats += h.Repeats
		f.Drafts += h.Drafts
		f.AsIs += h.AsIs
		f.Replied += h.Replied
		t.reply[p].merge(h.ReplyBins)
		for v, c := range h.ByTrigger {
			trig[p][v] += c
		}
		for v, c := range h.BySource {
			src[p][v] += c
		}
		for v, c := range h.ReturnedBy {
			ret[p][v] += c
		}
		t.accept[p].merge(h.AcceptBins)
		t.resolve[p].merge(h.ResolveBins)
		if p == 0 {
			if b := bars[h.Queue]; b != nil {
				b.In += h.In
				b.Repeats += h.Repeats
				b.Drafts += h.Drafts
			}
			if i := int(h.Hour.Sub(s.Current.From) / s.Window.Bucket); i < n {
				s.Series[i].In += h.In
				s.Series[i].Resolved += h.Resolved
				t.series[i].merge(h.ResolveBins)
			}
			for id, a := range h.Agents {
				if t.agents[id] == nil {
					t.agents[id] = &agentHour{}
				}
				t.agents[id].add(a)
			}
		}
	}
	for p, f := range []*Figures{&s.Current, &s.Previous} {
		f.ByTrigger, f.BySource, f.ReturnedBy = countsOf(trig[p]), countsOf(src[p]), countsOf(ret[p])
	}
	s.Agents = make([]AgentFigures, 0, len(t.agents))
	for id, a := range t.agents {
		s.Agents = append(s.Agents, AgentFigures{UserID: id, Handled: a.Handled, Resolved: a.Resolved, Replies: a.Replies,
			Drafts: a.Drafts, AsIs: a.AsIs})
	}
	return t
}

func countsOf(m map[string]int) []Count {
	var cs []Count
	for v, n := range m {
		if n > 0 {
			cs = append(cs, Count{v, n})
		}
	}
	sortCounts(cs)
	return cs
}

// estimate takes the percentiles from the histograms.
func (s *Stats) estimate(t times) {
	for p, f := range []*Figures{&s.Current, &s.Previous} {
		f.AcceptP50, f.AcceptP90 = t.accept[p].estimate(0.5), t.accept[p].estimate(0.9)
		f.ResolveP50, f.ResolveP90 = t.resolve[p].estimate(0.5), t.resolve[p].estimate(0.9)
		f.ReplyP50, f.ReplyP90 = t.reply[p].estimate(0.5), t.reply[p].estimate(0.9)
	}
	for i := range s.Series {
		s.Series[i].ResolveP50 = t.series[i].estimate(0.5)
	}
	for i := range s.Agents {
		a := &s.Agents[i]
		h := t.agents[a.UserID]
		a.AcceptP50, a.AcceptP90 = h.AcceptBins.estimate(0.5), h.AcceptBins.estimate(0.9)
		a.ResolveP50, a.ResolveP90 = h.ResolveBins.estimate(0.5), h.ResolveBins.estimate(0.9)
		if d := h.EditBins.estimate(0.5); d != nil {
			chars := d.Seconds() // the bins count characters as they count seconds
			a.EditP50 = &chars
		}
	}
}

// readExact takes the percentiles with percentile_cont over the packages' durations, which
// interpolates between the two middle durations, as a median of times is usually read;
// docs/metrics.md says why not percentile_disc.
func readExact(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
	rows, err := tx.Query(ctx, `
		SELECT h.created_at >= $3,
			percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY extract(epoch FROM h.accepted_at - h.created_at))
				FILTER (WHERE h.accepted_at IS NOT NULL),
			percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY extract(epoch FROM h.closed_at - h.created_at))
				FILTER (WHERE h.status = 'resolved')
		FROM handoffs h WHERE `+span+`
		GROUP BY 1`, q.ids, s.Previous.From, s.Current.From, s.Current.To)
	if err != nil {
		return err
	}
	var current bool
	var accept, resolve []*float64
	if _, err := pgx.ForEachRow(rows, []any{&current, &accept, &resolve}, func() error {
		f := s.pick(current)
		f.AcceptP50, f.AcceptP90 = seconds(accept, 0), seconds(accept, 1)
		f.ResolveP50, f.ResolveP90 = seconds(resolve, 0), seconds(resolve, 1)
		return nil
	}); err != nil {
		return err
	}
	// The time to the first reply of each package that got one.
	rows, err = tx.Query(ctx, `
		SELECT h.created_at >= $3,
			percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY greatest(extract(epoch FROM r.first - h.created_at), 0))
		FROM handoffs h CROSS JOIN LATERAL (SELECT min(e.at) AS first FROM evals e WHERE e.handoff_id = h.id AND e.kind = 'reply') r
		WHERE `+span+` AND r.first IS NOT NULL
		GROUP BY 1`, q.ids, s.Previous.From, s.Current.From, s.Current.To)
	if err != nil {
		return err
	}
	var reply []*float64
	if _, err := pgx.ForEachRow(rows, []any{&current, &reply}, func() error {
		f := s.pick(current)
		f.ReplyP50, f.ReplyP90 = seconds(reply, 0), seconds(reply, 1)
		return nil
	}); err != nil {
		return err
	}
	if err := readAgentsExact(ctx, tx, q, s); err != nil {
		return err
	}
	n := len(s.Series)
	rows, err = tx.Query(ctx, `
		SELECT floor(extract(epoch FROM h.created_at - $2) / $4)::int,
			percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM h.closed_at - h.created_at))
		FROM handoffs h WHERE h.queue_id = ANY($1) AND h.created_at >= $2 AND h.created_at < $3 AND h.status = 'resolved'
		GROUP BY 1`, q.ids, s.Current.From, s.Current.To, s.Window.Bucket.Seconds())
	if err != nil {
		return err
	}
	var i int
	var p50 *float64
	_, err = pgx.ForEachRow(rows, []any{&i, &p50}, func() error {
		if i < 0 || i >= n {
			return fmt.Errorf("bucket %d outside the window's %d", i, n)
		}
		s.Series[i].ResolveP50 = seconds([]*float64{p50}, 0)
		return nil
	})
	return err
}

// readDecisions is approval time to decision: the refund approvals of the queue (or of every
// queue) decided in each period, from request to decision.
func readDecisions(ctx context.Context, tx pgx.Tx, q queues, one bool, s *Stats) error {
	var queueID int64
	if one {
		queueID = q.ids[0]
	}
	for _, f := range []*Figures{&s.Current, &s.Previous} {
		t, err := approvals.DecisionTimes(ctx, tx, queueID, f.From, f.To)
		if err != nil {
			return err
		}
		f.Decided = t.Count
		if t.Count > 0 {
			p50, p90 := t.P50.Round(time.Millisecond), t.P90.Round(time.Millisecond)
			f.DecisionP50, f.DecisionP90 = &p50, &p90
		}
	}
	return nil
}

// readAgentsExact takes each agent's percentiles over the current window's packages exactly, as
// readExact takes the window's: times to accept and to resolution over the packages whose accept
// stands with them, and the median edit distance of their replies to a draft.
func readAgentsExact(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
	byID := map[int64]*AgentFigures{}
	for i := range s.Agents {
		byID[s.Agents[i].UserID] = &s.Agents[i]
	}
	rows, err := tx.Query(ctx, `
		SELECT h.assignee_id,
			percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY extract(epoch FROM h.accepted_at - h.created_at)),
			percentile_cont(ARRAY[0.5, 0.9]) WITHIN GROUP (ORDER BY extract(epoch FROM h.closed_at - h.created_at))
				FILTER (WHERE h.status = 'resolved')
		FROM handoffs h
		WHERE h.queue_id = ANY($1) AND h.created_at >= $2 AND h.created_at < $3 AND h.accepted_at IS NOT NULL AND h.assignee_id IS NOT NULL
		GROUP BY 1`, q.ids, s.Current.From, s.Current.To)
	if err != nil {
		return err
	}
	var id int64
	var accept, resolve []*float64
	if _, err := pgx.ForEachRow(rows, []any{&id, &accept, &resolve}, func() error {
		if a := byID[id]; a != nil {
			a.AcceptP50, a.AcceptP90 = seconds(accept, 0), seconds(accept, 1)
			a.ResolveP50, a.ResolveP90 = seconds(resolve, 0), seconds(resolve, 1)
		}
		return nil
	}); err != nil {
		return err
	}
	rows, err = tx.Query(ctx, `
		SELECT e.editor_id, percentile_cont(0.5) WITHIN GROUP (ORDER BY e.edit_distance_chars)
		FROM handoffs h CROSS JOIN LATERAL (SELECT e.editor_id, e.edit_distance_chars FROM evals e
			WHERE e.handoff_id = h.id AND e.kind = 'reply' AND e.draft <> '' OFFSET 0) e
		WHERE h.queue_id = ANY($1) AND h.created_at >= $2 AND h.created_at < $3
		GROUP BY 1`, q.ids, s.Current.From, s.Current.To)
	if err != nil {
		return err
	}
	var median float64
	_, err = pgx.ForEachRow(rows, []any{&id, &median}, func() error {
		if a := byID[id]; a != nil {
			m := median
			a.EditP50 = &m
		}
		return nil
	})
	return err
}

// readAgents names the agents and puts them in order of name.
func readAgents(ctx context.Context, tx pgx.Tx, s *Stats) error {
	ids := make([]int64, len(s.Agents))
	for i, a := range s.Agents {
		ids[i] = a.UserID
	}
	rows, err := tx.Query(ctx, `SELECT id, display_name, email FROM users WHERE id = ANY($1)`, ids)
	if err != nil {
		return err
	}
	type named struct{ name, email string }
	names := map[int64]named{}
	var id int64
	var n named
	if _, err := pgx.ForEachRow(rows, []any{&id, &n.name, &n.email}, func() error {
		names[id] = n
		return nil
	}); err != nil {
		return err
	}
	for i := range s.Agents {
		a := &s.Agents[i]
		a.Name, a.Email = names[a.UserID].name, names[a.UserID].email
	}
	slices.SortFunc(s.Agents, func(a, b AgentFigures) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return cmp.Compare(a.UserID, b.UserID)
	})
	return nil
}
