package actions

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
)

func TestCheck(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	later, earlier := now.Add(time.Minute), now.Add(-time.Minute)
	agent := auth.User{ID: 1, Role: auth.RoleAgent}
	other := int64(2)
	supervisor := auth.User{ID: 3, Role: auth.RoleSupervisor}
	me := agent.ID
	pkg := func(status handoff.Status, assignee *int64) State {
		return State{PublicID: "h1", Status: status, AssigneeID: assignee, Assignee: "someone"}
	}
	with := func(st State, edit func(*State)) State { edit(&st); return st }

	for _, tc := range []struct {
		name   string
		user   auth.User
		member bool
		st     State
		want   string            // the permitted actions, in Permissions order
		why    map[Action]string // the code of a refusal, where it matters
	}{
		{"queued, member", agent, true, pkg(handoff.StatusQueued, nil), "accept return transfer",
			map[Action]string{Reject: desk.Conflict, Resolve: desk.Conflict}},
		{"queued, not a member", agent, false, pkg(handoff.StatusQueued, nil), "",
			map[Action]string{Accept: desk.Forbidden, Return: desk.Forbidden}},
		{"queued, supervisor outside the queue", supervisor, false, pkg(handoff.StatusQueued, nil), "accept return transfer", nil},
		{"queued, rejected by me", agent, true, with(pkg(handoff.StatusQueued, nil), func(s *State) { s.RejectedBy = []int64{me} }),
			"return transfer", map[Action]string{Accept: desk.Conflict}},
		{"queued, waits for a supervisor", agent, true, with(pkg(handoff.StatusQueued, nil), func(s *State) { s.NeedsSupervisor = true }),
			"return transfer", map[Action]string{Accept: desk.Forbidden}},
		{"queued, needs a supervisor, supervisor", supervisor, true, with(pkg(handoff.StatusQueued, nil), func(s *State) { s.NeedsSupervisor = true }),
			"accept return transfer", nil},
		{"queued, offered to another", agent, true, with(pkg(handoff.StatusQueued, nil), func(s *State) { s.OfferedTo, s.OfferedUntil = &other, &later }),
			"return transfer", map[Action]string{Accept: desk.Conflict}},
		{"queued, offer to another ran out", agent, true, with(pkg(handoff.StatusQueued, nil), func(s *State) { s.OfferedTo, s.OfferedUntil = &other, &earlier }),
			"accept return transfer", nil},
		{"queued, offered to me", agent, true, with(pkg(handoff.StatusQueued, nil), func(s *State) { s.OfferedTo, s.OfferedUntil = &me, &later }),
			"accept return transfer", nil},
		{"reserved by me", agent, true, pkg(handoff.StatusReserved, &me), "accept reject return transfer",
			map[Action]string{Resolve: desk.Conflict, Reply: desk.Conflict}},
		{"reserved by another", agent, true, pkg(handoff.StatusReserved, &other), "",
			map[Action]string{Accept: desk.Conflict, Reject: desk.Forbidden, Return: desk.Forbidden, Transfer: desk.Forbidden}},
		{"reserved by another, supervisor", supervisor, false, pkg(handoff.StatusReserved, &other), "reject return transfer",
			map[Action]string{Accept: desk.Conflict}},
		{"accepted by me", agent, true, pkg(handoff.StatusAccepted, &me), "reject return transfer resolve reply request_approval",
			map[Action]string{Accept: desk.Conflict, WithdrawApproval: desk.Conflict}},
		{"accepted by me, no longer a member", agent, false, pkg(handoff.StatusAccepted, &me), "reject",
			map[Action]string{Resolve: desk.Forbidden, Reply: desk.Forbidden}},
		{"accepted by another", agent, true, pkg(handoff.StatusAccepted, &other), "",
			map[Action]string{Resolve: desk.Forbidden, Reply: desk.Forbidden}},
		{"accepted by another, supervisor", supervisor, true, pkg(handoff.StatusAccepted, &other), "reject return transfer resolve",
			map[Action]string{Reply: desk.Forbidden, RequestApproval: desk.Forbidden}},
		{"awaiting approval, asked by me", agent, true, with(pkg(handoff.StatusAwaitingApproval, &me), func(s *State) { s.ApprovalBy = &me }),
			"reply withdraw_approval", map[Action]string{Resolve: desk.Conflict, Return: desk.Conflict, RequestApproval: desk.Conflict}},
		{"awaiting approval, asked by another, supervisor", supervisor, true,
			with(pkg(handoff.StatusAwaitingApproval, &other), func(s *State) { s.ApprovalBy = &other }), "",
			map[Action]string{WithdrawApproval: desk.Forbidden, Resolve: desk.Conflict}},
		{"resolved", supervisor, true, pkg(handoff.StatusResolved, &me), "",
			map[Action]string{Accept: desk.Conflict, Reject: desk.Conflict, Return: desk.Conflict, Transfer: desk.Conflict, Resolve: desk.Conflict}},
		{"expired", agent, true, pkg(handoff.StatusExpired, nil), "", map[Action]string{Accept: desk.Conflict}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := Allowed(tc.user, tc.member, tc.st, now)
			var got []string
			for _, a := range []struct {
				ok   bool
				name string
			}{{p.Accept, "accept"}, {p.Reject, "reject"}, {p.Return, "return"}, {p.Transfer, "transfer"}, {p.Resolve, "resolve"}, {p.Reply, "reply"},
				{p.RequestApproval, "request_approval"}, {p.WithdrawApproval, "withdraw_approval"}} {
				if a.ok {
					got = append(got, a.name)
				}
			}
			if fmt.Sprint(got) != fmt.Sprint(strings.Fields(tc.want)) {
				t.Errorf("allowed %v, want %v", got, strings.Fields(tc.want))
			}
			for act, code := range tc.why {
				if err := Check(act, tc.user, tc.member, tc.st, now); desk.ErrorCode(err) != code {
					t.Errorf("%s: %v, want a %s error", act, err, code)
				}
			}
		})
	}
}

// A taken package names who took it, so the agent knows whom to ask.
func TestCheckNamesWhoTookIt(t *testing.T) {
	t.Parallel()
	other := int64(2)
	st := State{PublicID: "h1", Status: handoff.StatusAccepted, AssigneeID: &other, Assignee: "Sam"}
	err := Check(Accept, auth.User{ID: 1, Role: auth.RoleAgent}, true, st, time.Now())
	if desk.ErrorMessage(err) != "h1 is already accepted by Sam" {
		t.Fatalf("accept of a taken package: %v", err)
	}
}

// A ring is its agent's alone: only they may decline it, and others' accepts are refused while it
// rings, with a message that says so.
func TestCheckRing(t *testing.T) {
	t.Parallel()
	now := time.Now()
	until := now.Add(20 * time.Second)
	me, other := auth.User{ID: 1, Role: auth.RoleAgent}, int64(2)
	supervisor := auth.User{ID: 3, Role: auth.RoleSupervisor}
	ringing := func(to int64) State {
		return State{PublicID: "h1", Status: handoff.StatusQueued, OfferedTo: &to, OfferedUntil: &until, Ringing: true}
	}
	if err := Check(Decline, me, true, ringing(me.ID), now); err != nil {
		t.Errorf("the ringing agent's decline: %v", err)
	}
	if err := Check(Accept, me, true, ringing(me.ID), now); err != nil {
		t.Errorf("the ringing agent's accept: %v", err)
	}
	for _, u := range []auth.User{me, supervisor} {
		if err := Check(Decline, u, true, ringing(other), now); desk.ErrorCode(err) != desk.Conflict {
			t.Errorf("%s declines another's ring: %v, want a conflict", u.Role, err)
		}
		err := Check(Accept, u, true, ringing(other), now)
		if desk.ErrorCode(err) != desk.Conflict || !strings.Contains(desk.ErrorMessage(err), "ringing for another agent") {
			t.Errorf("%s accepts another's ring: %v, want a conflict saying it rings for another", u.Role, err)
		}
	}
	if err := Check(Accept, me, true, ringing(other), until); err != nil {
		t.Errorf("an accept once the window ran out: %v", err)
	}
	if err := Check(Decline, me, true, State{PublicID: "h1", Status: handoff.StatusQueued}, now); desk.ErrorCode(err) != desk.Conflict {
		t.Errorf("a decline of what rings nobody: %v, want a conflict", err)
	}
}
