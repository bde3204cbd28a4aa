package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/dashboard"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/views"
)

func (s *Server) rosterView(ctx context.Context) (views.RosterView, error) {
	r, err := s.queues.Roster(ctx)
	if err != nil {
		return views.RosterView{}, err
	}
	var v views.RosterView
	now := time.Now()
	for _, q := range r.Queues {
		h := views.QueueHealth{Name: q.Name, Waiting: q.Waiting, Reserved: q.Reserved, Accepted: q.Accepted, AgentsOnline: q.AgentsOnline}
		if q.OldestWait != nil {
			h.OldestWait = now.Sub(*q.OldestWait)
			h.OverSLA = h.OldestWait > q.SLA
		}
		v.Queues = append(v.Queues, h)
	}
	for _, a := range r.Agents {
		load := views.AgentLoad{Name: a.Name, Role: a.Role, Status: a.Status, Holding: a.Holding,
			Capacity: a.Capacity, Queues: strings.Join(a.Queues, ", "), Ringing: a.Ringing,
			Rings: ringsOf(a)}
		if a.Since != nil {
			load.For = now.Sub(*a.Since)
		}
		v.Agents = append(v.Agents, load)
	}
	return v, nil
}

// dashboardFilter reads the dashboard's query parameters: with the prefix "dashboard_" as the
// socket receives them, without it as the page does.
func dashboardFilter(params url.Values, prefix string) (dashboard.Filter, error) {
	w, err := dashboard.ParseWindow(params.Get(prefix + "window"))
	if err != nil {
		return dashboard.Filter{}, err
	}
	return dashboard.Filter{Queue: params.Get(prefix + "queue"), Window: w}, nil
}

// dashboardQuery is the filter as the page's query string, which the socket is opened with.
func dashboardQuery(f dashboard.Filter) string {
	q := url.Values{"window": {f.Window.Name}}
	if f.Queue != "" {
		q.Set("queue", f.Queue)
	}
	return q.Encode()
}

func (s *Server) handleDashboard(c echo.Context) error {
	ctx := c.Request().Context()
	f, err := dashboardFilter(c.QueryParams(), "")
	if err != nil {
		return err
	}
	figures, err := s.dashboardFigures(ctx, f)
	if err != nil {
		return err
	}
	roster, err := s.rosterView(ctx)
	if err != nil {
		return err
	}
	v := views.DashboardView{Viewer: *viewer(c), Queue: f.Queue, Window: f.Window.Name, Figures: figures, Roster: roster,
		Live: views.LiveConfig{Roster: true, Dashboard: dashboardQuery(f), Mark: string(s.hub.Mark())}}
	for _, w := range dashboard.Windows() {
		v.Windows = append(v.Windows, w.Name)
	}
	for _, q := range roster.Queues {
		v.Queues = append(v.Queues, q.Name)
	}
	return s.render(c, http.StatusOK, views.DashboardPage(v))
}

// dashboardFigures reads the figures as of now and lays them out for the page.
func (s *Server) dashboardFigures(ctx context.Context, f dashboard.Filter) (views.DashboardFigures, error) {
	f.Now = time.Now()
	st, err := dashboard.Read(ctx, s.db, f)
	if err != nil {
		return views.DashboardFigures{}, err
	}
	return dashboardFiguresOf(st), nil
}

func dashboardFiguresOf(st dashboard.Stats) views.DashboardFigures {
	cur, prev := st.Current, st.Previous
	v := views.DashboardFigures{Scope: "All queues", Window: st.Window.Name,
		Current: periodText(cur.Period), Previous: periodText(prev.Period)}
	if st.Queue != "" {
		v.Scope = "Queue " + st.Queue
	}
	both := func(id, name, definition string, figure func(dashboard.Figures) string) {
		v.Rows = append(v.Rows, views.FigureRow{ID: id, Name: name, Current: figure(cur), Previous: figure(prev), Definition: definition})
	}
	both("in", "Packages in", "Packages that bots handed to this desk in the window (by their time of intake), whatever became of them.",
		func(f dashboard.Figures) string { return strconv.Itoa(f.In) })
	both("accept", "Time to accept, p50 / p90", "From intake to the accept that stands (after a rejection or a transfer, the later one), over the window's packages with one; percentile_cont, which interpolates between the two nearest durations. Past 20,000 packages in the two windows, estimated from hourly histograms: within 19% of that value.",
		func(f dashboard.Figures) string { return pair(f.AcceptP50, f.AcceptP90, f.Accepted) })
	both("resolution", "Time to resolution, p50 / p90", "From intake to the Resolve action, over the window's resolved packages; returns, expiries and cancels are not resolutions.",
		func(f dashboard.Figures) string { return pair(f.ResolveP50, f.ResolveP90, f.Resolved) })
	both("repeat", "Repeat contacts within 7 days", "Packages in whose contact (the bot's contact id, across all queues and bots) had another package resolved or returned to the bot within the 7 days before this one arrived (exactly 7 days counts), over packages in. Intake decides it as the package arrives; the queue card's repeat badge is the same fact.",
		func(f dashboard.Figures) string { return rate(f.Repeats, f.In) })
	both("reject", "Reject rate", "Packages in that an agent rejected at least once, over packages in.",
		func(f dashboard.Figures) string { return rate(f.Rejected, f.In) })
	both("return", "Return-to-bot rate", "Packages in that an agent returned to the bot, over packages in; by reason below.",
		func(f dashboard.Figures) string { return rate(f.Returned, f.In) })
	both("expiry", "Expiry rate", "Packages in that expired before an agent took them, over packages in.",
		func(f dashboard.Figures) string { return rate(f.Expired, f.In) })
	both("cancel", "Cancel rate", "Packages in that their bot canceled, over packages in.",
		func(f dashboard.Figures) string { return rate(f.Canceled, f.In) })
	both("as-is", "Drafts sent as is", "Replies sent in the window to a package that carried a bot's draft, in the queue the package was in then, whose text was the draft unchanged, over those replies; replies written from scratch do not count.",
		func(f dashboard.Figures) string { return rate(f.AsIs, f.Drafts) })
	both("decision", "Approval time to decision, p50 / p90", "From a refund approval's request to its grant or denial, over the requests decided in the window (by the time of the decision), in the queue the package was in when it was asked for; expired and withdrawn requests have no decision.",
		func(f dashboard.Figures) string { return pair(f.DecisionP50, f.DecisionP90, f.Decided) })
	v.Triggers = shares(cur.ByTrigger, prev.ByTrigger, cur.In)
	v.Sources = shares(cur.BySource, prev.BySource, cur.In)
	v.Returns = shares(cur.ReturnedBy, prev.ReturnedBy, cur.Returned)

	in := make([]*float64, len(st.Series))
	res := make([]*float64, len(st.Series))
	var most, total int
	for i, b := range st.Series {
		n := float64(b.In)
		in[i] = &n
		most, total = max(most, b.In), total+b.In
		if b.ResolveP50 != nil {
			m := b.ResolveP50.Minutes()
			res[i] = &m
		}
	}
	unit := "hour"
	if st.Window.Bucket >= 24*time.Hour {
		unit = "day"
	}
	v.In = views.NewSparkline(in, fmt.Sprintf("%d packages in over %d %ss, at most %d in one %s.", total, len(st.Series), unit, most, unit))
	v.Resolution = views.NewSparkline(res, fmt.Sprintf("Median time to resolution per %s; over the window %s.", unit, duration(cur.ResolveP50)))
	labels := make([]string, len(st.Queues))
	values := make([]int, len(st.Queues))
	notes := make([]string, len(st.Queues))
	for i, q := range st.Queues {
		labels[i], values[i] = q.Queue, q.In
		notes[i] = strconv.Itoa(q.Repeats) + " repeat"
	}
	v.QueueBars = views.NewBars(labels, values, notes)
	return v
}

func periodText(p dashboard.Period) string {
	return p.From.UTC().Format("Jan 2 15:04") + " – " + p.To.UTC().Format("Jan 2 15:04") + " UTC"
}

func pair(p50, p90 *time.Duration, n int) string {
	if p50 == nil {
		return "—"
	}
	return fmt.Sprintf("%s / %s (%d)", duration(p50), duration(p90), n)
}

// duration shows a time to accept or resolve to the second under an hour.
func duration(d *time.Duration) string {
	if d == nil {
		return "—"
	}
	if *d < time.Hour {
		return d.Round(time.Second).String()
	}
	return views.FormatAge(*d)
}

func rate(n, of int) string {
	if of == 0 {
		return "—"
	}
	return fmt.Sprintf("%.1f%% (%d of %d)", float64(n)*100/float64(of), n, of)
}

func shares(cur, prev []dashboard.Count, whole int) []views.ShareRow {
	before := map[string]int{}
	for _, c := range prev {
		before[c.Value] = c.N
	}
	rows := make([]views.ShareRow, 0, len(cur))
	seen := map[string]bool{}
	for _, c := range cur {
		seen[c.Value] = true
		rows = append(rows, views.ShareRow{Value: c.Value, N: strconv.Itoa(c.N), Percent: percent(float64(c.N) / float64(max(1, whole))),
			Previous: strconv.Itoa(before[c.Value])})
	}
	for _, c := range prev {
		if !seen[c.Value] {
			rows = append(rows, views.ShareRow{Value: c.Value, N: "0", Percent: "0%", Previous: strconv.Itoa(c.N)})
		}
	}
	return rows
}

// ringsOf says how an agent's warm rings of the last day went, for the roster.
func ringsOf(a queue.AgentLoad) string {
	if a.Rings == 0 {
		return ""
	}
	s := fmt.Sprintf("%d rings, %d accepted", a.Rings, a.RingsAccepted)
	if a.Rings == 1 {
		s = fmt.Sprintf("1 ring, %d accepted", a.RingsAccepted)
	}
	if a.LastRing != "" {
		s += ", last " + strings.ReplaceAll(a.LastRing, "_", " ")
	}
	return s
}
