package board_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/handoff/handofftest"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
)

// history is a database with two queues and an agent who works only the first.
type history struct {
	t      *testing.T
	db     *pgxpool.Pool
	key    int64
	q1, q2 queue.Queue
	agent  auth.User
}

func newHistory(t *testing.T) *history {
	t.Helper()
	ctx := context.Background()
	db, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	qs := queue.NewService(db)
	h := &history{t: t, db: db}
	if h.q1, err = qs.Create(ctx, queue.New{Name: "billing"}); err != nil {
		t.Fatal(err)
	}
	if h.q2, err = qs.Create(ctx, queue.New{Name: "fraud"}); err != nil {
		t.Fatal(err)
	}
	as := auth.NewService(db)
	if h.agent, err = as.CreateUser(ctx, auth.NewUser{Email: "ann@example.com", DisplayName: "Ann", Role: auth.RoleAgent,
		Password: "long-enough-password"}); err != nil {
		t.Fatal(err)
	}
	if err := qs.AddMembers(ctx, h.agent.ID, []string{"billing"}); err != nil {
		t.Fatal(err)
	}
	key, err := as.CreateAPIKey(ctx, auth.NewAPIKey{Name: "tier1", QueueIDs: []int64{h.q1.ID, h.q2.ID}})
	if err != nil {
		t.Fatal(err)
	}
	h.key = key.ID
	return h
}

// past describes one stored package: created and (when closed) closed that long before now, as
// PostgreSQL intervals, so that the edges are measured against the same now() the queries use.
type past struct {
	id, contact string
	queue       queue.Queue
	status      handoff.Status
	trigger     handoff.Trigger
	createdAgo  string
	closedAgo   string // "" for an open package
	handler     *int64
	repeat      bool
}

// store inserts the package and returns its row id.
func (h *history) store(p past) int64 {
	h.t.Helper()
	pkg := handofftest.Harbor(h.t)
	pkg.HandoffID, pkg.Contact.ID, pkg.Trigger = p.id, p.contact, p.trigger
	body, err := json.Marshal(pkg)
	if err != nil {
		h.t.Fatal(err)
	}
	var closed *string
	if p.closedAgo != "" {
		closed = &p.closedAgo
	}
	var id int64
	err = h.db.QueryRow(context.Background(), `
		INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package,
			body_sha256, expires_at, created_at, enqueued_at, closed_at, assignee_id, outcome, repeat_contact)
		VALUES ($1, $2, $3, $4, 2, $5, 'tier1-support', $6, '\x00', now() + interval '1 day',
			now() - $7::interval, now() - $7::interval, now() - $8::interval, $9,
			CASE WHEN $4 = 'resolved' THEN 'refund_issued' END, $10)
		RETURNING id`, p.id, h.key, p.queue.ID, p.status, p.contact, string(body), p.createdAgo, closed, p.handler, p.repeat).Scan(&id)
	if err != nil {
		h.t.Fatal(err)
	}
	return id
}

func ids(es []board.Earlier) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.PublicID
	}
	return out
}

func TestHistoryListsTheContactsEarlierPackagesOfNinetyDaysNewestFirst(t *testing.T) {
	h := newHistory(t)
	ann := h.agent.ID
	h.store(past{id: "ho_edge_in", contact: "c1", queue: h.q1, status: handoff.StatusExpired,
		trigger: handoff.TriggerToolFailure, createdAgo: "89 days 23 hours", closedAgo: "89 days"})
	h.store(past{id: "ho_edge_out", contact: "c1", queue: h.q1, status: handoff.StatusResolved,
		trigger: handoff.TriggerToolFailure, createdAgo: "90 days 1 hour", closedAgo: "90 days", handler: &ann})
	h.store(past{id: "ho_fraud", contact: "c1", queue: h.q2, status: handoff.StatusReturnedToBot,
		trigger: handoff.TriggerLowConfidence, createdAgo: "10 days", closedAgo: "9 days"})
	resolved := h.store(past{id: "ho_resolved", contact: "c1", queue: h.q1, status: handoff.StatusResolved,
		trigger: handoff.TriggerPolicyBoundary, createdAgo: "2 days", closedAgo: "1 day", handler: &ann})
	h.store(past{id: "ho_other_contact", contact: "c2", queue: h.q1, status: handoff.StatusResolved,
		trigger: handoff.TriggerPolicyBoundary, createdAgo: "3 days", closedAgo: "2 days"})
	current := h.store(past{id: "ho_now", contact: "c1", queue: h.q1, status: handoff.StatusQueued,
		trigger: handoff.TriggerUserRequest, createdAgo: "1 minute"})

	b := board.New(h.db)
	ctx := context.Background()
	agentView, err := b.History(ctx, current, ann, false)
	if err != nil {
		t.Fatal(err)
	}
	// The fraud package is in a queue Ann does not work: it is left out, not listed without a link.
	if got, want := ids(agentView), []string{"ho_resolved", "ho_edge_in"}; !slices.Equal(got, want) {
		t.Errorf("agent's history of ho_now = %v, want %v", got, want)
	}
	if len(agentView) > 0 {
		e := agentView[0]
		if e.Queue != "billing" || e.Trigger != "policy_boundary" || e.Status != handoff.StatusResolved ||
			e.Outcome != "refund_issued" || e.Handler != "Ann" {
			t.Errorf("ho_resolved listed as %+v", e)
		}
	}
	allQueues, err := b.History(ctx, current, ann, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(allQueues), []string{"ho_resolved", "ho_fraud", "ho_edge_in"}; !slices.Equal(got, want) {
		t.Errorf("supervisor's history of ho_now = %v, want %v", got, want)
	}
	// Earlier means before the package shown: ho_resolved's list holds neither itself nor ho_now.
	before, err := b.History(ctx, resolved, ann, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := ids(before), []string{"ho_fraud", "ho_edge_in"}; !slices.Equal(got, want) {
		t.Errorf("history of ho_resolved = %v, want %v", got, want)
	}
}

// The badge shows what intake decided when it stored the package (intake's
// TestIntakeDecidesRepeatContacts holds the rule's edges).
func TestCardsOfRepeatContactsSayRepeat(t *testing.T) {
	h := newHistory(t)
	for _, p := range []past{
		{id: "ho_repeat", contact: "again", status: handoff.StatusQueued, createdAgo: "2 minutes", repeat: true},
		{id: "ho_first", contact: "first", status: handoff.StatusQueued, createdAgo: "1 minute"},
	} {
		p.queue, p.trigger = h.q1, handoff.TriggerPolicyBoundary
		h.store(p)
	}
	cards, _, err := board.New(h.db).Waiting(context.Background(), h.q1.ID, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, c := range cards {
		got[c.PublicID] = c.Repeat
	}
	if want := map[string]bool{"ho_repeat": true, "ho_first": false}; !maps.Equal(got, want) {
		t.Errorf("cards' repeat badges %v, want %v", got, want)
	}
}
