package dashboard_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/dashboard"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/handoff/handofftest"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
)

// history is a desk with two queues, a bot's key and an agent, and packages stored as they would
// be after their lives at the desk, at times measured from a fixed now.
type history struct {
	t      *testing.T
	db     *pgxpool.Pool
	now    time.Time
	key    int64
	agent  int64
	queues map[string]int64
}

func newHistory(t *testing.T) *history {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	h := &history{t: t, db: db, now: time.Date(2026, 3, 10, 0, 0, 0, 0, time.UTC), queues: map[string]int64{}}
	qs := queue.NewService(db)
	for _, name := range []string{"billing", "fraud"} {
		q, err := qs.Create(ctx, queue.New{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		h.queues[name] = q.ID
	}
	as := auth.NewService(db)
	agent, err := as.CreateUser(ctx, auth.NewUser{Email: "ann@example.com", DisplayName: "Ann", Role: auth.RoleAgent,
		Password: "long-enough-password"})
	if err != nil {
		t.Fatal(err)
	}
	h.agent = agent.ID
	key, err := as.CreateAPIKey(ctx, auth.NewAPIKey{Name: "bots", QueueIDs: []int64{h.queues["billing"], h.queues["fraud"]}})
	if err != nil {
		t.Fatal(err)
	}
	h.key = key.ID
	return h
}

// stored is one package: created that long before now, accepted and closed that long after its
// creation (0: never).
type stored struct {
	id, queue, contact, status, trigger, source, outcome string
	created, accept, close                               time.Duration
	rejections                                           int
}

func (h *history) store(p stored) int64 {
	h.t.Helper()
	pkg := handofftest.Harbor(h.t)
	pkg.HandoffID, pkg.Contact.ID, pkg.SourceAgent = p.id, p.contact, p.source
	pkg.Trigger = handoff.Trigger(p.trigger)
	body, err := json.Marshal(pkg)
	if err != nil {
		h.t.Fatal(err)
	}
	created := h.now.Add(-p.created)
	var accepted, closed *time.Time
	if p.accept > 0 {
		a := created.Add(p.accept)
		accepted = &a
	}
	if p.close > 0 {
		c := created.Add(p.close)
		closed = &c
	}
	var outcome *string
	if p.outcome != "" {
		outcome = &p.outcome
	}
	var id int64
	if err := h.db.QueryRow(context.Background(), `
		INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package,
			body_sha256, expires_at, created_at, enqueued_at, accepted_at, closed_at, outcome, rejections)
		VALUES ($1, $2, $3, $4, 2, $5, $6, $7, '\x00', $8::timestamptz + interval '1 day', $8, $8, $9, $10, $11, $12)
		RETURNING id`, p.id, h.key, h.queues[p.queue], p.status, p.contact, p.source, string(body), created,
		accepted, closed, outcome, p.rejections).Scan(&id); err != nil {
		h.t.Fatal(err)
	}
	return id
}

// again submits a package through intake as it would have arrived then, so that intake decides
// whether it is a repeat contact, and then moves it on to the status given.
func (h *history) again(p stored) {
	h.t.Helper()
	ctx := context.Background()
	created := h.now.Add(-p.created)
	in := intake.New(h.db, func() time.Time { return created }, nil, nil)
	pkg := handofftest.Harbor(h.t)
	pkg.HandoffID, pkg.Contact.ID, pkg.SourceAgent, pkg.TargetProfile = p.id, p.contact, p.source, p.queue
	pkg.Trigger = handoff.Trigger(p.trigger)
	if _, err := in.Submit(ctx, intake.Sender{APIKeyID: h.key, QueueIDs: []int64{h.queues["billing"], h.queues["fraud"]}}, pkg); err != nil {
		h.t.Fatalf("submit %s: %v", p.id, err)
	}
	var accepted, closed *time.Time
	if p.accept > 0 {
		a := created.Add(p.accept)
		accepted = &a
	}
	if p.close > 0 {
		c := created.Add(p.close)
		closed = &c
	}
	if _, err := h.db.Exec(ctx, `UPDATE handoffs SET status = $2, accepted_at = $3, closed_at = $4, outcome = NULLIF($5, '')
		WHERE handoff_id = $1`, p.id, p.status, accepted, closed, p.outcome); err != nil {
		h.t.Fatal(err)
	}
}

// reply stores a reply record by the agent, sent that long before now; draft "" is a reply
// written from scratch. The edit distance is told, not computed: the figures only read it.
func (h *history) reply(handoffID int64, queue string, ago time.Duration, draft, final string, distance int) {
	h.t.Helper()
	h.replyBy(h.agent, handoffID, queue, ago, draft, final, distance)
}

func (h *history) replyBy(editor, handoffID int64, queue string, ago time.Duration, draft, final string, distance int) {
	h.t.Helper()
	if _, err := h.db.Exec(context.Background(), `
		INSERT INTO evals (kind, handoff_id, queue_id, editor_id, at, source_agent, source_run_id, trigger,
			draft, final, word_diff, unified_diff, edit_distance_chars, edit_distance_words, accepted_as_is, tags, editing_ms)
		VALUES ('reply', $1, $2, $3, $4, 'tier1', 'run', 'policy_boundary', $5, $6, '[]', '', $7, 0, $5 = $6, '{}', 0)`,
		handoffID, h.queues[queue], editor, h.now.Add(-ago), draft, final, distance); err != nil {
		h.t.Fatal(err)
	}
}

// hold makes the agent the holder of the packages (their assignee): the accept that stands is theirs.
func (h *history) hold(agent int64, ids ...string) {
	h.t.Helper()
	if _, err := h.db.Exec(context.Background(), `UPDATE handoffs SET assignee_id = $1 WHERE handoff_id = ANY($2)`, agent, ids); err != nil {
		h.t.Fatal(err)
	}
}

// user adds a desk user.
func (h *history) user(email, name string) int64 {
	h.t.Helper()
	u, err := auth.NewService(h.db).CreateUser(context.Background(), auth.NewUser{Email: email, DisplayName: name, Role: auth.RoleAgent,
		Password: "long-enough-password"})
	if err != nil {
		h.t.Fatal(err)
	}
	return u.ID
}

const (
	day = 24 * time.Hour
	min = time.Minute
)

// seed stores the history the tests below work out by hand. Times are before now; the 7-day
// window is [now-7d, now), the previous one [now-14d, now-7d).
func (h *history) seed() {
	h.t.Helper()
	c1 := h.store(stored{id: "c1", queue: "billing", contact: "edge", status: "resolved", trigger: "policy_boundary", source: "tier1",
		outcome: "solved", created: 7 * day, accept: 2 * min, close: 10 * min}) // exactly at the window's start
	h.store(stored{id: "c2", queue: "billing", contact: "b", status: "resolved", trigger: "low_confidence", source: "tier1",
		outcome: "solved", created: 6 * day, accept: 4 * min, close: 20 * min, rejections: 1})
	h.store(stored{id: "c3", queue: "billing", contact: "c", status: "returned_to_bot", trigger: "low_confidence", source: "tier2",
		outcome: "wrong_escalation", created: 5 * day, accept: 6 * min, close: 30 * min})
	h.store(stored{id: "c4", queue: "billing", contact: "d", status: "resolved", trigger: "policy_boundary", source: "tier2",
		outcome: "refunded", created: 4 * day, accept: 8 * min, close: 40 * min})
	h.store(stored{id: "c5", queue: "billing", contact: "e", status: "expired", trigger: "tool_failure", source: "tier1",
		outcome: "expired", created: 3 * day, close: day})
	h.store(stored{id: "c6", queue: "billing", contact: "f", status: "canceled", trigger: "user_request", source: "tier1",
		outcome: "canceled", created: 2 * day, close: min})
	h.store(stored{id: "c7", queue: "fraud", contact: "g", status: "queued", trigger: "user_request", source: "tier1", created: time.Hour})
	// The previous window.
	h.store(stored{id: "p1", queue: "billing", contact: "seven", status: "resolved", trigger: "policy_boundary", source: "tier1",
		outcome: "solved", created: 13 * day, accept: 5 * min, close: time.Hour})
	h.store(stored{id: "p2", queue: "billing", contact: "eight", status: "returned_to_bot", trigger: "low_confidence", source: "tier1",
		outcome: "needs_more_info", created: 12 * day, accept: 5 * min, close: time.Hour})
	h.store(stored{id: "c0", queue: "billing", contact: "h", status: "expired", trigger: "tool_failure", source: "tier2",
		outcome: "expired", created: 7*day + time.Second, close: time.Hour}) // a second before the window
	// Before both windows: counted nowhere.
	h.store(stored{id: "x0", queue: "billing", contact: "x", status: "resolved", trigger: "policy_boundary", source: "tier1",
		outcome: "solved", created: 14*day + time.Second, accept: min, close: min})

	// edge again 6 days after c1 closed: c1 is a repeat.
	h.again(stored{id: "c8", queue: "billing", contact: "edge", status: "queued", trigger: "policy_boundary", source: "tier1",
		created: day - 10*min})
	// b again in another queue, under 2 days after c2 closed: c2 is a repeat.
	h.again(stored{id: "c9", queue: "fraud", contact: "b", status: "accepted", trigger: "low_confidence", source: "tier2",
		created: 4 * day, accept: min})
	// seven again exactly 7 days after p1 closed (a repeat), eight again 8 days after p2 (not one).
	h.again(stored{id: "s7", queue: "fraud", contact: "seven", status: "canceled", trigger: "user_request", source: "tier1",
		outcome: "canceled", created: 6*day - time.Hour, close: min})
	h.again(stored{id: "e8", queue: "fraud", contact: "eight", status: "queued", trigger: "user_request", source: "tier1",
		created: 4*day - time.Hour})
	// Replies: three to c1's draft (two as is, one edited by 8 characters) and one written from
	// scratch; one to c4's, edited by 20; one to p1's, as is, in the previous window. Ann holds c1
	// and c2, Bo c3 and c4 and sent c4's reply; c9's accept stands with nobody (a test's
	// shortcut) and counts for no agent.
	h.reply(c1, "billing", 7*day-5*min, "Your refund is on its way.", "Your refund is on its way.", 0)
	h.reply(c1, "billing", 6*day, "Sorry!", "Sorry!", 0)
	h.reply(c1, "billing", 5*day, "Your refund is on its way.", "Your refund is on its way, Ms Doe.", 8)
	h.reply(c1, "billing", 4*day, "", "Written from scratch.", 21)
	bo := h.user("bo@example.com", "Bo")
	var c4, p1 int64
	if err := h.db.QueryRow(context.Background(), `SELECT (SELECT id FROM handoffs WHERE handoff_id = 'c4'), (SELECT id FROM handoffs WHERE handoff_id = 'p1')`).
		Scan(&c4, &p1); err != nil {
		h.t.Fatal(err)
	}
	h.replyBy(bo, c4, "billing", 4*day-20*min, "Refunded.", "Refunded, with our apologies.", 20)
	h.reply(p1, "billing", 13*day-30*min, "Hello", "Hello", 0)
	h.hold(h.agent, "c1", "c2", "p1")
	h.hold(bo, "c3", "c4")
}

// read runs the rollup's job first, as an instance does, so that the figures come from
// dashboard_hours (and the hour of now from handoffs).
func (h *history) read(queueName, window string) dashboard.Stats {
	h.t.Helper()
	if r, err := dashboard.Refresh(context.Background(), h.db); err != nil || !r.Ran {
		h.t.Fatalf("refresh: %+v, %v", r, err)
	}
	w, err := dashboard.ParseWindow(window)
	if err != nil {
		h.t.Fatal(err)
	}
	s, err := dashboard.Read(context.Background(), h.db, dashboard.Filter{Queue: queueName, Window: w, Now: h.now})
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

func dur(d *time.Duration) string {
	if d == nil {
		return "none"
	}
	return d.String()
}

func counts(cs []dashboard.Count) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, c.Value+"="+strconv.Itoa(c.N))
	}
	return strings.Join(parts, " ")
}

func TestDashboardFiguresOfAllQueuesOverSevenDays(t *testing.T) {
	h := newHistory(t)
	h.seed()
	s := h.read("", "7d")
	c := s.Current
	// c1..c9, s7 and e8; c0 is a second early, x0 two weeks.
	if c.In != 11 {
		t.Errorf("packages in = %d, want 11", c.In)
	}
	if got, want := counts(c.ByTrigger), "user_request=4 low_confidence=3 policy_boundary=3 tool_failure=1"; got != want {
		t.Errorf("by trigger %q, want %q", got, want)
	}
	if got, want := counts(c.BySource), "tier1=8 tier2=3"; got != want {
		t.Errorf("by source %q, want %q", got, want)
	}
	// Accepts after 1, 2, 4, 6 and 8 minutes: the median is the middle one; p90 lies at 3.6 of
	// the 0-based positions, 60% of the way from 6 to 8 minutes.
	if c.Accepted != 5 || dur(c.AcceptP50) != "4m0s" || dur(c.AcceptP90) != "7m12s" {
		t.Errorf("time to accept: %d accepted, p50 %s, p90 %s; want 5, 4m0s, 7m12s", c.Accepted, dur(c.AcceptP50), dur(c.AcceptP90))
	}
	// Resolutions after 10, 20 and 40 minutes: p90 at position 1.8, 80% of the way from 20 to 40.
	if c.Resolved != 3 || dur(c.ResolveP50) != "20m0s" || dur(c.ResolveP90) != "36m0s" {
		t.Errorf("time to resolution: %d resolved, p50 %s, p90 %s; want 3, 20m0s, 36m0s", c.Resolved, dur(c.ResolveP50), dur(c.ResolveP90))
	}
	if c.Rejected != 1 || c.Returned != 1 || counts(c.ReturnedBy) != "wrong_escalation=1" || c.Expired != 1 || c.Canceled != 2 {
		t.Errorf("rejected %d, returned %d (%s), expired %d, canceled %d; want 1, 1 (wrong_escalation=1), 1, 2",
			c.Rejected, c.Returned, counts(c.ReturnedBy), c.Expired, c.Canceled)
	}
	// Repeat contacts: c8 (6 days after c1's resolution), c9 (under 2 days after c2's, in
	// another queue) and s7 (exactly 7 days after p1's); not e8 (8 days after p2's return).
	if c.Repeats != 3 {
		t.Errorf("repeat contacts %d, want 3", c.Repeats)
	}
	// Replies to the window's packages with a draft: c1's three (two as is) and c4's; the one from
	// scratch does not count, nor p1's, in the previous window.
	if c.Drafts != 4 || c.AsIs != 2 {
		t.Errorf("drafts %d, as is %d; want 4, 2", c.Drafts, c.AsIs)
	}
	// First replies: c1's 5 minutes after it arrived, c4's 20 minutes after. p90 lies 90% of the
	// way from 5 to 20 minutes.
	if c.Replied != 2 || dur(c.ReplyP50) != "12m30s" || dur(c.ReplyP90) != "18m30s" {
		t.Errorf("time to first reply: %d replied, p50 %s, p90 %s; want 2, 12m30s, 18m30s", c.Replied, dur(c.ReplyP50), dur(c.ReplyP90))
	}
	// Ann holds c1 (accepted after 2 minutes, resolved after 10) and c2 (4, 20) and sent c1's
	// four replies (three to its draft, two as is, edits 0, 0, 8: median 0); Bo holds c3 (6,
	// returned) and c4 (8, 40) and sent c4's reply (edited by 20).
	type agent struct {
		name                                 string
		handled, resolved, replies, drafts   int
		asIs                                 int
		accept50, resolve50, resolve90, edit string
	}
	var agents []agent
	for _, a := range s.Agents {
		edit := "none"
		if a.EditP50 != nil {
			edit = strconv.FormatFloat(*a.EditP50, 'f', -1, 64)
		}
		agents = append(agents, agent{a.Name, a.Handled, a.Resolved, a.Replies, a.Drafts, a.AsIs, dur(a.AcceptP50), dur(a.ResolveP50),
			dur(a.ResolveP90), edit})
	}
	if want := []agent{{"Ann", 2, 2, 4, 3, 2, "3m0s", "15m0s", "19m0s", "0"}, {"Bo", 2, 1, 1, 1, 0, "7m0s", "40m0s", "40m0s", "20"}}; !slices.Equal(agents, want) {
		t.Errorf("agents %+v\nwant %+v", agents, want)
	}

	p := s.Previous
	// p1, p2 and c0, none of them a repeat.
	if p.In != 3 || p.Repeats != 0 {
		t.Errorf("previous window: in %d, repeats %d; want 3, 0", p.In, p.Repeats)
	}
	if dur(p.AcceptP50) != "5m0s" || dur(p.ResolveP90) != "1h0m0s" || counts(p.ReturnedBy) != "needs_more_info=1" || p.Expired != 1 {
		t.Errorf("previous window: accept p50 %s, resolution p90 %s, returned %s, expired %d", dur(p.AcceptP50),
			dur(p.ResolveP90), counts(p.ReturnedBy), p.Expired)
	}
	if p.Drafts != 1 || p.AsIs != 1 || p.Replied != 1 || dur(p.ReplyP50) != "30m0s" {
		t.Errorf("previous window: drafts %d, as is %d, replied %d after %s; want 1, 1, 1 after 30m0s", p.Drafts, p.AsIs, p.Replied, dur(p.ReplyP50))
	}

	// Daily buckets from the window's start: c1 | c2 s7 | c3 | c4 c9 e8 | c5 | c6 | c8 c7.
	var in []int
	for _, b := range s.Series {
		in = append(in, b.In)
	}
	if want := []int{1, 2, 1, 3, 1, 1, 2}; !slices.Equal(in, want) {
		t.Errorf("packages in per day %v, want %v", in, want)
	}
	if len(s.Series) == 7 && (dur(s.Series[0].ResolveP50) != "10m0s" || dur(s.Series[2].ResolveP50) != "none") {
		t.Errorf("median resolution of day 1 %s, of day 3 %s; want 10m0s, none", dur(s.Series[0].ResolveP50), dur(s.Series[2].ResolveP50))
	}
	want := []dashboard.QueueFigures{{Queue: "billing", In: 7, Repeats: 1, Drafts: 4}, {Queue: "fraud", In: 4, Repeats: 2}}
	if !slices.Equal(s.Queues, want) {
		t.Errorf("queues %+v, want %+v", s.Queues, want)
	}
}

func TestDashboardFiguresOfOneQueue(t *testing.T) {
	h := newHistory(t)
	h.seed()
	c := h.read("billing", "7d").Current
	// c1..c6 and c8. Accepts after 2, 4, 6 and 8 minutes: the median lies halfway between 4 and 6,
	// p90 at position 2.7, 70% of the way from 6 to 8.
	if c.In != 7 || dur(c.AcceptP50) != "5m0s" || dur(c.AcceptP90) != "7m24s" {
		t.Errorf("billing: in %d, accept p50 %s, p90 %s; want 7, 5m0s, 7m24s", c.In, dur(c.AcceptP50), dur(c.AcceptP90))
	}
	// A repeat belongs to the queue the contact came back to: c8 here, c9 and s7 in fraud.
	if c.Repeats != 1 {
		t.Errorf("billing: repeats %d, want 1", c.Repeats)
	}
	f := h.read("fraud", "7d").Current
	if f.In != 4 || f.Repeats != 2 || f.Drafts != 0 || f.AcceptP50 == nil || *f.AcceptP50 != time.Minute {
		t.Errorf("fraud: in %d, repeats %d, drafts %d, accept p50 %s; want 4, 2, 0, 1m0s", f.In, f.Repeats, f.Drafts, dur(f.AcceptP50))
	}
}

// The 24-hour window ends now: c8 (23h50m ago) and c7 are in it. The day before holds c6 alone,
// created exactly 48 hours ago, at that window's start.
func TestDashboardDayWindowEdges(t *testing.T) {
	h := newHistory(t)
	h.seed()
	s := h.read("", "24h")
	if s.Current.In != 2 || s.Previous.In != 1 || s.Previous.Canceled != 1 {
		t.Errorf("24h: in %d, previous in %d (canceled %d); want 2, 1 (1)", s.Current.In, s.Previous.In, s.Previous.Canceled)
	}
	if len(s.Series) != 24 || s.Series[0].In != 1 || s.Series[23].In != 1 {
		t.Errorf("24h series %+v: want 24 hourly buckets, c8 in the first, c7 in the last", s.Series)
	}
}

func TestDashboardRefusesUnknownWindowAndQueue(t *testing.T) {
	h := newHistory(t)
	_, err := dashboard.ParseWindow("1w")
	if desk.ErrorCode(err) != desk.BadRequest || !strings.Contains(err.Error(), "window") {
		t.Errorf("window 1w: %v, want a bad request naming the window", err)
	}
	w, _ := dashboard.ParseWindow("")
	if w.Name != "7d" {
		t.Errorf("default window %q, want 7d", w.Name)
	}
	_, err = dashboard.Read(context.Background(), h.db, dashboard.Filter{Queue: "nope", Window: w, Now: h.now})
	var de *desk.Error
	if !errors.As(err, &de) || de.Code != desk.BadRequest || !strings.Contains(de.Message, "queue") {
		t.Errorf("queue nope: %v, want a bad request naming the queue", err)
	}
}

// The job computes again only the hours whose packages changed since its last run, found in the
// event log: a package intake stores three days back is one hour to redo, and the figures then
// count it. Rebuilding every hour gives the same figures.
func TestRefreshRedoesTheHoursThatChanged(t *testing.T) {
	h := newHistory(t)
	h.seed()
	ctx := context.Background()
	if r, err := dashboard.Refresh(ctx, h.db); err != nil || !r.Rebuilt || r.Hours != 14 {
		t.Fatalf("first refresh %+v, %v; want a rebuild of the 14 packages' hours", r, err)
	}
	if r, err := dashboard.Refresh(ctx, h.db); err != nil || !r.Ran || r.Rebuilt || r.Hours != 0 {
		t.Fatalf("refresh with nothing changed %+v, %v; want no hour", r, err)
	}
	before := h.read("", "7d")
	h.again(stored{id: "n1", queue: "billing", contact: "new", status: "queued", trigger: "tool_failure", source: "tier2",
		created: 3*day + 30*min})
	if r, err := dashboard.Refresh(ctx, h.db); err != nil || r.Hours != 1 {
		t.Fatalf("refresh after one package %+v, %v; want its hour", r, err)
	}
	after := h.read("", "7d")
	if after.Current.In != before.Current.In+1 || after.Queues[0].In != before.Queues[0].In+1 {
		t.Errorf("after n1: in %d (billing %d), want %d (%d)", after.Current.In, after.Queues[0].In, before.Current.In+1, before.Queues[0].In+1)
	}
	if _, err := dashboard.Rebuild(ctx, h.db); err != nil {
		t.Fatal(err)
	}
	if again := h.read("", "7d"); !reflect.DeepEqual(again, after) {
		t.Errorf("after a rebuild %+v\nwant %+v", again, after)
	}
}

// Approval time to decision, worked out by hand: requests decided in the window, from request to
// decision; pending and expired ones have no decision.
func TestDashboardApprovalTimeToDecision(t *testing.T) {
	h := newHistory(t)
	h.seed()
	ctx := context.Background()
	sup, err := auth.NewService(h.db).CreateUser(ctx, auth.NewUser{Email: "sue@example.com", DisplayName: "Sue",
		Role: auth.RoleSupervisor, Password: "long-enough-password"})
	if err != nil {
		t.Fatal(err)
	}
	// c4 is in billing; c9 in fraud, asked for while it was in billing: a request counts in the
	// queue its package is in now, as every figure does.
	packages := map[string]int64{}
	for _, id := range []string{"c4", "c9"} {
		var pk int64
		if err := h.db.QueryRow(ctx, `SELECT id FROM handoffs WHERE handoff_id = $1`, id).Scan(&pk); err != nil {
			t.Fatal(err)
		}
		packages[id] = pk
	}
	approval := func(pkg string, requested, took time.Duration, state string) {
		t.Helper()
		at := h.now.Add(-requested)
		var decided *time.Time
		var by *int64
		if took > 0 {
			d := at.Add(took)
			decided = &d
			if state != "expired" {
				by = &sup.ID
			}
		}
		if _, err := h.db.Exec(ctx, `
			INSERT INTO approvals (handoff_id, queue_id, amount, currency, requested_by, note, requested_at, expires_at, state,
				decided_by, decided_at)
			VALUES ($1, $2, 120, 'USD', $3, 'refund', $4, $4::timestamptz + interval '4 hours', $5, $6, $7)`,
			packages[pkg], h.queues["billing"], h.agent, at, state, by, decided); err != nil {
			t.Fatal(err)
		}
	}
	approval("c4", 3*day, 10*min, "granted")
	approval("c4", 2*day, 30*min, "denied")
	approval("c4", day, 50*min, "granted")
	approval("c9", 5*day, 5*min, "granted")
	approval("c4", 4*day, 4*time.Hour, "expired") // no decision
	approval("c4", time.Hour, 0, "pending")
	approval("c4", 9*day, 2*time.Hour, "granted") // the previous window
	// Requested in the previous window, decided in this one: it counts where it was decided.
	approval("c9", 7*day+time.Hour, 90*min, "denied")

	c, p := h.read("", "7d").Current, h.read("", "7d").Previous
	// 5, 10, 30, 50 and 90 minutes: the median is 30, p90 at position 3.6, 60% from 50 to 90.
	if c.Decided != 5 || dur(c.DecisionP50) != "30m0s" || dur(c.DecisionP90) != "1h14m0s" {
		t.Errorf("all queues: %d decided, p50 %s, p90 %s; want 5, 30m0s, 1h14m0s", c.Decided, dur(c.DecisionP50), dur(c.DecisionP90))
	}
	if p.Decided != 1 || dur(p.DecisionP50) != "2h0m0s" {
		t.Errorf("previous window: %d decided, p50 %s; want 1, 2h0m0s", p.Decided, dur(p.DecisionP50))
	}
	// Billing: 10, 30 and 50 minutes; p90 at position 1.8, 80% from 30 to 50.
	b := h.read("billing", "7d").Current
	if b.Decided != 3 || dur(b.DecisionP50) != "30m0s" || dur(b.DecisionP90) != "46m0s" {
		t.Errorf("billing: %d decided, p50 %s, p90 %s; want 3, 30m0s, 46m0s", b.Decided, dur(b.DecisionP50), dur(b.DecisionP90))
	}
	if f := h.read("fraud", "24h").Current; f.Decided != 0 || f.DecisionP50 != nil {
		t.Errorf("fraud over 24h: %d decided, p50 %s; want none", f.Decided, dur(f.DecisionP50))
	}
}
