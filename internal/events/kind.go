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
	// An agent added an internal note (Change.Note) to the package: its timeline shows it to
	// everyone who may see the package. The bot is never told.
	Noted Kind = "noted"

	// Warm transfers. An offer rings one agent (Event.UserID) for the queue's accept
	// window; its end (detail.outcome: accepted, declined, timed_out, withdrawn, taken) frees the
	// agent's ring. A warm package whose warm phase ends without an accept tells its bot
	// warm_timeout (reason: no_agent_online, all_declined, agent_gone, waited_too_long; or
	// canceled, expired, returned_to_bot when it leaves its queue still warm), exactly once.
	Offered     Kind = "offered"
	OfferEnded  Kind = "offer_ended"
	WarmTimeout Kind = "warm_timeout"

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

	// An admin's changes of people (/admin). They change access like the kinds above: the
	// person's cached sessions go and their open pages reload.
	UserCreated     Kind = "user_created"
	UserChanged     Kind = "user_changed" // name, capacity or queues; the detail says before → after
	UserEnabled     Kind = "user_enabled"
	PasswordReset   Kind = "password_reset"   // an admin set a temporary password; the sessions ended
	PasswordChanged Kind = "password_changed" // the person chose a new one

	// An admin's changes of the desk's configuration (/admin): the audit's record, and on every
	// instance the signal to drop cached keys. They name no person and no package, so no socket is
	// sent them (Kind.Configures).
	QueueCreated       Kind = "queue_created"
	QueueChanged       Kind = "queue_changed" // settings or enabled; the detail says before → after
	APIKeyCreated      Kind = "api_key_created"
	APIKeyChanged      Kind = "api_key_changed"
	APIKeyRevoked      Kind = "api_key_revoked"
	WebhookRedelivered Kind = "webhook_redelivered"

	// A bot key's webhook signing secret was replaced (detail: the key, and until when the old
	// one still signs). Neither secret is logged.
	WebhookSecretRotated Kind = "webhook_secret_rotated"

	// The desk's single sign-on settings changed (detail: each setting, before → after), from
	// /admin or the command line.
	SSOSettingsChanged Kind = "sso_settings_changed"

	// A supervisor moved a held package to another agent of its queue, or took it over themselves
	// (actions.Reassign): the bot hears the new agent's name, the previous holder's pages move.
	Reassigned Kind = "reassigned"

	// The conversation after the handoff (internal/conversation). Message: a message joined the
	// package's thread (detail: its seq and role); every open view of the package shows it, and the
	// bot, which sent it, hears nothing back. Reopened: a customer's message reopened a package
	// resolved within its queue's reopen window: the bot hears it waits for an agent again.
	Message  Kind = "message"
	Reopened Kind = "reopened"
	// ReplyDelivery: the deliverer recorded where a reply's webhook stands (detail: state,
	// delivered, pending or dead). Open views of the package show the reply's state anew; the
	// bot, whom it is about, is not told.
	ReplyDelivery Kind = "reply_delivery"
	// Viewing: who has the package open changed (live.Presence): its open views show their
	// viewers anew. Desk-only: no timeline, no webhook, no actor.
	Viewing Kind = "viewing"
)

// Kinds lists every kind.
func Kinds() []Kind {
	return []Kind{Queued, Reserved, Released, Accepted, Rejected, Transferred, ReturnedToBot, Resolved,
		Expired, Canceled, Presence, SignedOut, UserDisabled, RoleChanged, MemberRemoved, Reply,
		WebhookSecretRotated, Offered, OfferEnded, WarmTimeout,
		UserCreated, UserChanged, UserEnabled, PasswordReset, PasswordChanged,
		QueueCreated, QueueChanged, APIKeyCreated, APIKeyChanged, APIKeyRevoked, WebhookRedelivered,
		ApprovalRequested, ApprovalGranted, ApprovalDenied, ApprovalExpired, ApprovalWithdrawn,
		SSOSettingsChanged, Noted, Reassigned, Message, Reopened, ReplyDelivery, Viewing}
}

// ChangesAccess reports whether changes of this kind are about a person's access rather than a
// package: they name the person, and no package.
func (k Kind) ChangesAccess() bool {
	switch k {
	case SignedOut, UserDisabled, RoleChanged, MemberRemoved, UserCreated, UserChanged, UserEnabled, PasswordReset, PasswordChanged:
		return true
	}
	return false
}

// Configures reports whether changes of this kind are an admin's change of a queue, a bot key or
// a webhook delivery: the audit's, never a browser's to be sent.
func (k Kind) Configures() bool {
	switch k {
	case QueueCreated, QueueChanged, APIKeyCreated, APIKeyChanged, APIKeyRevoked, WebhookRedelivered, WebhookSecretRotated,
		SSOSettingsChanged:
		return true
	}
	return false
}

// TellsBot reports whether the package's bot receives a webhook for changes of this kind. Desk-only
// kinds (a reservation, its release, presence) are no business of the bot's.
func (k Kind) TellsBot() bool {
	switch k {
	case Queued, Accepted, Rejected, Transferred, ReturnedToBot, Resolved, Expired, Canceled, Reply, WarmTimeout, Reassigned, Reopened:
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

// Rings reports whether changes of this kind start or end a ring: they name the ringing agent
// (Event.UserID), whose every open page shows or drops the ring.
func (k Kind) Rings() bool { return k == Offered || k == OfferEnded }

// NamesPerson reports whether changes of this kind name a person (Event.UserID, the log's
// subject_user): whose access changed, the agent a ring rings, and the agent a reassignment gave
// the package to, whose pages then follow it. Every other change names nobody.
func (k Kind) NamesPerson() bool { return k.ChangesAccess() || k.Rings() || k == Reassigned }
