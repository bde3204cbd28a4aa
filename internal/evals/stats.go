package evals

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/desk"
)

// DB is what the read queries need: a pool, a connection or a transaction.
type DB interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

// Span is the stretch of time the evals page reads, [From, To), cut into buckets of Bucket for
// its charts (the last one may be shorter). The page takes its spans from the dashboard's windows,
// so that both pages read the same window the same way.
type Span struct {
	From, To time.Time
	Bucket   time.Duration
}

// ChartBucket is the evals charts' bucket for a window of span: about as many points as a chart
// shows without crowding a narrow screen.
func ChartBucket(span time.Duration) time.Duration {
	switch {
	case span <= 24*time.Hour:
		return time.Hour
	case span <= 7*24*time.Hour:
		return 6 * time.Hour
	}
	return 24 * time.Hour
}

// Count is how often a value (a tag, a return reason) came up, and its share of a whole.
type Count struct {
	Value string
	N     int
	Share float64
}

// Point is one bucket of an agent's chart, [Start, End). AsIs and ReturnRate are shares in
// [0, 1], nil when the bucket had nothing to share out (no drafts, no packages), over Drafts and
// Packages; MedianChars is nil without drafts.
type Point struct {
	Start, End         time.Time
	Drafts, AsIsN      int
	Packages, Returned int
	AsIs               *float64
	MedianChars        *float64
	ReturnRate         *float64
}

// WorstEdit is a reply whose final text lies far from the bot's draft.
type WorstEdit struct {
	ID                           int64
	HandoffID                    string // the package's public id
	Editor                       string
	At                           time.Time
	DistanceChars, DistanceWords int
	Tags                         []string
}

// AgentStats is what agents made of one source agent's (bot profile's) work over a window.
type AgentStats struct {
	SourceAgent string
	// Drafts are the replies sent against a bot's draft (not those written from scratch); AsIs of
	// them went out unchanged.
	Drafts, AsIs, FromScratch int
	MedianChars, MedianWords  float64
	// Packages counts the packages with any record in the window; Returned those returned to
	// the bot, and Returns the return reasons with their share of Packages.
	Packages, Returned int
	Returns            []Count
	// Tags are the tags agents gave, most common first, with their share of the replies that were
	// not the draft as is.
	Tags   []Count
	Points []Point
	Worst  []WorstEdit
}

// AsIsShare is the share of drafts sent unchanged, 0 without drafts.
func (a AgentStats) AsIsShare() float64 {
	if a.Drafts == 0 {
		return 0
	}
	return float64(a.AsIs) / float64(a.Drafts)
}

// worstPerAgent is how many of an agent's largest edits the page lists.
const worstPerAgent = 5

// Stats reads, per source agent, what happened to its work in the span: the records made in it.
func Stats(ctx context.Context, db DB, w Span) ([]AgentStats, error) {
	since, until := w.From, w.To
	byAgent := map[string]*AgentStats{}
	agent := func(name string) *AgentStats {
		a, ok := byAgent[name]
		if !ok {
			a = &AgentStats{SourceAgent: name}
			byAgent[name] = a
		}
		return a
	}

	rows, err := db.Query(ctx, `
		SELECT source_agent,
			count(*) FILTER (WHERE kind = 'reply' AND draft <> ''),
			count(*) FILTER (WHERE kind = 'reply' AND draft <> '' AND accepted_as_is),
			count(*) FILTER (WHERE kind = 'reply' AND draft = ''),
			coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY edit_distance_chars) FILTER (WHERE kind = 'reply' AND draft <> ''), 0),
			coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY edit_distance_words) FILTER (WHERE kind = 'reply' AND draft <> ''), 0),
			count(DISTINCT handoff_id),
			count(DISTINCT handoff_id) FILTER (WHERE kind = 'return_to_bot')
		FROM evals WHERE at >= $1 AND at < $2
		GROUP BY source_agent`, since, until)
	if err != nil {
		return nil, err
	}
	var name string
	var drafts, asIs, scratch, packages, returned int
	var chars, words float64
	if _, err := pgx.ForEachRow(rows, []any{&name, &drafts, &asIs, &scratch, &chars, &words, &packages, &returned}, func() error {
		a := agent(name)
		a.Drafts, a.AsIs, a.FromScratch, a.MedianChars, a.MedianWords, a.Packages, a.Returned = drafts, asIs, scratch, chars, words, packages, returned
		return nil
	}); err != nil {
		return nil, err
	}

	var value string
	var n int
	rows, err = db.Query(ctx, `
		SELECT source_agent, tag, count(*)
		FROM evals, unnest(tags) AS tag
		WHERE kind = 'reply' AND at >= $1 AND at < $2
		GROUP BY source_agent, tag ORDER BY source_agent, count(*) DESC, tag`, since, until)
	if err != nil {
		return nil, err
	}
	if _, err := pgx.ForEachRow(rows, []any{&name, &value, &n}, func() error {
		a := agent(name)
		a.Tags = append(a.Tags, Count{Value: value, N: n, Share: share(n, a.Drafts-a.AsIs+a.FromScratch)})
		return nil
	}); err != nil {
		return nil, err
	}

	rows, err = db.Query(ctx, `
		SELECT source_agent, code, count(DISTINCT handoff_id)
		FROM evals WHERE kind = 'return_to_bot' AND at >= $1 AND at < $2
		GROUP BY source_agent, code ORDER BY source_agent, count(DISTINCT handoff_id) DESC, code`, since, until)
	if err != nil {
		return nil, err
	}
	if _, err := pgx.ForEachRow(rows, []any{&name, &value, &n}, func() error {
		a := agent(name)
		a.Returns = append(a.Returns, Count{Value: value, N: n, Share: share(n, a.Packages)})
		return nil
	}); err != nil {
		return nil, err
	}

	if err := points(ctx, db, w, since, until, agent); err != nil {
		return nil, err
	}
	if err := worst(ctx, db, since, until, agent); err != nil {
		return nil, err
	}

	out := make([]AgentStats, 0, len(byAgent))
	for _, a := range byAgent {
		out = append(out, *a)
	}
	slices.SortFunc(out, func(a, b AgentStats) int { return strings.Compare(a.SourceAgent, b.SourceAgent) })
	return out, nil
}

// points fills each agent's chart: one point per bucket of the window, empty buckets included,
// so that the chart's x axis is time and not the buckets that happen to have records.
func points(ctx context.Context, db DB, w Span, since, until time.Time, agent func(string) *AgentStats) error {
	rows, err := db.Query(ctx, `
		SELECT source_agent, floor(extract(epoch FROM at - $1) / $3)::int,
			count(*) FILTER (WHERE kind = 'reply' AND draft <> ''),
			count(*) FILTER (WHERE kind = 'reply' AND draft <> '' AND accepted_as_is),
			percentile_cont(0.5) WITHIN GROUP (ORDER BY edit_distance_chars) FILTER (WHERE kind = 'reply' AND draft <> ''),
			count(DISTINCT handoff_id),
			count(DISTINCT handoff_id) FILTER (WHERE kind = 'return_to_bot')
		FROM evals WHERE at >= $1 AND at < $2
		GROUP BY 1, 2`, since, until, w.Bucket.Seconds())
	if err != nil {
		return err
	}
	buckets := int((until.Sub(since) + w.Bucket - 1) / w.Bucket)
	var name string
	var i, drafts, asIs, packages, returned int
	var median *float64
	_, err = pgx.ForEachRow(rows, []any{&name, &i, &drafts, &asIs, &median, &packages, &returned}, func() error {
		a := agent(name)
		if a.Points == nil {
			a.Points = make([]Point, buckets)
			for j := range a.Points {
				a.Points[j].Start = since.Add(time.Duration(j) * w.Bucket)
				a.Points[j].End = a.Points[j].Start.Add(w.Bucket)
				if a.Points[j].End.After(until) {
					a.Points[j].End = until
				}
			}
		}
		p := &a.Points[min(max(i, 0), buckets-1)]
		p.Drafts, p.AsIsN, p.MedianChars, p.Packages, p.Returned = drafts, asIs, median, packages, returned
		if drafts > 0 {
			v := share(asIs, drafts)
			p.AsIs = &v
		}
		if packages > 0 {
			v := share(returned, packages)
			p.ReturnRate = &v
		}
		return nil
	})
	return err
}

// worst lists each agent's largest edits of a draft, by character distance.
func worst(ctx context.Context, db DB, since, until time.Time, agent func(string) *AgentStats) error {
	rows, err := db.Query(ctx, `
		SELECT source_agent, id, handoff_id, editor, at, edit_distance_chars, edit_distance_words, tags
		FROM (
			SELECT e.source_agent, e.id, h.handoff_id, u.display_name AS editor, e.at, e.edit_distance_chars,
				e.edit_distance_words, e.tags,
				row_number() OVER (PARTITION BY e.source_agent ORDER BY e.edit_distance_chars DESC, e.id) AS rank
			FROM evals e JOIN handoffs h ON h.id = e.handoff_id JOIN users u ON u.id = e.editor_id
			WHERE e.kind = 'reply' AND e.draft <> '' AND NOT e.accepted_as_is AND e.at >= $1 AND e.at < $2
		) ranked WHERE rank <= $3
		ORDER BY source_agent, rank`, since, until, worstPerAgent)
	if err != nil {
		return err
	}
	var name string
	var e WorstEdit
	_, err = pgx.ForEachRow(rows, []any{&name, &e.ID, &e.HandoffID, &e.Editor, &e.At, &e.DistanceChars, &e.DistanceWords, &e.Tags}, func() error {
		a := agent(name)
		a.Worst = append(a.Worst, e)
		return nil
	})
	return err
}

func share(n, of int) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// RecordedReply is one reply record whole, for the side-by-side diff.
type RecordedReply struct {
	ID            int64
	HandoffID     string // the package's public id
	SourceAgent   string
	Editor        string
	At            time.Time
	Draft, Final  string
	DistanceChars int
	DistanceWords int
	Tags          []string
}

// ReplyRecord reads the reply record id.
func ReplyRecord(ctx context.Context, db DB, id int64) (RecordedReply, error) {
	r := RecordedReply{ID: id}
	err := db.QueryRow(ctx, `
		SELECT h.handoff_id, e.source_agent, u.display_name, e.at, e.draft, e.final, e.edit_distance_chars,
			e.edit_distance_words, e.tags
		FROM evals e JOIN handoffs h ON h.id = e.handoff_id JOIN users u ON u.id = e.editor_id
		WHERE e.id = $1 AND e.kind = 'reply'`, id).
		Scan(&r.HandoffID, &r.SourceAgent, &r.Editor, &r.At, &r.Draft, &r.Final, &r.DistanceChars, &r.DistanceWords, &r.Tags)
	if err == pgx.ErrNoRows {
		return RecordedReply{}, desk.Errorf(desk.NotFound, "no reply record %d", id)
	}
	return r, err
}
