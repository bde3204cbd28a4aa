package handoff

import "slices"

// Status is where a package is in its life at the desk.
type Status string

const (
	StatusQueued           Status = "queued"
	StatusReserved         Status = "reserved"
	StatusAccepted         Status = "accepted"
	StatusAwaitingApproval Status = "awaiting_approval"
	StatusResolved         Status = "resolved"
	StatusReturnedToBot    Status = "returned_to_bot"
	StatusExpired          Status = "expired"
	StatusCanceled         Status = "canceled"
)

// Statuses lists every status.
func Statuses() []Status {
	return []Status{StatusQueued, StatusReserved, StatusAccepted, StatusAwaitingApproval, StatusResolved,
		StatusReturnedToBot, StatusExpired, StatusCanceled}
}

// OpenStatuses are the statuses in which a package still occupies its queue and its contact. In
// SQL a package is open while its closed_at is null, which a check on the handoffs table binds to
// these statuses (migrations/00008_open_until_closed.sql).
func OpenStatuses() []Status {
	return []Status{StatusQueued, StatusReserved, StatusAccepted, StatusAwaitingApproval}
}

// Open reports whether a package in this status still waits or is being worked.
func (s Status) Open() bool { return slices.Contains(OpenStatuses(), s) }

// Guard reasons, as a refused bot reads them.
const (
	ReasonContactHourly = "contact_hourly_limit"
	ReasonContactDaily  = "contact_daily_limit"
	ReasonCircular      = "circular_handoff"
	ReasonOpenHandoff   = "open_handoff"
)

// Reasons a warm phase ends without an accept, as the bot's warm_timeout names them (docs/warm.md).
// Every warm package's phase ends with exactly one accepted or warm_timeout, whatever path it
// takes: the last four name a package that left its queue while still warm.
const (
	WarmNoAgentOnline = "no_agent_online"
	WarmAllDeclined   = "all_declined"
	WarmWaitedTooLong = "waited_too_long"
	// WarmAgentGone: the agent it rang last went offline (closed the desk, or their instance
	// died) and nobody else is left to ring.
	WarmAgentGone     = "agent_gone"
	WarmCanceled      = "canceled"
	WarmExpired       = "expired"
	WarmReturnedToBot = "returned_to_bot"
)

// ReturnReasons are why a human sent the conversation back to the bot. They feed the bots' evals.
func ReturnReasons() []string {
	return []string{"resolved_by_policy", "wrong_escalation", "needs_more_info", "out_of_scope", "duplicate"}
}

// ResolutionCodes are what an agent closes a package with.
func ResolutionCodes() []string {
	return []string{"solved", "refunded", "workaround", "no_fault_found", "customer_unreachable"}
}

// Rank orders priorities as "next" takes them: 0 (urgent) first.
func (p Priority) Rank() int {
	return len(Priorities()) - 1 - slices.Index(Priorities(), p)
}

// PriorityOfRank is the priority of a rank, normal for a rank no priority has.
func PriorityOfRank(rank int) Priority {
	if rank < 0 || rank >= len(Priorities()) {
		return PriorityNormal
	}
	return Priorities()[len(Priorities())-1-rank]
}
