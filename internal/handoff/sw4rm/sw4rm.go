// Package sw4rm takes handoffs from SW4RM, an agent orchestration protocol:
// it reads a SW4RM HandoffRequest and converts it into a handoff package, so
// that a SW4RM swarm can hand a conversation to a human as it would to
// another agent.
package sw4rm

import (
	"slices"
	"time"

	"github.com/handoffdesk/desk/internal/handoff"
)

// SW4RM defines the request twice, and the desk takes the union: its
// handoff.proto has request_id, from_agent, to_agent, reason,
// context_snapshot (bytes), capabilities_required, priority (int32) and
// timeout (Duration); its Python SDK adds preserve_history (default true) and
// metadata, and serializes the context_snapshot as the JSON of a
// HandoffContext{conversation_history, tool_state, metadata}. JSON members
// use the protocol's snake_case field names, which protobuf's JSON parsers
// also accept. context_snapshot is base64, as protobuf's JSON mapping
// writes bytes; the HandoffContext object itself is also accepted inline.
//
// The conversion is lossy on purpose: a package is a boundary contract, not a
// dump of the swarm's state. The fields of Request, Context and Message say
// what the desk reads of each part.

// Request is a SW4RM HandoffRequest, less its context snapshot, which
// Decode returns apart as a Context.
type Request struct {
	// The sender's id for the request. When set it is the package's
	// handoff_id; when not, Package derives one from the request's content.
	RequestID string `json:"request_id,omitzero"`
	// The sending agent: the package's source_agent.
	FromAgent string `json:"from_agent"`
	// The agent asked for; the server resolves it to a queue. Empty asks for
	// routing by CapabilitiesRequired, as in SW4RM.
	ToAgent string `json:"to_agent,omitzero"`
	// Why the agent hands off; the problem statement when metadata has none.
	Reason string `json:"reason,omitzero"`
	// True, SW4RM's default, for a warm handoff that carries the
	// conversation; false for a cold one that leaves it behind.
	PreserveHistory bool `json:"preserve_history"`
	// Skills the receiver needs; the server matches them against queue skills.
	CapabilitiesRequired []string `json:"capabilities_required,omitzero"`
	// handoff.proto's priority. SW4RM gives it no scale, so nothing maps it
	// to the desk's priorities: metadata["priority"] does that.
	Priority int32 `json:"priority,omitzero"`
	// How long the sender waits for an answer; zero for no limit. The package
	// has no place for it: the queue's TTL decides how long a package waits.
	Timeout time.Duration `json:"timeout,omitzero"`
	// Free string entries. The keys in metadataFields fill package fields;
	// every other key becomes a structured entity.
	Metadata map[string]string `json:"metadata,omitzero"`
}

// Context is the part of a SW4RM HandoffContext the desk keeps. The
// context's own metadata describes the swarm (its timestamps, capabilities,
// resources), not the customer, so it is checked and dropped.
type Context struct {
	// The conversation, oldest message first.
	ConversationHistory []Message `json:"conversation_history,omitzero"`
	// The sender's tool state as encoding/json decodes JSON with UseNumber:
	// an object in SW4RM's SDK; a list of actions is accepted too.
	ToolState any `json:"tool_state,omitzero"`
}

// Message is one message of a conversation history.
type Message struct {
	// The role as the sender wrote it; see roles for the spellings read.
	Role string `json:"role"`
	// The text of the message; text parts of a content list are joined.
	Content string `json:"content,omitzero"`
	// When it was said, from "at" or "timestamp".
	At *time.Time `json:"at,omitzero"`
}

// Status is a HandoffStatus, as SW4RM's SDK writes it in JSON.
type Status string

const (
	Pending   Status = "PENDING"
	Accepted  Status = "ACCEPTED"
	Rejected  Status = "REJECTED"
	Completed Status = "COMPLETED"
)

// Response is the HandoffResponse the desk answers a HandoffRequest with.
//
// It has the members of the SDK's HandoffResponse and no others, so that a
// client that builds that class from the JSON reads it; the request's
// request_id comes back in the SW4RM-Request-Id header instead.
type Response struct {
	// True when the desk took the request, with Status PENDING; that a human
	// accepted it comes later, by webhook. False when the desk refused it, or
	// when a replay finds the handoff ended without a human (REJECTED).
	Accepted bool `json:"accepted"`
	// The package's handoff_id, for the other endpoints and the webhooks.
	HandoffID string `json:"handoff_id"`
	// Why the desk refused, for people; empty when Accepted.
	RejectionReason string `json:"rejection_reason,omitzero"`
	Status          Status `json:"status"`
	// What the native API answers besides (queue, position, url) and, on a
	// refusal, its code and reason.
	Metadata map[string]string `json:"metadata,omitzero"`
}

// StatusOf tells a SW4RM sender where its handoff is. SW4RM knows no
// supervisor approval, so awaiting_approval counts as accepted (a human has
// it), and every way of ending without resolution counts as rejected.
func StatusOf(s handoff.Status) Status {
	switch s {
	case handoff.StatusAccepted, handoff.StatusAwaitingApproval:
		return Accepted
	case handoff.StatusResolved:
		return Completed
	case handoff.StatusReturnedToBot, handoff.StatusExpired, handoff.StatusCanceled:
		return Rejected
	}
	return Pending
}

// Caps applied to what the conversion derives rather than what the sender
// wrote: these are trimmed to fit the package, never refused.
const (
	maxTurns       = 200   // Package.Transcript; the last turns matter most
	maxActions     = 50    // Package.AttemptedActions; likewise
	maxTurnContent = 20000 // Turn.Content
	maxSummary     = 1000  // AttemptedAction.Result, an entity's text, problem_statement
	maxEntities    = 100   // Package.StructuredEntities
)

// maxCapabilities bounds the list routing has to match, as the package
// bounds its lists.
const maxCapabilities = 50

// schemaVersion is the schema version of the packages the conversion builds.
const schemaVersion = "1.0"

// Decode reads a SW4RM HandoffRequest from a request body and checks it as
// far as it can before the server has chosen a queue.
//
// A body that is not JSON, a context_snapshot that is not base64, or one
// that does not decode to JSON gives a *handoff.SyntaxError; for the last,
// its offset counts in the decoded snapshot. Anything else wrong gives a
// *handoff.ValidationError naming every problem by its path in the request:
// unknown members, values of the wrong JSON type, and every rule the
// resulting package would break, such as "metadata.contact_id" when the
// contact is missing. null counts as absent, as in protobuf's JSON mapping
// and for a Python None. Besides the rules handoff.FieldError lists, timeout
// can break "duration" (not a duration) and "min" (negative).
//
// With a *handoff.ValidationError the request and context still hold what
// decoded.
func Decode(body []byte) (Request, Context, error) {
	d := decoder{r: handoff.NewReader(body), body: body}
	d.req.PreserveHistory = true
	isObject := d.r.Object("a JSON object (a SW4RM HandoffRequest)", d.requestMember)
	if err := d.r.End(); err != nil {
		return Request{}, Context{}, err
	}
	if !isObject {
		return Request{}, Context{}, handoff.NewValidationError(d.r.Problems())
	}
	if d.snapshotErr != nil {
		return d.req, d.ctx, d.snapshotErr
	}
	_, errs := d.req.convert(d.ctx, "")
	// The queue comes from routing, which needs this request first.
	errs = slices.DeleteFunc(errs, func(f handoff.FieldError) bool { return f.Field == "target_profile" })
	return d.req, d.ctx, handoff.NewValidationError(append(d.r.Problems(), errs...))
}

// Package converts the request into a schema v1 package for queue, the queue
// the server routed it to by to_agent or capabilities_required. It returns a
// *handoff.ValidationError naming the request's fields, not the package's,
// when the result breaks a rule; a request from Decode without error can
// only fail here on the queue name.
//
// Queue rules are not checked: the errors of
// handoff.Package.ValidateForQueue name structured_entities.KEY, which for a
// SW4RM sender is metadata.KEY.
func (r Request) Package(ctx Context, queue string) (handoff.Package, error) {
	p, errs := r.convert(ctx, queue)
	return p, handoff.NewValidationError(errs)
}
