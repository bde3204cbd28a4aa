package server

import (
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/audit"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/search"
	"github.com/handoffdesk/desk/views"
)

// handleSearch is /packages: a page of the packages the search box and filters select, as the
// viewer may find and see them, with the cursor "after". A filter the desk cannot read answers 400
// with the form as given and the fault beside its field.
func (s *Server) handleSearch(c echo.Context) error {
	ctx, user := c.Request().Context(), currentUser(c)
	q := c.QueryParams()
	v := views.SearchView{Viewer: *viewer(c), Filter: searchFilterOf(q), Options: searchOptions()}
	var err error
	if v.Substrings, err = s.search.Substrings(ctx); err != nil {
		return err
	}
	f, err := search.ParseFilter(q, "after")
	var after int64
	if err == nil && q.Get("after") != "" {
		after, err = search.ParseCursor(q.Get("after"))
	}
	var results []search.Result
	var next int64
	if err == nil {
		results, next, err = s.search.Page(ctx, user, f, after, search.PageSize)
	}
	var de *desk.Error
	if errors.As(err, &de) && de.Code == desk.BadRequest {
		v.Error = views.SearchError{Param: de.Details["param"], Message: de.Message}
		if !slices.Contains(search.Params(), v.Error.Param) {
			v.Error.Param = "" // not a field of the form: said above the results
		}
		return s.render(c, http.StatusBadRequest, views.SearchPage(v))
	}
	if err != nil {
		return err
	}
	if f.Q == "" {
		if v.Count, err = s.searchCount(ctx, user, f); err != nil {
			return err
		}
	}
	var shown audit.Shown
	for _, r := range results {
		shown.Add(r.ID, r.Unmasked)
		v.Results = append(v.Results, searchResultOf(r))
	}
	if err := audit.Record(ctx, s.db, user.ID, audit.ViaPage, shown); err != nil {
		return err
	}
	if next != 0 {
		more := f.Query()
		more.Set("after", strconv.FormatInt(next, 10))
		v.More = "/packages?" + more.Encode()
	}
	if user.Role.AtLeast(auth.RoleSupervisor) {
		v.CSV = "/packages/export.csv?" + f.Query().Encode()
	}
	return s.render(c, http.StatusOK, views.SearchPage(v))
}

// countFor bounds the count of what a search selects: past it the page lists its packages and
// says they were not counted, rather than hold the page on a count of a million packages.
const countFor = 3 * time.Second

// searchCount is how many packages the filters select, over every page.
func (s *Server) searchCount(ctx context.Context, user auth.User, f search.Filter) (*views.SearchCount, error) {
	counting, cancel := context.WithTimeout(ctx, countFor)
	defer cancel()
	n, err := s.search.Count(counting, user, f)
	if err != nil && ctx.Err() == nil && (errors.Is(counting.Err(), context.DeadlineExceeded) || postgres.StatementTimedOut(err)) {
		return &views.SearchCount{Uncounted: fmt.Sprintf("Not counted: counting took over %s; narrow the search to count it.", countFor)}, nil
	}
	if err != nil {
		return nil, err
	}
	c := &views.SearchCount{Packages: n.Packages, Records: n.Records}
	if f.Record != "" {
		c.Noun = f.Record.Noun(n.Records)
	}
	return c, nil
}

// searchFilterOf is the form as the person filled it in.
func searchFilterOf(q map[string][]string) views.SearchFilter {
	get := func(k string) string {
		if vs := q[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	return views.SearchFilter{Q: get("q"), Queue: get("queue"), Status: get("status"), Trigger: get("trigger"),
		SourceAgent: get("source_agent"), Outcome: get("outcome"), Repeat: get("repeat"), SLABreached: get("sla_breached"),
		Since: get("since"), Until: get("until"), Agent: get("agent"), Accepted: get("accepted"), Rejected: get("rejected"),
		Open: get("open"), Record: get("record"), RecordBy: get("record_by"), Tag: get("tag"), RecordSince: get("record_since"),
		RecordUntil: get("record_until"), CSAT: get("csat")}
}

func searchOptions() views.SearchOptions {
	var o views.SearchOptions
	for _, st := range handoff.Statuses() {
		o.Statuses = append(o.Statuses, string(st))
	}
	for _, t := range handoff.Triggers() {
		o.Triggers = append(o.Triggers, string(t))
	}
	o.Outcomes = search.Outcomes()
	for _, r := range search.Records() {
		o.Records = append(o.Records, string(r))
	}
	o.Tags = evals.Tags()
	return o
}

func searchResultOf(r search.Result) views.SearchResult {
	return views.SearchResult{ID: r.PublicID, Created: formatTime(&r.CreatedAt), Queue: r.Queue, Status: string(r.Status), Trigger: r.Trigger,
		SourceAgent: r.SourceAgent, Outcome: r.Outcome, Assignee: r.Assignee, Contact: r.Contact, Problem: r.ProblemStatement,
		Repeat: r.Repeat, SLABreached: r.SLABreached}
}

// handleSearchCSV streams every package the filters select, newest first, masked for the
// supervisor exporting them, as CSV; cells a spreadsheet would run as formulas are made inert. A
// bad filter is answered with its 400 before anything is sent. The export's one pii_views row is
// written when it ends, also when it is cut short: what was sent was shown.
func (s *Server) handleSearchCSV(c echo.Context) error {
	ctx, user := c.Request().Context(), currentUser(c)
	f, err := search.ParseFilter(c.QueryParams())
	if err != nil {
		return err
	}
	// The first page is read before the 200 goes out, so that a queue the exporter may not search
	// is refused with its 400 rather than a cut export.
	first, next, err := s.search.Page(ctx, user, f, 0, search.PageSize)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/csv; charset=utf-8")
	h.Set(echo.HeaderContentDisposition, `attachment; filename="packages.csv"`)
	h.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(http.StatusOK)
	w := csv.NewWriter(c.Response())
	var shown audit.Shown
	write := func(r search.Result) error {
		shown.Add(r.ID, r.Unmasked)
		record := []string{r.PublicID, r.CreatedAt.UTC().Format(time.RFC3339), r.Queue, string(r.Status), r.Trigger, r.SourceAgent,
			r.Outcome, strconv.FormatBool(r.Repeat), strconv.FormatBool(r.SLABreached), r.Assignee, r.Contact, r.ProblemStatement}
		for i, cell := range record {
			record[i] = inertCell(cell)
		}
		return w.Write(record)
	}
	err = w.Write([]string{"handoff_id", "created_at", "queue", "status", "trigger", "source_agent", "outcome", "repeat_contact",
		"sla_breached", "assignee", "contact", "problem_statement"})
	for _, r := range first {
		if err == nil {
			err = write(r)
		}
	}
	if err == nil && next != 0 {
		err = s.search.EachAfter(ctx, user, f, next, func(r search.Result) error {
			if err := write(r); err != nil {
				return err
			}
			w.Flush()
			return w.Error()
		})
	}
	w.Flush()
	if err == nil {
		err = w.Error()
	}
	if recErr := audit.Record(context.WithoutCancel(ctx), s.db, user.ID, audit.ViaExport, shown); recErr != nil {
		s.logger.Error("record the search export's PII reads", "err", recErr)
	}
	if err != nil {
		// The 200 and some rows are gone: a clean end would pass the cut export for a whole one.
		if ctx.Err() == nil {
			s.logger.Error("search export cut short", "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}

// handleReassign moves a held package to the agent whose email is the form field to, or to the
// supervisor posting their own email (a take-over), and shows the package again, or the page the
// form names in next (the dashboard's roster). A refusal shows the package with why.
func (s *Server) handleReassign(c echo.Context) error {
	id := c.Param("id")
	if _, err := s.actions.Reassign(c.Request().Context(), currentUser(c), id, c.FormValue("to")); err != nil {
		return s.actionFailed(c, id, err)
	}
	if next := c.FormValue("next"); next != "" {
		return c.Redirect(http.StatusSeeOther, safeNext(next))
	}
	return c.Redirect(http.StatusSeeOther, packagePage(c, id))
}

// reassignControls are the agents of the item's queue a supervisor may move it to, with their
// room, besides the one holding it; nil when the viewer may not reassign it.
func (s *Server) reassignControls(ctx context.Context, user auth.User, item board.Item, may bool) (*views.ReassignControls, error) {
	if !may {
		return nil, nil
	}
	members, err := queue.Assignables(ctx, s.db, item.QueueID)
	if err != nil {
		return nil, err
	}
	r := &views.ReassignControls{Self: user.Email}
	for _, m := range members {
		if item.HeldBy(m.UserID) {
			continue
		}
		r.Members = append(r.Members, views.ReassignMember{Email: m.Email, Name: m.Name, Room: max(0, m.Capacity-m.Holding)})
	}
	return r, nil
}

// heldBy names who holds the item when it is someone other than the user.
func heldBy(user auth.User, item board.Item) string {
	if item.AssigneeID == nil || item.HeldBy(user.ID) || !item.Status.Open() {
		return ""
	}
	return item.Assignee
}
