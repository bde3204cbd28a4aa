// Package events is the desk's one append-only log of what happened to packages and to people's
// access. Every change writes one row, in its own transaction: the live desk reads the log by
// transaction-id watermark to move every open browser, the audit reads the same rows, and the
// changes a bot hears about also write its webhook. The database refuses UPDATE, DELETE and
// TRUNCATE on the log.
package events

// Kind is what happened. Writers, the live desk and the webhooks all read this one list; the
// events table's check constraint (migrations/00017_approvals.sql) holds the same.
type Kind string

const (
	Queued        Kind = "queued"
	Reserved      Kind = "reserved"
	Released      Kind = "released" // a reservation ran out and the package went back to its queue
	Accepted      Kind = "accepted"
	Rejected      Kind = "rejected"
	Transferred   Kind = "transferred"
	ReturnedToBot Kind = "returned_to_bot"
	Resolved      Kind = "resolved"
	Expired       Kind = "expired"
	Canceled      Kind = "canceled"
	Presence      Kind = "presence" // someone's presence changed: supervisors' rosters refresh
	// An agent sent a reply on the package. The bot's webhook carries the text: the bot owns the
	// conversation and passes the reply on to the customer's channel.
	Reply Kind = "reply"

	// The steps of a refund approval (internal/approvals): each tells the bot, whose customer
	// waits on the refund.
	ApprovalRequested Kind = "approval_requested"
	ApprovalGranted   Kind = "approval_granted"
	ApprovalDenied    Kind = "approval_denied"
	ApprovalExpired   Kind = "approval_expired"
	ApprovalWithdrawn Kind = "approval_withdrawn"

	// The changes of a person's access. Each names its subject (Event.UserID), whose open sockets
	// every instance closes: what they show was rendered for the access they had.
	SignedOut     Kind = "signed_out" // one of their sessions ended
	UserDisabled  Kind = "user_disabled"
	RoleChanged   Kind = "role_changed"
	MemberRemoved Kind = "member_removed" // they no longer work the queue (Event.QueueID)
)

// Kinds lists every kind.
func Kinds() []Kind {
	return []Kind{Queued, Reserved, Released, Accepted, Rejected, Transferred, ReturnedToBot, Resolved,
		Expired, Canceled, Presence, SignedOut, UserDisabled, RoleChanged, MemberRemoved, Reply,
		ApprovalRequested, ApprovalGranted, ApprovalDenied, ApprovalExpired, ApprovalWithdrawn}
}

// ChangesAccess reports whether changes of this kind are about a person's access rather than a
// package: they name the person, and no package.
func (k Kind) ChangesAccess() bool {
	switch k {
	case SignedOut, UserDisabled, RoleChanged, MemberRemoved:
		return true
	}
	return false
}

// TellsBot reports whether the package's bot receives a webhook for changes of this kind. Desk-only
// kinds (a reservation, its release, presence) are no business of the bot's.
func (k Kind) TellsBot() bool {
	switch k {
	case Queued, Accepted, Rejected, Transferred, ReturnedToBot, Resolved, Expired, Canceled, Reply:
		return true
	case ApprovalRequested, ApprovalGranted, ApprovalDenied, ApprovalExpired, ApprovalWithdrawn:
		return true
	}
	return false
}

// IsApproval reports whether the change is a step of a refund approval: the supervisors'
// /approvals page follows these.
func (k Kind) IsApproval() bool {
	switch k {
	case ApprovalRequested, ApprovalGranted, ApprovalDenied, ApprovalExpired, ApprovalWithdrawn:
		return true
	}
	return false
}
