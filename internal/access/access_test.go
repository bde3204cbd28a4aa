package access

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/handoff/handofftest"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
)

// logged is one access row of the event log.
type logged struct {
	kind    events.Kind
	subject int64
	actor   *int64
	queue   *int64
	detail  map[string]any
}

func accessLog(t *testing.T, db *pgxpool.Pool) []logged {
	t.Helper()
	rows, err := db.Query(context.Background(), `
		SELECT kind, subject_user, actor_user, queue_id, detail FROM events WHERE subject_user IS NOT NULL ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []logged
	for rows.Next() {
		var l logged
		if err := rows.Scan(&l.kind, &l.subject, &l.actor, &l.queue, &l.detail); err != nil {
			t.Fatal(err)
		}
		got = append(got, l)
	}
	return got
}

// Each change is made together with its row in the log, which names whose access changed and who
// changed it; a change that changes nothing is not logged.
func TestChangesOfAccessAreLoggedWithTheChange(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	people, queues := auth.NewService(db), queue.NewService(db)
	s := New(db, people)
	q, err := queues.Create(ctx, queue.New{Name: "billing_t2"})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := people.CreateUser(ctx, auth.NewUser{Email: "ada@example.com", DisplayName: "Ada", Role: auth.RoleAdmin, Password: "long-enough"})
	if err != nil {
		t.Fatal(err)
	}
	dana, err := people.CreateUser(ctx, auth.NewUser{Email: "dana@example.com", DisplayName: "Dana", Role: auth.RoleSupervisor, Password: "long-enough"})
	if err != nil {
		t.Fatal(err)
	}
	if err := queues.AddMembers(ctx, dana.ID, []string{q.Name}); err != nil {
		t.Fatal(err)
	}
	sess, err := people.StartSession(ctx, dana.ID)
	if err != nil {
		t.Fatal(err)
	}

	if err := s.SignOut(ctx, sess.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := people.SessionUser(ctx, sess.Token); desk.ErrorCode(err) != desk.NotFound {
		t.Errorf("the session after SignOut: %v, want NotFound", err)
	}
	if err := s.SignOut(ctx, sess.Token); err != nil {
		t.Errorf("signing out a session that is gone: %v", err)
	}
	if err := s.SetRole(ctx, dana.ID, auth.RoleAgent, admin.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRole(ctx, dana.ID, auth.RoleAgent, admin.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.RemoveMember(ctx, dana.ID, q, admin.ID); err != nil {
		t.Fatal(err)
	}
	if works, err := queues.IsMember(ctx, dana.ID, q.ID); err != nil || works {
		t.Errorf("dana still works %s after RemoveMember: %v", q.Name, err)
	}
	if err := s.RemoveMember(ctx, dana.ID, q, admin.ID); desk.ErrorCode(err) != desk.NotFound {
		t.Errorf("removing a membership that is gone: %v, want NotFound", err)
	}
	second, err := people.StartSession(ctx, dana.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Disable(ctx, dana.ID, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Disable(ctx, dana.ID, 0); err != nil {
		t.Fatal(err)
	}
	var sessions int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM sessions WHERE user_id = $1`, dana.ID).Scan(&sessions); err != nil || sessions != 0 {
		t.Errorf("a disabled user keeps %d sessions (%v), want none", sessions, err)
	}
	if _, _, err := people.VerifySession(ctx, second.Token); desk.ErrorCode(err) != desk.NotFound {
		t.Errorf("a disabled user's session: %v, want NotFound", err)
	}
	if err := s.Disable(ctx, 999999, 0); desk.ErrorCode(err) != desk.NotFound {
		t.Errorf("disabling nobody: %v, want NotFound", err)
	}

	got := accessLog(t, db)
	want := []events.Kind{events.SignedOut, events.RoleChanged, events.MemberRemoved, events.UserDisabled}
	if len(got) != len(want) {
		t.Fatalf("logged %+v, want one row each of %v", got, want)
	}
	for i, l := range got {
		if l.kind != want[i] || l.subject != dana.ID {
			t.Errorf("row %d: %s about user %d, want %s about dana (%d)", i, l.kind, l.subject, want[i], dana.ID)
		}
	}
	if got[0].actor == nil || *got[0].actor != dana.ID {
		t.Errorf("a logout's actor is %v, want dana herself", got[0].actor)
	}
	if got[1].actor == nil || *got[1].actor != admin.ID || got[1].detail["role"] != "agent" || got[1].detail["from_role"] != "supervisor" {
		t.Errorf("the role change logged actor %v and detail %v, want ada, agent from supervisor", got[1].actor, got[1].detail)
	}
	if got[2].queue == nil || *got[2].queue != q.ID {
		t.Errorf("the membership removal logged queue %v, want %d", got[2].queue, q.ID)
	}
	if got[3].actor != nil {
		t.Errorf("a change from the command line logged actor %d, want none", *got[3].actor)
	}
}

// Disabling an agent whose refund request is pending withdraws the request, which the bot hears
// of, and returns the package to its queue for another agent: nobody is left deciding a refund
// for a package no one holds.
func TestDisableWithdrawsTheHeldPackagesApproval(t *testing.T) {
	t.Parallel()
	f := newAdminFixture(t)
	ctx := context.Background()
	billing := f.newQueue(t, url.Values{"name": {"billing"}})
	key, err := f.people.CreateAPIKey(ctx, auth.NewAPIKey{Name: "bot", QueueIDs: []int64{billing.ID}})
	if err != nil {
		t.Fatal(err)
	}
	alex := f.user(t, "alex@example.com", auth.RoleAgent)
	if err := f.queues.AddMembers(ctx, alex.ID, []string{"billing"}); err != nil {
		t.Fatal(err)
	}
	var src handofftest.Numbered
	p := src.Next(t, "billing")
	p.Refund = &handoff.Refund{Amount: "120.00", Currency: "USD"}
	if _, err := intake.New(f.db, time.Now, nil, nil).Submit(ctx, intake.Sender{APIKeyID: key.ID, QueueIDs: key.QueueIDs}, p); err != nil {
		t.Fatal(err)
	}
	work := actions.New(f.db, time.Now, nil, nil, nil, "")
	if err := work.Accept(ctx, alex, p.HandoffID); err != nil {
		t.Fatal(err)
	}
	approvalID, err := work.RequestApproval(ctx, alex, p.HandoffID, "charged twice")
	if err != nil {
		t.Fatal(err)
	}

	if err := f.s.Disable(ctx, alex.ID, f.admin.ID); err != nil {
		t.Fatal(err)
	}
	var status, state, kinds, hooks, reason string
	var assignee *int64
	if err := f.db.QueryRow(ctx, `SELECT h.status, h.assignee_id, a.state,
			(SELECT string_agg(e.kind, ',' ORDER BY e.seq) FROM events e WHERE e.handoff_id = h.id),
			(SELECT string_agg(w.event, ',' ORDER BY w.id) FROM webhook_outbox w WHERE w.handoff_id = h.handoff_id),
			(SELECT e.detail->>'reason' FROM events e WHERE e.handoff_id = h.id AND e.kind = 'approval_withdrawn')
		FROM handoffs h JOIN approvals a ON a.handoff_id = h.id WHERE a.id = $1`, approvalID).
		Scan(&status, &assignee, &state, &kinds, &hooks, &reason); err != nil {
		t.Fatal(err)
	}
	if status != "queued" || assignee != nil || state != "withdrawn" {
		t.Errorf("after disabling the requester: package %s held by %v, request %s; want queued, nobody, withdrawn", status, assignee, state)
	}
	// The package is warm and nobody is online: its warm phase ended as it came in.
	if want := "queued,warm_timeout,accepted,approval_requested,approval_withdrawn,released"; kinds != want {
		t.Errorf("the package's log %s, want %s", kinds, want)
	}
	if want := "queued,warm_timeout,accepted,approval_requested,approval_withdrawn"; hooks != want {
		t.Errorf("the bot's webhooks %s, want %s", hooks, want)
	}
	if reason != "assignee_disabled" {
		t.Errorf("the withdrawal's reason %q, want assignee_disabled", reason)
	}

	// Another agent takes it and may ask again.
	blake := f.user(t, "blake@example.com", auth.RoleAgent)
	if err := f.queues.AddMembers(ctx, blake.ID, []string{"billing"}); err != nil {
		t.Fatal(err)
	}
	if err := work.Accept(ctx, blake, p.HandoffID); err != nil {
		t.Fatalf("another agent accepts the returned package: %v", err)
	}
	if _, err := work.RequestApproval(ctx, blake, p.HandoffID, "agreed, charged twice"); err != nil {
		t.Fatalf("the new holder asks for the refund again: %v", err)
	}
}
