package actions

import (
	"slices"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
)

// Action is something a person does to a package at the desk.
type Action string

const (
	Accept   Action = "accept"
	Reject   Action = "reject"
	Return   Action = "return" // to the bot
	Transfer Action = "transfer"
	Resolve  Action = "resolve"
	Reply    Action = "reply"   // send the customer a reply, from the bot's draft or from scratch
	Decline  Action = "decline" // turn down the ring of a warm package
	// Ask a supervisor to approve the package's refund, and take the request back. Who decides a
	// request is approvals.Check (four eyes), as it depends on the request, not the package.
	RequestApproval  Action = "request_approval"
	WithdrawApproval Action = "withdraw_approval"
	// Add an internal note: anyone who works the package's queue, and supervisors, at any time,
	// whoever holds it and whatever its status.
	Note Action = "note"
	// Move a held package to another agent of its queue, or take it over (reassign.go): a
	// supervisor's, never an agent's.
	Reassign Action = "reassign"
)

// State is what the rules need to know of a package.
type State struct {
	PublicID        string
	Status          handoff.Status
	AssigneeID      *int64
	Assignee        string // the assignee's display name
	RejectedBy      []int64
	Rejections      int
	NeedsSupervisor bool
	// OfferedTo is the preferred agent, who alone may take the package until OfferedUntil.
	OfferedTo    *int64
	OfferedUntil *time.Time
	// Ringing says that the offer is a warm package's ring rather than a preferred
	// agent's head start.
	Ringing bool
	// ApprovalBy is who asked for the package's pending refund approval, if one is pending.
	ApprovalBy *int64
}

// HeldBy reports whether the user holds the package (reserved or accepted).
func (st State) HeldBy(userID int64) bool { return st.AssigneeID != nil && *st.AssigneeID == userID }

// Check says whether user, who works the package's queue (member) or not, may do act to the
// package now: nil, or the refusal, worded for the user. It is the one statement of who may do
// what: the actions check it under the package's row lock, and the package page offers only the
// actions it allows. An agent's capacity is checked apart, under the agent's own row lock, as it
// depends on their other packages.
func Check(act Action, user auth.User, member bool, st State, now time.Time) error {
	supervisor := user.Role.AtLeast(auth.RoleSupervisor)
	// Whoever holds a package may always hand it back, even after leaving its queue.
	if act != Reject && !member && !supervisor {
		return notMember()
	}
	switch act {
	case Accept:
		return mayClaim(user, supervisor, st, now)
	case Reject:
		return holderOrSupervisor(user, supervisor, st, handoff.StatusReserved, handoff.StatusAccepted)
	case Return:
		if st.Status == handoff.StatusQueued {
			return nil
		}
		return holderOrSupervisor(user, supervisor, st, handoff.StatusReserved, handoff.StatusAccepted)
	case Transfer:
		if st.Status == handoff.StatusQueued {
			return nil
		}
		return holderOrSupervisor(user, supervisor, st, handoff.StatusReserved, handoff.StatusAccepted)
	case Resolve:
		return holderOrSupervisor(user, supervisor, st, handoff.StatusAccepted)
	case RequestApproval:
		// The agent who works the package asks; a supervisor who steps in takes the package first.
		if st.Status != handoff.StatusAccepted {
			return desk.Errorf(desk.Conflict, "%s is %s; an approval is asked for an accepted package", st.PublicID, st.Status)
		}
		if !st.HeldBy(user.ID) {
			return desk.Errorf(desk.Forbidden, "%s is not yours; only its holder asks for approval", st.PublicID)
		}
		return nil
	case WithdrawApproval:
		if st.Status != handoff.StatusAwaitingApproval || st.ApprovalBy == nil {
			return desk.Errorf(desk.Conflict, "%s is %s; no approval is pending", st.PublicID, st.Status)
		}
		if *st.ApprovalBy != user.ID {
			return desk.Errorf(desk.Forbidden, "only the agent who asked for the approval of %s may withdraw it", st.PublicID)
		}
		return nil
	case Reply:
		// Only the agent who accepted the package speaks to the customer: a supervisor who steps
		// in takes the package first, so that one person at a time answers. While a refund waits
		// for approval the agent still answers, to tell the customer it is on its way.
		if st.Status != handoff.StatusAccepted && st.Status != handoff.StatusAwaitingApproval {
			return desk.Errorf(desk.Conflict, "%s is %s; a reply needs it accepted", st.PublicID, st.Status)
		}
		if !st.HeldBy(user.ID) {
			return desk.Errorf(desk.Forbidden, "%s is not yours to answer", st.PublicID)
		}
		return nil
	case Note:
		return nil
	case Reassign:
		if !supervisor {
			return desk.Errorf(desk.Forbidden, "only a supervisor reassigns %s", st.PublicID)
		}
		if st.Status == handoff.StatusAwaitingApproval {
			return desk.Errorf(desk.Conflict, "%s waits for a refund approval its holder asked for; decide or withdraw it first", st.PublicID)
		}
		if st.AssigneeID == nil || (st.Status != handoff.StatusReserved && st.Status != handoff.StatusAccepted) {
			return desk.Errorf(desk.Conflict, "%s is %s; only a package someone holds is reassigned", st.PublicID, st.Status)
		}
		return nil
	case Decline:
		// A ring is its agent's alone to turn down; supervisors do not decline for them.
		if !st.Ringing || st.OfferedTo == nil || *st.OfferedTo != user.ID || st.Status != handoff.StatusQueued {
			return desk.Errorf(desk.Conflict, "%s is not ringing for you", st.PublicID)
		}
		return nil
	}
	return desk.Errorf(desk.Invalid, "%q is not an action", act)
}

// Permissions are the actions a user may take on a package now.
type Permissions struct {
	Accept, Reject, Return, Transfer, Resolve, Reply bool
	RequestApproval, WithdrawApproval                bool
	Note                                             bool
	Reassign                                         bool
}

// Allowed lists what Check allows user to do to the package now.
func Allowed(user auth.User, member bool, st State, now time.Time) Permissions {
	may := func(act Action) bool { return Check(act, user, member, st, now) == nil }
	return Permissions{Accept: may(Accept), Reject: may(Reject), Return: may(Return), Transfer: may(Transfer),
		Resolve: may(Resolve), Reply: may(Reply), RequestApproval: may(RequestApproval), WithdrawApproval: may(WithdrawApproval),
		Note: may(Note), Reassign: may(Reassign)}
}

// mayClaim lets the agent accept the reservation they hold, or a waiting package that is not
// barred to them.
func mayClaim(user auth.User, supervisor bool, st State, now time.Time) error {
	switch {
	case st.Status == handoff.StatusReserved && st.HeldBy(user.ID):
		return nil
	case st.Status != handoff.StatusQueued:
		if st.AssigneeID == nil {
			return desk.Errorf(desk.Conflict, "%s is %s", st.PublicID, st.Status)
		}
		return desk.Errorf(desk.Conflict, "%s is already %s by %s", st.PublicID, st.Status, st.Assignee)
	case slices.Contains(st.RejectedBy, user.ID):
		return desk.Errorf(desk.Conflict, "you rejected %s; it is for someone else now", st.PublicID)
	case st.NeedsSupervisor && !supervisor:
		return desk.Errorf(desk.Forbidden, "%s was rejected %d times and waits for a supervisor", st.PublicID, st.Rejections)
	case st.Ringing && st.OfferedTo != nil && st.OfferedUntil != nil && *st.OfferedTo != user.ID && now.Before(*st.OfferedUntil):
		return desk.Errorf(desk.Conflict, "%s is ringing for another agent until %s", st.PublicID, st.OfferedUntil.Format(time.Kitchen))
	case st.OfferedTo != nil && *st.OfferedTo != user.ID && st.OfferedUntil != nil && now.Before(*st.OfferedUntil):
		return desk.Errorf(desk.Conflict, "%s is offered to its preferred agent until %s", st.PublicID, st.OfferedUntil.Format(time.Kitchen))
	}
	return nil
}

// holderOrSupervisor lets the agent who holds the package act on it in one of statuses, and
// supervisors step in.
func holderOrSupervisor(user auth.User, supervisor bool, st State, statuses ...handoff.Status) error {
	if !slices.Contains(statuses, st.Status) {
		return desk.Errorf(desk.Conflict, "%s is %s", st.PublicID, st.Status)
	}
	if !st.HeldBy(user.ID) && !supervisor {
		return desk.Errorf(desk.Forbidden, "%s is not yours", st.PublicID)
	}
	return nil
}

func notMember() error { return desk.Errorf(desk.Forbidden, "you are not a member of this queue") }
