// Package handoff defines the handoff package a support bot sends when it hands
// a conversation to a human: its schema v1 as Go types, the reading (Reader,
// Decode) and validation applied at the door, the JSON Schema published to bot
// authors, PII masking per receiver and redaction for exports, and the desk's
// vocabulary for a package's life (statuses, guard reasons, return reasons,
// resolution codes). It holds no SQL.
//
// The Go types are the source of truth. The JSON Schema in schema/handoff-v1.json
// is generated from them (see schema.go) and a test fails when it is stale.
package handoff

import "time"

// Package is a handoff package, schema v1: what a tier-2 agent needs to take
// over without asking the customer to repeat anything.
//
// Length caps on free text are in characters (Unicode code points), the unit
// JSON Schema's maxLength uses too. Caps the spec does not give are chosen to
// fit the largest legitimate value with room to spare while keeping a 200-turn
// package well inside the 256 KiB body limit: ids and names 128, a sentence or
// paragraph 1000, a message 10000, an email address 254 (RFC 5321), a phone
// number 32, a URI 2048, a language tag 35 (RFC 5646 §4.4.1).
//
// An optional string that is present must not be empty: leave the field out
// instead. That keeps the Go rules and the JSON Schema in agreement, as Go
// cannot tell an empty string from an absent one once decoded.
type Package struct {
	// Version of the package schema: "1." and a minor number. Fields are those of this schema whatever the minor.
	SchemaVersion string `json:"schema_version" validate:"required,schema_version"`
	// Client-chosen idempotency key: the same id and body sent again is answered as the first time.
	HandoffID string `json:"handoff_id" validate:"required,max=128,handoff_id"`
	// The bot run that produced this package; links the bot's trace to the human's.
	SourceRunID string `json:"source_run_id" validate:"required,notblank,max=128"`
	// Profile of the sending bot.
	SourceAgent string `json:"source_agent" validate:"required,notblank,max=128,visible_text"`
	// Name of the queue this package is for.
	TargetProfile string `json:"target_profile" validate:"required,notblank,max=128"`
	// Whether the bot stays in the conversation until a human joins (warm) or leaves at once (cold).
	TransferMode TransferMode `json:"transfer_mode" validate:"required,oneof"`
	// Why the bot stopped.
	Trigger Trigger `json:"trigger" validate:"required,oneof"`
	// Left out, the queue's default priority applies.
	Priority Priority `json:"priority,omitzero" validate:"omitempty,oneof"`
	// The bot's reason for the handoff, in its own words.
	Reason string `json:"reason,omitzero" validate:"max=500"`
	// The customer. Required, as its id is.
	Contact Contact `json:"contact"`
	// The bot already verified the customer's identity; the agent must not verify again.
	UserVerified bool `json:"user_verified,omitzero"`
	// The problem in one paragraph: what a human reads first.
	ProblemStatement string `json:"problem_statement" validate:"required,max=1000,single_paragraph"`
	// Facts the bot established, such as account_id. A queue may require some keys.
	StructuredEntities map[string]EntityValue `json:"structured_entities,omitzero" validate:"max=100"`
	// What the bot already tried, in order: the audit trail, without raw tool output.
	AttemptedActions []AttemptedAction `json:"attempted_actions,omitzero" validate:"max=50,dive"`
	// Questions the bot could not answer.
	OpenQuestions []string `json:"open_questions,omitzero" validate:"max=50,dive,required,notblank,max=1000"`
	// What the bot thinks the human should do next.
	RecommendedNextStep string `json:"recommended_next_step,omitzero" validate:"max=1000"`
	// The bot's draft of the next reply to the customer, for the agent to edit and send.
	DraftReply string `json:"draft_reply,omitzero" validate:"max=10000"`
	// Sources the bot relied on, as URIs with a scheme: crm://ticket/8812, policy://billing-refunds#4.2, https://...
	Citations []string `json:"citations,omitzero" validate:"max=50,dive,required,max=2048,uri"`
	// The customer's mood as the bot judged it.
	Sentiment Sentiment `json:"sentiment,omitzero" validate:"omitempty,oneof"`
	// The customer's language, as a BCP 47 tag such as en-US.
	Locale string `json:"locale,omitzero" validate:"omitempty,max=35,bcp47"`
	// Channel the customer used to reach the bot.
	ChannelOrigin Channel `json:"channel_origin,omitzero" validate:"omitempty,oneof"`
	// Channel the human should answer on.
	ChannelTarget Channel `json:"channel_target,omitzero" validate:"omitempty,oneof"`
	// A money action the customer asked for; above the queue's threshold it needs a supervisor.
	Refund *Refund `json:"refund,omitzero"`
	// The conversation so far, oldest turn first.
	Transcript []Turn `json:"transcript,omitzero" validate:"max=200,dive"`
	// Agents this conversation already passed through, oldest first.
	HandoffChain []string `json:"handoff_chain,omitzero" validate:"max=50,dive,required,notblank,max=128"`
	// Email of the desk user to offer the package to first, if online with capacity.
	PreferredAgent string `json:"preferred_agent,omitzero" validate:"omitempty,max=254,email"`
	// Free-form flags about the package's privacy, such as pii_redacted_in_summary.
	PrivacyFlags map[string]bool `json:"privacy_flags,omitzero" validate:"max=50"`
}

// Contact is the customer. Everything but the id is PII.
type Contact struct {
	// The customer's id in the CRM.
	ID string `json:"id" validate:"required,notblank,max=128"`
	// The name to greet the customer by.
	DisplayName string `json:"display_name,omitzero" validate:"max=200,visible_text"`
	// The customer's email address.
	Email string `json:"email,omitzero" validate:"omitempty,max=254,email"`
	// The customer's phone number, in any format.
	Phone string `json:"phone,omitzero" validate:"max=32"`
}

// AttemptedAction is one thing the bot tried before handing off.
type AttemptedAction struct {
	// Name of the tool the bot called.
	Tool string `json:"tool" validate:"required,notblank,max=128"`
	// What came of it, summarised: not the tool's raw output.
	Result string `json:"result" validate:"required,notblank,max=1000"`
	// Whether it succeeded; left out when the bot cannot tell.
	OK *bool `json:"ok,omitzero"`
	// When the bot called the tool (RFC 3339).
	At *time.Time `json:"at,omitzero"`
}

// Refund is a refund the customer asked for.
type Refund struct {
	// Positive decimal string, such as "49.99": a string so no float rounds it.
	Amount string `json:"amount" validate:"required,amount"`
	// ISO 4217 currency code, such as USD.
	Currency string `json:"currency" validate:"required,iso4217"`
}

// RefundOutcome is what a package resolved as refunded paid back, beside what its bot asked for
// (the package's refund; empty when it asked for none): the outcome, the bot's webhook and the
// eval record carry it, so a partial refund reads as one.
type RefundOutcome struct {
	Amount            string `json:"amount"`
	Currency          string `json:"currency"`
	RequestedAmount   string `json:"requested_amount,omitempty"`
	RequestedCurrency string `json:"requested_currency,omitempty"`
	// Partial is true when less was refunded than asked, in the same currency.
	Partial bool `json:"partial"`
}

// Turn is one message of the transcript.
type Turn struct {
	// Who spoke.
	Role Role `json:"role" validate:"required,oneof"`
	// What was said.
	Content string `json:"content" validate:"required,max=20000"`
	// When it was said (RFC 3339).
	At *time.Time `json:"at,omitzero"`
}
