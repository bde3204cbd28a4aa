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

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/csat"
	"github.com/handoffdesk/desk/internal/dashboard"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/search"
	"github.com/handoffdesk/desk/views"
)

// slaWarn is how close to the end of its SLA a waiting package shows on the roster's list: within
// a quarter of the SLA.
const slaWarn = 0.25

// rosterView lays the roster out for the viewer, whose email a take-over posts. The roster is read
// once per change for every supervisor's socket (frames.go); only this layout is theirs.
func rosterView(r queue.Roster, viewer auth.User, now time.Time) views.RosterView {
	yes := true
	var v views.RosterView
	for _, q := range r.Queues {
		status := func(st handoff.Status) string { return packagesLink(search.Filter{Queue: q.Name, Status: st}) }
		h := views.QueueHealth{Name: q.Name, Waiting: q.Waiting, Reserved: q.Reserved, Accepted: q.Accepted, AgentsOnline: q.AgentsOnline,
			WaitingHref: status(handoff.StatusQueued), ReservedHref: status(handoff.StatusReserved),
			WorkedHref: packagesLink(search.Filter{Queue: q.Name, Open: &yes, Accepted: &yes})}
		if q.OldestWait != nil {
			h.OldestWait = now.Sub(*q.OldestWait)
			h.OverSLA = h.OldestWait > q.SLA
		}
		v.Queues = append(v.Queues, h)
	}
	for _, a := range r.Agents {
		load := views.AgentLoad{Name: a.Name, Role: a.Role, Status: a.Status, Holding: a.Holding,
			HoldingHref: packagesLink(search.Filter{Agent: a.Email, Open: &yes}),
			Capacity:    a.Capacity, Queues: strings.Join(a.Queues, ", "), Ringing: a.Ringing,
			Rings: ringsOf(a)}
		if a.Since != nil {
			load.For = now.Sub(*a.Since)
		}
		v.Agents = append(v.Agents, load)
	}
	for _, w := range r.Waiting {
		warn := time.Duration(float64(w.SLA) * slaWarn)
		v.Waiting = append(v.Waiting, views.SLARow{ID: w.PublicID, Queue: w.Queue, Status: w.Status, Due: w.Due(), Warn: warn,
			Shown: w.Due().Sub(now) <= warn})
	}
	no := false
	v.PastHref = packagesLink(search.Filter{SLABreached: &yes, Accepted: &no, Open: &yes})
	for _, h := range r.Held {
		row := views.HeldRow{ID: h.PublicID, Queue: h.Queue, Status: h.Status, Holder: h.Holder}
		if h.Since != nil {
			row.HeldFor = now.Sub(*h.Since)
		}
		if h.HolderID != viewer.ID {
			row.Move.Self = viewer.Email
		}
		for _, m := range r.Assignables[h.QueueID] {
			if m.UserID != h.HolderID {
				row.Move.Members = append(row.Move.Members, views.ReassignMember{Email: m.Email, Name: m.Name, Room: max(0, m.Capacity-m.Holding)})
			}
		}
		v.Held = append(v.Held, row)
	}
	if v.HeldMore = r.HeldCount - len(r.Held); v.HeldMore > 0 {
		v.HeldMoreHref = packagesLink(search.Filter{Status: handoff.StatusAccepted})
	}
	return v
}

// packagesLink is /packages with the filter f: where a count on the dashboard, /evals or the roster
// leads, to exactly the packages it counts.
func packagesLink(f search.Filter) string { return "/packages?" + f.Query().Encode() }

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

// windowLinks are the window control's links to path over each window, with keep's other
// parameters: the control /dashboard and /evals share.
func windowLinks(path string, keep url.Values, current string) []views.WindowLink {
	var links []views.WindowLink
	for _, w := range dashboard.Windows() {
		q := url.Values{}
		for k, v := range keep {
			q[k] = v
		}
		q.Set("window", w.Name)
		links = append(links, views.WindowLink{Name: w.Name, Href: path + "?" + q.Encode(), Current: w.Name == current})
	}
	return links
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
	r, err := s.queues.Roster(ctx)
	if err != nil {
		return err
	}
	roster := rosterView(r, currentUser(c), time.Now())
	keep := url.Values{}
	if f.Queue != "" {
		keep.Set("queue", f.Queue)
	}
	v := views.DashboardView{Viewer: *viewer(c), Queue: f.Queue, Window: f.Window.Name, Figures: figures, Roster: roster,
		Windows: windowLinks("/dashboard", keep, f.Window.Name),
		Live:    views.LiveConfig{Roster: true, Dashboard: dashboardQuery(f), Mark: string(s.hub.Mark())}}
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

// count is n linked to the packages of f: Counts says whether /packages counts n as its packages
// or as the records its record filter selects.
func count(n int, f search.Filter) views.FigurePart {
	counts := "packages"
	if f.Record != "" {
		counts = "records"
	}
	return views.FigurePart{Text: strconv.Itoa(n), Href: packagesLink(f), Counts: counts}
}

// packagesOf is n linked to the packages of f, counted as packages whatever f's record filter:
// a count of the packages that hold such a record (packages that got a reply, packages worked).
func packagesOf(n int, f search.Filter) views.FigurePart {
	p := count(n, f)
	p.Counts = "packages"
	return p
}

func text(s string) views.FigurePart { return views.FigurePart{Text: s} }

// of is f with changes made to a copy.
func of(f search.Filter, change func(*search.Filter)) search.Filter {
	change(&f)
	return f
}

func dashboardFiguresOf(st dashboard.Stats) views.DashboardFigures {
	cur, prev := st.Current, st.Previous
	v := views.DashboardFigures{Scope: "All queues", Window: st.Window.Name,
		Current: periodText(cur.Period), Previous: periodText(prev.Period)}
	if st.Queue != "" {
		v.Scope = "Queue " + st.Queue
	}
	// The packages each figure counts: those that arrived in its period, in the queue chosen.
	in := func(f dashboard.Figures) search.Filter {
		return search.Filter{Queue: st.Queue, Since: f.From, Until: f.To}
	}
	yes := true
	both := func(id, name, definition string, figure func(dashboard.Figures, search.Filter) views.Figure) {
		v.Rows = append(v.Rows, views.FigureRow{ID: id, Name: name, Current: figure(cur, in(cur)), Previous: figure(prev, in(prev)),
			Definition: definition})
	}
	both("in", "Packages in", "Packages that bots handed to this desk in the window (by their time of intake), whatever became of them.",
		func(f dashboard.Figures, p search.Filter) views.Figure { return views.Figure{count(f.In, p)} })
	both("first-reply", "Time to first reply, p50 / p90", "From intake to the first reply an agent sent the customer, over the window's packages that got one (the support world's first reply time); percentile_cont, estimated past 20,000 packages as the times to accept are.",
		func(f dashboard.Figures, p search.Filter) views.Figure {
			return pair(f.ReplyP50, f.ReplyP90, packagesOf(f.Replied, of(p, func(p *search.Filter) { p.Record = search.RecordReply })))
		})
	both("accept", "Time to accept, p50 / p90", "From intake to the accept that stands (after a rejection or a transfer, the later one), over the window's packages with one; percentile_cont, which interpolates between the two nearest durations. Past 20,000 packages in the two windows, estimated from hourly histograms: within 19% of that value.",
		func(f dashboard.Figures, p search.Filter) views.Figure {
			return pair(f.AcceptP50, f.AcceptP90, count(f.Accepted, of(p, func(p *search.Filter) { p.Accepted = &yes })))
		})
	both("resolution", "Time to resolution, p50 / p90", "From intake to the Resolve action, over the window's resolved packages; returns, expiries and cancels are not resolutions.",
		func(f dashboard.Figures, p search.Filter) views.Figure {
			return pair(f.ResolveP50, f.ResolveP90, count(f.Resolved, of(p, func(p *search.Filter) { p.Status = handoff.StatusResolved })))
		})
	both("repeat", "Repeat contacts within 7 days", "Packages in whose contact (the bot's contact id, across all queues and bots) had another package resolved or returned to the bot within the 7 days before this one arrived (exactly 7 days counts), over packages in. Intake decides it as the package arrives; the queue card's repeat badge is the same fact.",
		func(f dashboard.Figures, p search.Filter) views.Figure {
			return rate(count(f.Repeats, of(p, func(p *search.Filter) { p.Repeat = &yes })), count(f.In, p), f.Repeats, f.In)
		})
	both("reject", "Reject rate", "Packages in that an agent rejected at least once, over packages in.",
		func(f dashboard.Figures, p search.Filter) views.Figure {
			return rate(count(f.Rejected, of(p, func(p *search.Filter) { p.Rejected = &yes })), count(f.In, p), f.Rejected, f.In)
		})
	both("return", "Return-to-bot rate", "Packages in that an agent returned to the bot, over packages in; by reason below.",
		func(f dashboard.Figures, p search.Filter) views.Figure {
			return rate(count(f.Returned, of(p, func(p *search.Filter) { p.Status = handoff.StatusReturnedToBot })), count(f.In, p), f.Returned, f.In)
		})
	both("expiry", "Expiry rate", "Packages in that expired before an agent took them, over packages in.",
		func(f dashboard.Figures, p search.Filter) views.Figure {
			return rate(count(f.Expired, of(p, func(p *search.Filter) { p.Status = handoff.StatusExpired })), count(f.In, p), f.Expired, f.In)
		})
	both("cancel", "Cancel rate", "Packages in that their bot canceled, over packages in.",
		func(f dashboard.Figures, p search.Filter) views.Figure {
			return rate(count(f.Canceled, of(p, func(p *search.Filter) { p.Status = handoff.StatusCanceled })), count(f.In, p), f.Canceled, f.In)
		})
	both("as-is", "Drafts sent as is", "Replies sent to the window's packages that carried a bot's draft whose text was the draft unchanged, over those replies; replies written from scratch do not count.",
		func(f dashboard.Figures, p search.Filter) views.Figure {
			return rate(count(f.AsIs, of(p, func(p *search.Filter) { p.Record = search.RecordAsIs })),
				count(f.Drafts, of(p, func(p *search.Filter) { p.Record = search.RecordDraft })), f.AsIs, f.Drafts)
		})
	both("decision", "Approval time to decision, p50 / p90", "From a refund approval's request to its grant or denial, over the requests decided in the window (by the time of the decision), on the packages in the queue now; expired and withdrawn requests have no decision.",
		func(f dashboard.Figures, _ search.Filter) views.Figure {
			decided := search.Filter{Queue: st.Queue, Record: search.RecordDecision, RecordSince: f.From, RecordUntil: f.To}
			return pair(f.DecisionP50, f.DecisionP90, count(f.Decided, decided))
		})
	v.Triggers = shares(cur.ByTrigger, prev.ByTrigger, cur.In, in(cur), in(prev), func(f *search.Filter, value string) { f.Trigger = handoff.Trigger(value) })
	v.Sources = shares(cur.BySource, prev.BySource, cur.In, in(cur), in(prev), func(f *search.Filter, value string) { f.SourceAgent = value })
	v.Returns = shares(cur.ReturnedBy, prev.ReturnedBy, cur.Returned, in(cur), in(prev), func(f *search.Filter, value string) {
		f.Status, f.Outcome = handoff.StatusReturnedToBot, value
	})

	layout := "15:04"
	v.BucketCol = "Hour (UTC)"
	if st.Window.Bucket >= 24*time.Hour {
		v.BucketCol, layout = "Day (UTC)", "Jan 2"
	}
	unit := strings.ToLower(strings.TrimSuffix(v.BucketCol, " (UTC)"))
	ins := make([]*float64, len(st.Series))
	res := make([]*float64, len(st.Series))
	labels := make([]string, len(st.Series))
	var most, total int
	for i, b := range st.Series {
		n := float64(b.In)
		ins[i] = &n
		most, total = max(most, b.In), total+b.In
		if b.ResolveP50 != nil {
			m := b.ResolveP50.Minutes()
			res[i] = &m
		}
		labels[i] = b.From.UTC().Format(layout)
		end := b.From.Add(st.Window.Bucket)
		if end.After(cur.To) {
			end = cur.To
		}
		bucket := search.Filter{Queue: st.Queue, Since: b.From, Until: end}
		resolved := of(bucket, func(f *search.Filter) { f.Status = handoff.StatusResolved })
		row := views.BucketRow{Label: labels[i], In: views.Figure{count(b.In, bucket)},
			Resolution: views.Figure{text(duration(b.ResolveP50) + " ("), count(b.Resolved, resolved), text(")")}}
		v.Buckets = append(v.Buckets, row)
	}
	whole := func(v float64) string { return strconv.FormatFloat(v, 'f', 0, 64) }
	v.In = views.NewSeriesChart(ins, labels, true, whole,
		fmt.Sprintf("%d packages in over %d %ss, at most %d in one %s.", total, len(st.Series), unit, most, unit))
	v.Resolution = views.NewSeriesChart(res, labels, false, func(m float64) string { return strconv.FormatFloat(m, 'f', 1, 64) },
		fmt.Sprintf("Median time to resolution per %s; over the window %s (%d resolved).", unit, duration(cur.ResolveP50), cur.Resolved))
	busiest := 0
	for _, q := range st.Queues {
		busiest = max(busiest, q.In)
	}
	for _, q := range st.Queues {
		queue := search.Filter{Queue: q.Queue, Since: cur.From, Until: cur.To}
		width := 0.0
		if busiest > 0 {
			width = float64(q.In) / float64(busiest) * 100
		}
		v.Queues = append(v.Queues, views.QueueBar{Queue: q.Queue, Width: strconv.FormatFloat(width, 'f', 1, 64),
			In: views.Figure{count(q.In, queue)}, Repeats: views.Figure{count(q.Repeats, of(queue, func(f *search.Filter) { f.Repeat = &yes }))}})
	}
	for _, a := range st.Agents {
		v.Agents = append(v.Agents, agentRowOf(a, in(cur)))
	}
	v.AgentDefinitions = agentDefinitions()
	for _, q := range st.CSATQueues {
		v.CSATQueues = append(v.CSATQueues, csatRowOf(q, of(in(cur), func(f *search.Filter) { f.Queue = q.Queue }),
			of(in(prev), func(f *search.Filter) { f.Queue = q.Queue })))
	}
	for _, a := range st.CSATAgents {
		v.CSATAgents = append(v.CSATAgents, csatRowOf(a, of(in(cur), func(f *search.Filter) { f.Agent = a.Email }),
			of(in(prev), func(f *search.Filter) { f.Agent = a.Email })))
	}
	return v
}

// csatRowOf is a queue's or an agent's verdicts, each sample linked to its packages among cur's
// and prev's.
func csatRowOf(c dashboard.CSAT, cur, prev search.Filter) views.CSATRow {
	verdict := func(v dashboard.Verdicts, p search.Filter, leg csat.Leg) views.Figure {
		p.CSAT = string(leg)
		if v.Mean == nil {
			return views.Figure{text("— ("), count(v.N, p), text(")")}
		}
		return views.Figure{text(strconv.FormatFloat(*v.Mean, 'f', 2, 64) + " ("), count(v.N, p), text(")")}
	}
	name := c.Queue
	if name == "" {
		name = c.Name
	}
	return views.CSATRow{Name: name, Email: c.Email,
		Human: verdict(c.Human[dashboard.Current], cur, csat.Human), PrevHuman: verdict(c.Human[dashboard.Previous], prev, csat.Human),
		Bot: verdict(c.Bot[dashboard.Current], cur, csat.Bot), PrevBot: verdict(c.Bot[dashboard.Previous], prev, csat.Bot)}
}

// agentRowOf is an agent's row, each count linked to its packages among p's.
func agentRowOf(a dashboard.AgentFigures, p search.Filter) views.AgentRow {
	yes := true
	held := of(p, func(f *search.Filter) { f.Agent, f.Accepted = a.Email, &yes })
	sent := func(r search.Record) search.Filter {
		return of(p, func(f *search.Filter) { f.Record, f.RecordBy = r, a.Email })
	}
	edit := views.Figure{text("—")}
	if a.EditP50 != nil {
		edit = views.Figure{text(strconv.FormatFloat(*a.EditP50, 'f', -1, 64) + " chars (")}
		edit = append(edit, count(a.Drafts, sent(search.RecordDraft)), text(")"))
	}
	return views.AgentRow{Name: a.Name, Email: a.Email,
		Handled:    views.Figure{count(a.Handled, held)},
		Accept:     pair(a.AcceptP50, a.AcceptP90, count(a.Handled, held)),
		Resolution: pair(a.ResolveP50, a.ResolveP90, count(a.Resolved, of(held, func(f *search.Filter) { f.Status = handoff.StatusResolved }))),
		Replies:    views.Figure{count(a.Replies, sent(search.RecordReply))},
		AsIs:       rate(count(a.AsIs, sent(search.RecordAsIs)), count(a.Drafts, sent(search.RecordDraft)), a.AsIs, a.Drafts),
		Edit:       edit}
}

// agentDefinitions say how the agents' table counts, as docs/metrics.md does.
func agentDefinitions() []views.FigureRow {
	return []views.FigureRow{
		{Name: "Handled", Definition: "The window's packages whose accept stands with the agent: they hold them, or held them last when they closed (after a reassignment, the new holder)."},
		{Name: "Time to accept, p50 / p90", Definition: "From intake to the accept that stands, over the packages they handled."},
		{Name: "Time to resolution, p50 / p90", Definition: "From intake to the Resolve action, over the packages they handled that were resolved."},
		{Name: "Replies sent", Definition: "The replies the agent sent to the window's packages, whoever holds them."},
		{Name: "Drafts sent as is", Definition: "Of those replies, the ones to a package with a bot's draft whose text was the draft unchanged, over those to a draft."},
		{Name: "Median edit distance", Definition: "The median of the characters changed between the bot's draft and the text sent, over their replies to a draft (0 for one sent as is)."},
	}
}

func periodText(p dashboard.Period) string {
	return p.From.UTC().Format("Jan 2 15:04") + " – " + p.To.UTC().Format("Jan 2 15:04") + " UTC"
}

// pair is a p50 and a p90 with the count they were taken over, which links to its packages.
func pair(p50, p90 *time.Duration, n views.FigurePart) views.Figure {
	if p50 == nil {
		return views.Figure{text("— ("), n, text(")")}
	}
	return views.Figure{text(duration(p50) + " / " + duration(p90) + " ("), n, text(")")}
}

// duration shows a time to accept or resolve to the second under an hour.
func duration(d *time.Duration) string {
	if d == nil {
		return "—"
	}
	return views.FormatSpan(*d)
}

// rate is n over whole as a percentage, with both counts, each linked to its packages.
func rate(part, all views.FigurePart, n, whole int) views.Figure {
	if whole == 0 {
		return views.Figure{text("— ("), part, text(" of "), all, text(")")}
	}
	return views.Figure{text(fmt.Sprintf("%.1f%% (", float64(n)*100/float64(whole))), part, text(" of "), all, text(")")}
}

// shares are the counts of each value in the current and the previous period, each linked to its
// packages: cur's and prev's filters with by setting the value.
func shares(cur, prev []dashboard.Count, whole int, curIn, prevIn search.Filter, by func(*search.Filter, string)) []views.ShareRow {
	before := map[string]int{}
	for _, c := range prev {
		before[c.Value] = c.N
	}
	link := func(n int, f search.Filter, value string) views.Figure {
		return views.Figure{count(n, of(f, func(f *search.Filter) { by(f, value) }))}
	}
	rows := make([]views.ShareRow, 0, len(cur))
	seen := map[string]bool{}
	for _, c := range cur {
		seen[c.Value] = true
		rows = append(rows, views.ShareRow{Value: c.Value, N: link(c.N, curIn, c.Value), Percent: percent(float64(c.N) / float64(max(1, whole))),
			Previous: link(before[c.Value], prevIn, c.Value)})
	}
	for _, c := range prev {
		if !seen[c.Value] {
			rows = append(rows, views.ShareRow{Value: c.Value, N: link(0, curIn, c.Value), Percent: "0%", Previous: link(c.N, prevIn, c.Value)})
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
