package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/audit"
	"github.com/handoffdesk/desk/internal/dashboard"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/search"
	"github.com/handoffdesk/desk/views"
)

// handleEvals shows, per source agent, what agents made of its work over ?window=, the
// dashboard's windows read the same way.
func (s *Server) handleEvals(c echo.Context) error {
	w, err := dashboard.ParseWindow(c.QueryParam("window"))
	if err != nil {
		return err
	}
	cur, _ := w.Periods(time.Now())
	span := evals.Span{From: cur.From, To: cur.To, Bucket: evals.ChartBucket(w.Span)}
	stats, err := evals.Stats(c.Request().Context(), s.db, span)
	if err != nil {
		return err
	}
	v := views.EvalsView{Viewer: *viewer(c), Window: w.Name, Period: periodText(cur), Windows: windowLinks("/evals", nil, w.Name)}
	for _, a := range stats {
		v.Agents = append(v.Agents, agentEvalsOf(a, w, span))
	}
	return s.render(c, http.StatusOK, views.EvalsPage(v))
}

// agentEvalsOf lays a source agent's figures out, each count linked to the packages whose records
// it counts: those of the agent's packages made in the span (or in a bucket of it).
func agentEvalsOf(a evals.AgentStats, w dashboard.Window, span evals.Span) views.AgentEvals {
	made := func(from, to time.Time, r search.Record) search.Filter {
		return search.Filter{SourceAgent: a.SourceAgent, Record: r, RecordSince: from, RecordUntil: to}
	}
	drafts := count(a.Drafts, made(span.From, span.To, search.RecordDraft))
	v := views.AgentEvals{
		SourceAgent: a.SourceAgent,
		AsIs:        rate(count(a.AsIs, made(span.From, span.To, search.RecordAsIs)), drafts, a.AsIs, a.Drafts),
		FromScratch: views.Figure{count(a.FromScratch, made(span.From, span.To, search.RecordScratch))},
		Packages:    views.Figure{packagesOf(a.Packages, made(span.From, span.To, search.RecordAny))},
		Median:      views.Figure{text("—")},
	}
	if a.Drafts > 0 {
		v.Median = views.Figure{text(number(a.MedianChars) + " chars, " + number(a.MedianWords) + " words (of "), drafts, text(")")}
	}
	for _, t := range a.Tags {
		f := made(span.From, span.To, search.RecordReply)
		f.Tag = t.Value
		v.Tags = append(v.Tags, views.Share{Value: t.Value, N: views.Figure{count(t.N, f)}, Percent: percent(t.Share)})
	}
	for _, r := range a.Returns {
		f := made(span.From, span.To, search.RecordReturn)
		f.Outcome = r.Value
		v.Returns = append(v.Returns, views.Share{Value: r.Value, N: views.Figure{packagesOf(r.N, f)}, Percent: percent(r.Share)})
	}
	layout := "15:04"
	if span.Bucket >= 24*time.Hour {
		layout = "Jan 2"
	} else if w.Span > 24*time.Hour {
		layout = "Jan 2 15h"
	}
	points := make([]views.TrendPoint, len(a.Points))
	for i, p := range a.Points {
		label := p.Start.UTC().Format(layout)
		points[i] = views.TrendPoint{Label: label, AsIs: p.AsIs, ReturnRate: p.ReturnRate, MedianChars: p.MedianChars}
		row := views.TrendRow{Label: label, AsIs: views.Figure{text("—")}, Median: views.Figure{text("—")}, Returned: views.Figure{text("—")}}
		bucketDrafts := count(p.Drafts, made(p.Start, p.End, search.RecordDraft))
		if p.Drafts > 0 {
			row.AsIs = rate(count(p.AsIsN, made(p.Start, p.End, search.RecordAsIs)), bucketDrafts, p.AsIsN, p.Drafts)
		}
		if p.MedianChars != nil {
			row.Median = views.Figure{text(number(*p.MedianChars) + " chars ("), bucketDrafts, text(")")}
		}
		if p.Packages > 0 {
			row.Returned = rate(packagesOf(p.Returned, made(p.Start, p.End, search.RecordReturn)),
				packagesOf(p.Packages, made(p.Start, p.End, search.RecordAny)), p.Returned, p.Packages)
		}
		v.Points = append(v.Points, row)
	}
	v.Chart = views.NewTrendChart(points, fmt.Sprintf(
		"Over the last %s (UTC, one point per %s): %s of %d drafts sent as is, a median edit distance of %s characters, and %d of %d packages returned to the bot.",
		w.Name, strings.TrimSuffix(span.Bucket.String(), "0m0s"), percent(a.AsIsShare()), a.Drafts, number(a.MedianChars), a.Returned, a.Packages))
	for _, e := range a.Worst {
		v.Worst = append(v.Worst, views.WorstEdit{Href: "/evals/replies/" + strconv.FormatInt(e.ID, 10), HandoffID: e.HandoffID,
			Editor: e.Editor, At: formatTime(&e.At), Chars: e.DistanceChars, Words: e.DistanceWords, Tags: e.Tags})
	}
	return v
}

// handleEvalDiff shows a reply record's draft and final side by side, masked like the package's
// notes for the viewer.
func (s *Server) handleEvalDiff(c echo.Context) error {
	ctx := c.Request().Context()
	id, err := strconv.ParseInt(c.Param("id"), 10, 64)
	if err != nil || id <= 0 {
		return desk.Errorf(desk.NotFound, "no reply record %q", c.Param("id"))
	}
	r, err := evals.ReplyRecord(ctx, s.db, id)
	if err != nil {
		return err
	}
	user := currentUser(c)
	item, _, err := s.visibleItem(ctx, user, r.HandoffID)
	if err != nil {
		return err
	}
	vis := visibility(user, item)
	draft, final := item.Package.MaskNoteFor(vis, r.Draft), item.Package.MaskNoteFor(vis, r.Final)
	v := views.EvalDiffView{Viewer: *viewer(c), HandoffID: r.HandoffID, SourceAgent: r.SourceAgent, Editor: r.Editor,
		At: formatTime(&r.At), Chars: r.DistanceChars, Words: r.DistanceWords, Tags: r.Tags,
		Masked: draft != r.Draft || final != r.Final}
	// A reply that names the customer, shown unmasked, is a read of their personal data.
	var shown audit.Shown
	if masked := item.Package.NoteMaskFor(handoff.Visibility{PIIEntityKeys: item.PIIEntityKeys}); vis.PII &&
		(masked(r.Draft) != r.Draft || masked(r.Final) != r.Final) {
		shown.Add(item.ID, []string{"reply"})
	}
	if err := audit.Record(ctx, s.db, user.ID, audit.ViaPage, shown); err != nil {
		return err
	}
	for _, seg := range evals.Compare(draft, final).Words {
		switch seg.Op {
		case evals.Equal:
			v.Draft = append(v.Draft, views.DiffPart{Text: seg.Text})
			v.Final = append(v.Final, views.DiffPart{Text: seg.Text})
		case evals.Delete:
			v.Draft = append(v.Draft, views.DiffPart{Text: seg.Text, Changed: true})
		case evals.Insert:
			v.Final = append(v.Final, views.DiffPart{Text: seg.Text, Changed: true})
		}
	}
	return s.render(c, http.StatusOK, views.EvalDiffPage(v))
}

func percent(share float64) string { return strconv.FormatFloat(share*100, 'f', 0, 64) + "%" }

func number(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// handleEvalsExport streams the eval records the query selects as JSON lines, masked for the
// exporting user's role (or redacted, with redact=true).
func (s *Server) handleEvalsExport(c echo.Context) error {
	f, err := evals.ParseFilter(c.QueryParams())
	if err != nil {
		return err
	}
	w := &startOnWrite{c: c}
	user := currentUser(c)
	var shown audit.Shown
	n, err := evals.Export(c.Request().Context(), s.db, user.Role, f, w, shown.Add)
	// One pii_views row for the export, written when it ends, also when it is cut short: what was
	// sent was shown.
	if recErr := audit.Record(context.WithoutCancel(c.Request().Context()), s.db, user.ID, audit.ViaExport, shown); recErr != nil {
		s.logger.Error("record the evals export's PII reads", "err", recErr)
	}
	if err != nil && !w.started {
		return err
	}
	if err != nil {
		// The 200 and some lines are gone: a clean end would pass the cut export for a whole one.
		// A client that left is no failure of the desk's.
		switch ctx := c.Request().Context(); {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			s.logger.Warn("export cut at REQUEST_TIMEOUT: export by since/until or with web evals export", "lines", n)
		case ctx.Err() == nil:
			s.logger.Error("export cut short", "lines", n, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	if !w.started {
		w.start()
	}
	return nil
}

// startOnWrite sends the export's headers with its first line, so that an error found before
// any line (a queue that does not exist) can still be answered with its own status.
type startOnWrite struct {
	c       echo.Context
	started bool
}

func (w *startOnWrite) start() {
	w.started = true
	h := w.c.Response().Header()
	h.Set(echo.HeaderContentType, "application/x-ndjson; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.c.Response().WriteHeader(http.StatusOK)
}

func (w *startOnWrite) Write(p []byte) (int, error) {
	if !w.started {
		w.start()
	}
	return w.c.Response().Write(p)
}
