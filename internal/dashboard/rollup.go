package dashboard

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// The rollup: dashboard_hours holds, per queue and hour of arrival, what the figures count of
// the packages that arrived then, and histograms of their times, so that a window of all queues
// over 30 days sums 11,520 rows instead of scanning a million packages (docs/metrics.md, "Speed").

// binsPerDoubling is the histograms' resolution: bin k >= 1 holds durations in
// [2^((k-1)/4), 2^(k/4)) seconds, bin 0 those under a second. An estimated percentile is then
// within 2^(1/4) - 1 (18.9%) of percentile_cont's value, or within a second under a second
// (estimate).
const binsPerDoubling = 4

// lastBin holds everything from 2^(87/4) s (about 40 days) on; no package waits that long.
const lastBin = 88

// binOf is the histogram bin of a duration in seconds.
func binOf(seconds float64) int {
	if seconds < 1 {
		return 0
	}
	return min(int(math.Floor(binsPerDoubling*math.Log2(seconds)))+1, lastBin)
}

// binEdges are the bounds [lo, hi) of bin k in seconds.
func binEdges(k int) (lo, hi float64) {
	if k == 0 {
		return 0, 1
	}
	return math.Exp2(float64(k-1) / binsPerDoubling), math.Exp2(float64(k) / binsPerDoubling)
}

// histogram counts durations per bin; trailing empty bins are left off.
type histogram []int32

func (h *histogram) add(seconds float64) {
	k := binOf(seconds)
	for len(*h) <= k {
		*h = append(*h, 0)
	}
	(*h)[k]++
}

func (h *histogram) merge(o histogram) {
	for len(*h) < len(o) {
		*h = append(*h, 0)
	}
	for k, n := range o {
		(*h)[k] += n
	}
}

// estimate is percentile p as percentile_cont takes it (between the durations at 0-based
// positions floor(p(n-1)) and the next), with each duration placed evenly within its bin: the
// i-th of a bin's c durations at lo + (i+½)/c of its width. Each placed duration lies in the
// same bin as the real one, so it is off by less than the bin's width, which is under 18.9% of
// any duration in the bin; the interpolation between two such keeps that bound relative to the
// exact value. nil when the histogram is empty.
func (h histogram) estimate(p float64) *time.Duration {
	var n int
	for _, c := range h {
		n += int(c)
	}
	if n == 0 {
		return nil
	}
	t := p * float64(n-1)
	j := int(math.Floor(t))
	a, b := h.placed(j), h.placed(min(j+1, n-1))
	s := a + (t-float64(j))*(b-a)
	d := time.Duration(s * float64(time.Second)).Round(time.Millisecond)
	return &d
}

// placed is the estimate of the duration at 0-based position i.
func (h histogram) placed(i int) float64 {
	before := 0
	for k, c := range h {
		if i < before+int(c) {
			lo, hi := binEdges(k)
			return lo + (float64(i-before)+0.5)/float64(c)*(hi-lo)
		}
		before += int(c)
	}
	return 0
}

// hour is one queue's packages that arrived in one hour, with the replies sent to them.
type hour struct {
	Hour                                                          time.Time
	Queue                                                         int64
	In, Accepted, Resolved, Rejected, Returned, Expired, Canceled int
	Repeats                                                       int
	ByTrigger, BySource, ReturnedBy                               map[string]int
	AcceptBins, ResolveBins                                       histogram
	// Drafts are the replies to the packages that carried a bot's draft, AsIs those sent
	// unchanged. Replied are the packages that got a reply, ReplyBins the times to the first.
	Drafts, AsIs, Replied int
	ReplyBins             histogram
	// Agents are the figures of each desk user (by id) who holds one of the hour's packages with an
	// accept standing or sent a reply to one.
	Agents map[int64]*agentHour
}

// agentHour is one agent's part of an hour: the packages whose accept stands with them (Handled),
// their times to accept and, of those resolved, to resolution; the replies they sent, of them
// those to a draft and those sent as is, and the edit distances (in characters) of those to a
// draft, in bins as durations are.
type agentHour struct {
	Handled, Resolved, Replies, Drafts, AsIs int
	AcceptBins, ResolveBins, EditBins        histogram
}

// The rollup stores an hour's agents as two arrays, agents (their ids) and agent_figures (their
// figures one after the other, in the same order), which PostgreSQL and pgx read and write as
// binary integers: an hour of a busy queue holds dozens of agents, and a jsonb object of them
// was read and written as text at every refresh (4 s to write a 100,000-package desk's rollup
// instead of 0.3). An agent's figures are Handled, Resolved, Replies, Drafts and AsIs, then each
// histogram as its first non-zero bin, its length from there, and its counts: an agent's hour
// holds a few durations, whose bins lie close together.

// packAgents lays out an hour's agents for the rollup's columns.
func packAgents(agents map[int64]*agentHour) (ids []int64, figures []int32) {
	ids = make([]int64, 0, len(agents))
	for id := range agents {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	figures = []int32{} // an hour without agents is an empty array, not a null
	for _, id := range ids {
		a := agents[id]
		figures = append(figures, int32(a.Handled), int32(a.Resolved), int32(a.Replies), int32(a.Drafts), int32(a.AsIs)) //nolint:gosec // G115: one agent's packages and replies in one hour
		for _, h := range []histogram{a.AcceptBins, a.ResolveBins, a.EditBins} {
			first := slices.IndexFunc(h, func(n int32) bool { return n != 0 })
			if first < 0 {
				figures = append(figures, 0, 0)
				continue
			}
			figures = append(figures, int32(first), int32(len(h)-first)) //nolint:gosec // G115: a histogram has a few dozen bins
			figures = append(figures, h[first:]...)
		}
	}
	return ids, figures
}

// unpackAgents reads an hour's agents back from the rollup's columns.
func unpackAgents(ids []int64, figures []int32) (map[int64]*agentHour, error) {
	agents := make(map[int64]*agentHour, len(ids))
	next := func(n int) ([]int32, error) {
		if len(figures) < n {
			return nil, fmt.Errorf("dashboard: the rollup's agent figures end early")
		}
		v := figures[:n]
		figures = figures[n:]
		return v, nil
	}
	for _, id := range ids {
		counts, err := next(5)
		if err != nil {
			return nil, err
		}
		a := &agentHour{Handled: int(counts[0]), Resolved: int(counts[1]), Replies: int(counts[2]), Drafts: int(counts[3]), AsIs: int(counts[4])}
		for _, h := range []*histogram{&a.AcceptBins, &a.ResolveBins, &a.EditBins} {
			span, err := next(2)
			if err != nil {
				return nil, err
			}
			bins, err := next(int(span[1]))
			if err != nil {
				return nil, err
			}
			*h = make(histogram, int(span[0])+len(bins))
			copy((*h)[span[0]:], bins)
		}
		agents[id] = a
	}
	if len(figures) != 0 {
		return nil, fmt.Errorf("dashboard: the rollup's agent figures hold %d numbers more than its agents", len(figures))
	}
	return agents, nil
}

func (a *agentHour) add(o *agentHour) {
	a.Handled += o.Handled
	a.Resolved += o.Resolved
	a.Replies += o.Replies
	a.Drafts += o.Drafts
	a.AsIs += o.AsIs
	a.AcceptBins.merge(o.AcceptBins)
	a.ResolveBins.merge(o.ResolveBins)
	a.EditBins.merge(o.EditBins)
}

// agent is the part of the hour of the user with id.
func (h *hour) agent(id int64) *agentHour {
	a := h.Agents[id]
	if a == nil {
		a = &agentHour{AcceptBins: histogram{}, ResolveBins: histogram{}, EditBins: histogram{}}
		h.Agents[id] = a
	}
	return a
}

type hourKey struct {
	hour  time.Time
	queue int64
}

func newHour(k hourKey) *hour {
	return &hour{Hour: k.hour, Queue: k.queue, ByTrigger: map[string]int{}, BySource: map[string]int{}, ReturnedBy: map[string]int{},
		AcceptBins: histogram{}, ResolveBins: histogram{}, ReplyBins: histogram{}, Agents: map[int64]*agentHour{}}
}

// hourOf cuts time at the hour as an absolute instant (UTC hours), whatever the session's zone.
func hourOf(t time.Time) time.Time { return t.Truncate(time.Hour).UTC() }

// spans are the stretches of time [from, to) whose hours are computed.
type spans struct{ from, to []time.Time }

// aggregate computes the hours of the packages of queues ids that arrived in spans, with the
// replies sent to them, from handoffs and evals: Refresh stores them, Read computes the hours the
// rollup does not hold yet the same way. The definitions are those of docs/metrics.md: a package's
// status and times as they stand now, in the queue it is in now.
func aggregate(ctx context.Context, db DB, ids []int64, in spans) (map[hourKey]*hour, error) {
	hours := map[hourKey]*hour{}
	get := func(k hourKey) *hour {
		h := hours[k]
		if h == nil {
			h = newHour(k)
			hours[k] = h
		}
		return h
	}
	rows, err := db.Query(ctx, `
		SELECT h.id, h.queue_id, h.created_at, h.status, extract(epoch FROM h.accepted_at - h.created_at),
			extract(epoch FROM h.closed_at - h.created_at), h.rejections > 0, coalesce(h.outcome, ''), coalesce(h.trigger, ''),
			coalesce(h.source_agent, ''), h.repeat_contact, h.assignee_id
		FROM unnest($2::timestamptz[], $3::timestamptz[]) AS s(from_, to_)
		JOIN handoffs h ON h.queue_id = ANY($1) AND h.created_at >= s.from_ AND h.created_at < s.to_`, ids, in.from, in.to)
	if err != nil {
		return nil, err
	}
	// The packages read, by id, for their replies: their hour and when they arrived.
	type arrived struct {
		key hourKey
		at  time.Time
	}
	packages := map[int64]arrived{}
	var id, queueID int64
	var created time.Time
	var status, outcome, trigger, source string
	var accept, resolve *float64
	var rejected, repeat bool
	var holder *int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &queueID, &created, &status, &accept, &resolve, &rejected, &outcome, &trigger, &source, &repeat, &holder}, func() error {
		k := hourKey{hourOf(created), queueID}
		packages[id] = arrived{k, created}
		h := get(k)
		h.In++
		h.ByTrigger[trigger]++
		h.BySource[source]++
		var a *agentHour
		if accept != nil {
			h.Accepted++
			h.AcceptBins.add(*accept)
			if holder != nil {
				a = h.agent(*holder)
				a.Handled++
				a.AcceptBins.add(*accept)
			}
		}
		switch status {
		case "resolved":
			h.Resolved++
			if resolve != nil {
				h.ResolveBins.add(*resolve)
				if a != nil {
					a.Resolved++
					a.ResolveBins.add(*resolve)
				}
			}
		case "returned_to_bot":
			h.Returned++
			h.ReturnedBy[outcome]++
		case "expired":
			h.Expired++
		case "canceled":
			h.Canceled++
		}
		if rejected {
			h.Rejected++
		}
		if repeat {
			h.Repeats++
		}
		return nil
	}); err != nil {
		return nil, err
	}
	if len(packages) == 0 {
		return hours, nil
	}
	all := make([]int64, 0, len(packages))
	for id := range packages {
		all = append(all, id)
	}
	// Their replies, each package's looked up by its id in evals_reply_times_idx and
	// evals_draft_edits_idx (index-only). OFFSET 0 keeps each lookup the package's own: left to
	// itself, the planner joins a week's packages to every reply of the desk.
	rows, err = db.Query(ctx, `
		SELECT p.id, e.editor_id, e.at
		FROM unnest($1::bigint[]) AS p(id)
		CROSS JOIN LATERAL (SELECT e.editor_id, e.at FROM evals e WHERE e.handoff_id = p.id AND e.kind = 'reply' OFFSET 0) e`, all)
	if err != nil {
		return nil, err
	}
	first := map[int64]time.Time{}
	var editor int64
	var at time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &editor, &at}, func() error {
		get(packages[id].key).agent(editor).Replies++
		if f, ok := first[id]; !ok || at.Before(f) {
			first[id] = at
		}
		return nil
	}); err != nil {
		return nil, err
	}
	replied := make([]int64, 0, len(first))
	for id, at := range first {
		p := packages[id]
		h := get(p.key)
		h.Replied++
		h.ReplyBins.add(max(at.Sub(p.at).Seconds(), 0))
		replied = append(replied, id)
	}
	// Only a package with a reply can have one to its draft.
	rows, err = db.Query(ctx, `
		SELECT p.id, e.editor_id, e.accepted_as_is, e.edit_distance_chars
		FROM unnest($1::bigint[]) AS p(id)
		CROSS JOIN LATERAL (SELECT e.editor_id, e.accepted_as_is, e.edit_distance_chars FROM evals e
			WHERE e.handoff_id = p.id AND e.kind = 'reply' AND e.draft <> '' OFFSET 0) e`, replied)
	if err != nil {
		return nil, err
	}
	var asIs bool
	var chars int
	_, err = pgx.ForEachRow(rows, []any{&id, &editor, &asIs, &chars}, func() error {
		h := get(packages[id].key)
		a := h.agent(editor)
		h.Drafts++
		a.Drafts++
		a.EditBins.add(float64(chars))
		if asIs {
			h.AsIs++
			a.AsIs++
		}
		return nil
	})
	return hours, err
}

// add merges another row of the same queue into this one.
func (h *hour) add(o *hour) {
	h.In += o.In
	h.Accepted += o.Accepted
	h.Resolved += o.Resolved
	h.Rejected += o.Rejected
	h.Returned += o.Returned
	h.Expired += o.Expired
	h.Canceled += o.Canceled
	h.Repeats += o.Repeats
	h.Drafts += o.Drafts
	h.AsIs += o.AsIs
	h.Replied += o.Replied
	h.ReplyBins.merge(o.ReplyBins)
	for k, a := range o.Agents {
		if h.Agents[k] == nil {
			h.Agents[k] = &agentHour{}
		}
		h.Agents[k].add(a)
	}
	for _, m := range [][2]map[string]int{{h.ByTrigger, o.ByTrigger}, {h.BySource, o.BySource}, {h.ReturnedBy, o.ReturnedBy}} {
		for v, n := range m[1] {
			m[0][v] += n
		}
	}
	h.AcceptBins.merge(o.AcceptBins)
	h.ResolveBins.merge(o.ResolveBins)
}

// stored reads the rollup's rows of queues ids of the grain given (1: hours, 24: days) that start
// in spans.
func stored(ctx context.Context, db DB, ids []int64, grain int, in spans) ([]*hour, error) {
	rows, err := db.Query(ctx, `
		SELECT d.hour, d.queue_id, d.packages, d.accepted, d.resolved, d.rejected, d.returned, d.expired, d.canceled, d.repeats,
			d.by_trigger, d.by_source, d.returned_by, d.accept_bins, d.resolve_bins, d.drafts, d.as_is, d.replied, d.reply_bins, d.agents,
			d.agent_figures
		FROM unnest($3::timestamptz[], $4::timestamptz[]) AS s(from_, to_)
		JOIN dashboard_hours d ON d.queue_id = ANY($1) AND d.hours = $2 AND d.hour >= s.from_ AND d.hour < s.to_`,
		ids, grain, in.from, in.to)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*hour, error) {
		var h hour
		var agents []int64
		var figures []int32
		if err := row.Scan(&h.Hour, &h.Queue, &h.In, &h.Accepted, &h.Resolved, &h.Rejected, &h.Returned, &h.Expired, &h.Canceled,
			&h.Repeats, &h.ByTrigger, &h.BySource, &h.ReturnedBy, &h.AcceptBins, &h.ResolveBins, &h.Drafts, &h.AsIs, &h.Replied, &h.ReplyBins,
			&agents, &figures); err != nil {
			return nil, err
		}
		var err error
		h.Agents, err = unpackAgents(agents, figures)
		return &h, err
	})
}
