package handoff

// The value lists below are functions so that no caller can change what the
// validator and the JSON Schema accept.

// TransferMode says whether the bot stays with the customer until a human joins.
type TransferMode string

const (
	TransferModeWarm TransferMode = "warm"
	TransferModeCold TransferMode = "cold"
)

// TransferModes lists the valid transfer modes.
func TransferModes() []TransferMode {
	return []TransferMode{TransferModeWarm, TransferModeCold}
}

// Trigger is why the bot handed off.
type Trigger string

const (
	TriggerPolicyBoundary     Trigger = "policy_boundary"
	TriggerLowConfidence      Trigger = "low_confidence"
	TriggerToolFailure        Trigger = "tool_failure"
	TriggerUserRequest        Trigger = "user_request"
	TriggerSLASentiment       Trigger = "sla_sentiment"
	TriggerCapabilityMismatch Trigger = "capability_mismatch"
)

// Triggers lists the valid triggers.
func Triggers() []Trigger {
	return []Trigger{
		TriggerPolicyBoundary, TriggerLowConfidence, TriggerToolFailure,
		TriggerUserRequest, TriggerSLASentiment, TriggerCapabilityMismatch,
	}
}

// Priority orders a queue; the empty Priority means "the queue's default".
type Priority string

const (
	PriorityLow    Priority = "low"
	PriorityNormal Priority = "normal"
	PriorityHigh   Priority = "high"
	PriorityUrgent Priority = "urgent"
)

// Priorities lists the valid priorities, lowest first.
func Priorities() []Priority {
	return []Priority{PriorityLow, PriorityNormal, PriorityHigh, PriorityUrgent}
}

// Sentiment is the customer's mood as the bot judged it.
type Sentiment string

const (
	SentimentPositive   Sentiment = "positive"
	SentimentNeutral    Sentiment = "neutral"
	SentimentFrustrated Sentiment = "frustrated"
	SentimentAngry      Sentiment = "angry"
	SentimentUnknown    Sentiment = "unknown"
)

// Sentiments lists the valid sentiments.
func Sentiments() []Sentiment {
	return []Sentiment{SentimentPositive, SentimentNeutral, SentimentFrustrated, SentimentAngry, SentimentUnknown}
}

// Channel is a way of talking to the customer.
type Channel string

const (
	ChannelChat  Channel = "chat"
	ChannelVoice Channel = "voice"
	ChannelEmail Channel = "email"
	ChannelSMS   Channel = "sms"
	ChannelWeb   Channel = "web"
)

// Channels lists the valid channels.
func Channels() []Channel {
	return []Channel{ChannelChat, ChannelVoice, ChannelEmail, ChannelSMS, ChannelWeb}
}

// Role is who spoke in a transcript turn.
type Role string

const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
	RoleSystem    Role = "system"
)

// Roles lists the valid transcript roles.
func Roles() []Role {
	return []Role{RoleUser, RoleAssistant, RoleTool, RoleSystem}
}

// allowedValues returns the valid values of an enum-typed value, and false for
// any other value. The validator's oneof rule, its error messages and the JSON
// Schema generator all read the lists through it.
func allowedValues(v any) ([]string, bool) {
	switch v := v.(type) {
	case TransferMode:
		return asStrings(TransferModes()), true
	case Trigger:
		return asStrings(Triggers()), true
	case Priority:
		return asStrings(Priorities()), true
	case Sentiment:
		return asStrings(Sentiments()), true
	case Channel:
		return asStrings(Channels()), true
	case Role:
		return asStrings(Roles()), true
	case interface{ AllowedValues() []string }: // the enums of other documents of the bot API
		return v.AllowedValues(), true
	}
	return nil, false
}

func asStrings[T ~string](values []T) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = string(v)
	}
	return out
}
