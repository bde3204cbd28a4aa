package handoff

// The desk's second input format: the HandoffRequest of SW4RM, an agent
// orchestration protocol, so that a SW4RM swarm can hand a conversation to a
// human as it would to another agent.
//
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
// dump of the swarm's state. What the desk reads from each part is in the
// tables below.

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// SW4RMRequest is a SW4RM HandoffRequest, less its context snapshot, which
// DecodeSW4RM returns apart as an SW4RMContext.
type SW4RMRequest struct {
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
	// Free string entries. The keys in sw4rmMetadata fill package fields;
	// every other key becomes a structured entity.
	Metadata map[string]string `json:"metadata,omitzero"`
}

// SW4RMContext is the part of a SW4RM HandoffContext the desk keeps. The
// context's own metadata describes the swarm (its timestamps, capabilities,
// resources), not the customer, so it is checked and dropped.
type SW4RMContext struct {
	// The conversation, oldest message first.
	ConversationHistory []SW4RMMessage `json:"conversation_history,omitzero"`
	// The sender's tool state as encoding/json decodes JSON with UseNumber:
	// an object in SW4RM's SDK; a list of actions is accepted too.
	ToolState any `json:"tool_state,omitzero"`
}

// SW4RMMessage is one message of a conversation history.
type SW4RMMessage struct {
	// The role as the sender wrote it; see sw4rmRoles for the spellings read.
	Role string `json:"role"`
	// The text of the message; text parts of a content list are joined.
	Content string `json:"content,omitzero"`
	// When it was said, from "at" or "timestamp".
	At *time.Time `json:"at,omitzero"`
}

// SW4RMStatus is a HandoffStatus, as SW4RM's SDK writes it in JSON.
type SW4RMStatus string

const (
	SW4RMPending   SW4RMStatus = "PENDING"
	SW4RMAccepted  SW4RMStatus = "ACCEPTED"
	SW4RMRejected  SW4RMStatus = "REJECTED"
	SW4RMCompleted SW4RMStatus = "COMPLETED"
)

// SW4RMResponse is the HandoffResponse the desk answers a HandoffRequest with.
type SW4RMResponse struct {
	// Echoes the request's request_id, as handoff.proto's response does.
	RequestID string `json:"request_id,omitzero"`
	// True when the desk took the request, with Status PENDING; that a human
	// accepted it comes later, by webhook. False when the desk refused it.
	Accepted bool `json:"accepted"`
	// The package's handoff_id, for the other endpoints and the webhooks.
	HandoffID string `json:"handoff_id"`
	// Why the desk refused, for people; empty when Accepted.
	RejectionReason string      `json:"rejection_reason,omitzero"`
	Status          SW4RMStatus `json:"status"`
	// What the native API answers besides (queue, position, url) and, on a
	// refusal, its code and reason.
	Metadata map[string]string `json:"metadata,omitzero"`
}

// SW4RMStatusOf tells a SW4RM sender where its handoff is. SW4RM knows no
// supervisor approval, so awaiting_approval counts as accepted (a human has
// it), and every way of ending without resolution counts as rejected.
func SW4RMStatusOf(s Status) SW4RMStatus {
	switch s {
	case StatusAccepted, StatusAwaitingApproval:
		return SW4RMAccepted
	case StatusResolved:
		return SW4RMCompleted
	case StatusReturnedToBot, StatusExpired, StatusCanceled:
		return SW4RMRejected
	}
	return SW4RMPending
}

// Caps applied to what the conversion derives rather than what the sender
// wrote: these are trimmed to fit the package, never refused.
const (
	sw4rmMaxTurns       = 200   // Package.Transcript; the last turns matter most
	sw4rmMaxActions     = 50    // Package.AttemptedActions; likewise
	sw4rmMaxTurnContent = 20000 // Turn.Content
	sw4rmMaxSummary     = 1000  // AttemptedAction.Result, an entity's text, problem_statement
	sw4rmMaxEntities    = 100   // Package.StructuredEntities
)

// sw4rmMaxCapabilities bounds the list routing has to match, as the package
// bounds its lists.
const sw4rmMaxCapabilities = 50

// sw4rmVersion is the schema version of the packages the conversion builds.
const sw4rmVersion = "1.0"

// DecodeSW4RM reads a SW4RM HandoffRequest from a request body and checks it
// as far as it can before the server has chosen a queue.
//
// A body that is not JSON, a context_snapshot that is not base64, or one that
// does not decode to JSON gives a *SyntaxError; for the last, its offset
// counts in the decoded snapshot. Anything else wrong gives a
// *ValidationError naming every problem by its path in the request: unknown
// members, values of the wrong JSON type, and every rule the resulting
// package would break, such as "metadata.contact_id" when the contact is
// missing. null counts as absent, as in protobuf's JSON mapping and for a
// Python None. Besides the rules FieldError lists, timeout can break
// "duration" (not a duration) and "min" (negative).
//
// With a *ValidationError the request and context still hold what decoded.
func DecodeSW4RM(body []byte) (SW4RMRequest, SW4RMContext, error) {
	d := sw4rmDecoder{r: NewReader(body), body: body}
	d.req.PreserveHistory = true
	isObject := d.r.Object("a JSON object (a SW4RM HandoffRequest)", d.requestMember)
	if err := d.r.End(); err != nil {
		return SW4RMRequest{}, SW4RMContext{}, err
	}
	if !isObject {
		return SW4RMRequest{}, SW4RMContext{}, NewValidationError(d.r.Problems())
	}
	if d.snapshotErr != nil {
		return d.req, d.ctx, d.snapshotErr
	}
	_, errs := d.req.convert(d.ctx, "")
	// The queue comes from routing, which needs this request first.
	errs = slices.DeleteFunc(errs, func(f FieldError) bool { return f.Field == "target_profile" })
	return d.req, d.ctx, NewValidationError(append(d.r.Problems(), errs...))
}

// Package converts the request into a schema v1 package for queue, the queue
// the server routed it to by to_agent or capabilities_required. It returns a
// *ValidationError naming the request's fields, not the package's, when the
// result breaks a rule; a request from DecodeSW4RM without error can only
// fail here on the queue name.
//
// Queue rules are not checked: the errors of ValidateForQueue name
// structured_entities.KEY, which for a SW4RM sender is metadata.KEY.
func (r SW4RMRequest) Package(ctx SW4RMContext, queue string) (Package, error) {
	p, errs := r.convert(ctx, queue)
	return p, NewValidationError(errs)
}

// sw4rmDecoder reads a request. Each member first sets its field back to its
// default, as a member given again replaces the earlier one, and a null
// leaves it there.
type sw4rmDecoder struct {
	r           *Reader
	body        []byte
	snapshotErr error // from context_snapshot: ends decoding with a 400
	req         SW4RMRequest
	ctx         SW4RMContext
}

func (d *sw4rmDecoder) requestMember(name string) {
	r := &d.req
	switch name {
	case "request_id":
		d.text(&r.RequestID)
	case "from_agent":
		d.text(&r.FromAgent)
	case "to_agent":
		d.text(&r.ToAgent)
	case "reason":
		d.text(&r.Reason)
	case "context_snapshot":
		d.snapshot()
	case "preserve_history":
		r.PreserveHistory = true
		if d.given() {
			if b, ok := d.r.Bool("a boolean"); ok {
				r.PreserveHistory = b
			}
		}
	case "capabilities_required":
		d.texts(&r.CapabilitiesRequired)
	case "priority":
		d.integer(&r.Priority)
	case "timeout":
		d.duration(&r.Timeout)
	case "metadata":
		d.metadata(&r.Metadata)
	default:
		d.r.Unknown("a SW4RM HandoffRequest")
	}
}

func (d *sw4rmDecoder) contextMember(name string) {
	switch name {
	case "conversation_history":
		d.ctx.ConversationHistory = nil
		if d.given() {
			d.history()
		}
	case "tool_state":
		d.ctx.ToolState = nil
		if !d.given() {
			return
		}
		switch d.r.Kind() {
		case '{', '[':
			d.ctx.ToolState = d.r.Value()
		default:
			d.r.WrongType("an object or an array")
		}
	case "metadata":
		if d.given() {
			d.r.Object("an object", func(string) {})
		}
	default:
		d.r.Unknown("a SW4RM HandoffContext")
	}
}

// given reads a null, which counts as absent, and reports whether a value
// is there instead.
func (d *sw4rmDecoder) given() bool {
	if d.r.Kind() == 'n' {
		d.r.Skip()
		return false
	}
	return true
}

func (d *sw4rmDecoder) text(dst *string) {
	*dst = ""
	if d.given() {
		*dst, _ = d.r.String("a string")
	}
}

func (d *sw4rmDecoder) texts(dst *[]string) {
	*dst = nil
	if !d.given() {
		return
	}
	d.r.Array("an array of strings", func(int) {
		if s, ok := d.r.String("a string"); ok {
			*dst = append(*dst, s)
		}
	})
}

func (d *sw4rmDecoder) integer(dst *int32) {
	*dst = 0
	if !d.given() {
		return
	}
	n, ok := d.r.Number("an integer")
	if !ok {
		return
	}
	i, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil {
		d.r.Problem(ruleType, "must be a 32-bit integer")
		return
	}
	*dst = int32(i)
}

// duration reads seconds as SW4RM's Python SDK writes them, or a duration
// string as protobuf's JSON mapping writes a Duration ("30s", "1.5s").
func (d *sw4rmDecoder) duration(dst *time.Duration) {
	*dst = 0
	if !d.given() {
		return
	}
	switch d.r.Kind() {
	case '0':
		n, _ := d.r.Number("")
		secs, err := n.Float64()
		if err == nil && math.Abs(secs) < math.MaxInt64/float64(time.Second) {
			*dst = time.Duration(secs * float64(time.Second))
			return
		}
	case '"':
		s, _ := d.r.String("")
		if t, err := time.ParseDuration(s); err == nil {
			*dst = t
			return
		}
	default:
		d.r.WrongType(`a number of seconds or a duration string like "30s"`)
		return
	}
	d.r.Problem("duration", `must be a number of seconds or a duration string like "30s"`)
}

// metadata takes numbers and booleans as their JSON text, since SW4RM's
// Python SDK allows any value where the desk wants strings.
func (d *sw4rmDecoder) metadata(dst *map[string]string) {
	*dst = nil
	if !d.given() {
		return
	}
	md := map[string]string{}
	isObject := d.r.Object("an object", func(key string) {
		delete(md, key) // in case an earlier member of that name set it
		switch d.r.Kind() {
		case '"':
			md[key], _ = d.r.String("")
		case '0':
			n, _ := d.r.Number("")
			md[key] = string(n)
		case 't', 'f':
			b, _ := d.r.Bool("")
			md[key] = strconv.FormatBool(b)
		case 'n': // absent, as a Python None
		default:
			d.r.WrongType("a string, number or boolean")
		}
	})
	if isObject {
		*dst = md
	}
}

func (d *sw4rmDecoder) snapshot() {
	d.ctx, d.snapshotErr = SW4RMContext{}, nil
	if !d.given() {
		return
	}
	switch d.r.Kind() {
	case '{':
		d.r.Object("", d.contextMember)
	case '"':
		s, _ := d.r.String("")
		if s == "" { // protobuf's JSON for empty bytes
			return
		}
		raw, err := sw4rmBase64(s)
		if err != nil {
			d.snapshotErr = d.base64Error(err)
			return
		}
		d.snapshotErr = d.r.ReadEmbedded(raw, "after base64 decoding", func() {
			d.r.Object("the base64 of a JSON object (a serialized HandoffContext)", d.contextMember)
		})
		if d.snapshotErr != nil {
			d.ctx = SW4RMContext{}
		}
	default:
		d.r.WrongType("a base64 string or a JSON object")
	}
}

// sw4rmBase64 accepts what protobuf's JSON mapping accepts for bytes: the
// standard or URL-safe alphabet, with or without padding.
func sw4rmBase64(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

// base64Error points at the bad character in the body, so the sender can
// find it as they would a JSON error.
func (d *sw4rmDecoder) base64Error(err error) *SyntaxError {
	at := d.r.StringOffset()
	var corrupt base64.CorruptInputError
	if errors.As(err, &corrupt) {
		at += 1 + int64(corrupt) // past the opening quote
	}
	return NewSyntaxError(d.body, at+1, "context_snapshot is not valid base64: "+err.Error())
}

// history reads messages as LLM APIs write them. Members other than role,
// content, at and timestamp are skipped rather than refused: such messages
// carry tool calls, names and ids that a tier-2 agent does not read.
func (d *sw4rmDecoder) history() {
	d.r.Array("an array of messages", func(int) {
		var m SW4RMMessage
		// "at" is the package's name, so it wins over "timestamp".
		var at, timestamp *time.Time
		var atGiven bool
		isObject := d.r.Object("a message object", func(name string) {
			switch name {
			case "role":
				d.text(&m.Role)
			case "content":
				m.Content = d.content()
			case "at":
				at, atGiven = d.timestamp()
			case "timestamp":
				timestamp, _ = d.timestamp()
			}
		})
		if !isObject {
			return
		}
		m.At = timestamp
		if atGiven {
			m.At = at
		}
		d.ctx.ConversationHistory = append(d.ctx.ConversationHistory, m)
	})
}

// content reads a string, or the text parts of a list of content parts, the
// form of multimodal messages; other parts (images, tool calls) are skipped.
func (d *sw4rmDecoder) content() string {
	switch d.r.Kind() {
	case 'n':
		d.r.Skip()
		return ""
	case '"':
		s, _ := d.r.String("")
		return s
	case '[':
		var texts []string
		d.r.Array("", func(int) {
			if d.r.Kind() != '{' {
				return
			}
			var text string
			var isText bool
			d.r.Object("", func(name string) {
				if name != "text" {
					return
				}
				text, isText = "", false
				if d.r.Kind() == '"' {
					text, isText = d.r.String("")
				}
			})
			if isText {
				texts = append(texts, text)
			}
		})
		return strings.Join(texts, "\n")
	}
	d.r.WrongType("a string or a list of content parts")
	return ""
}

// timestamp reads a time, and reports whether one was given rather than null.
func (d *sw4rmDecoder) timestamp() (*time.Time, bool) {
	if !d.given() {
		return nil, false
	}
	t, ok := sw4rmTime(d.r.Value())
	if !ok {
		d.r.Problem(ruleDatetime, "must be an RFC 3339 timestamp, like 2026-06-02T14:03:11Z, or Unix seconds")
		return nil, true
	}
	return &t, true
}

// sw4rmTime reads an RFC 3339 string or Unix seconds, Python's time.time().
func sw4rmTime(v any) (time.Time, bool) {
	switch x := v.(type) {
	case string:
		t, err := time.Parse(time.RFC3339, x)
		return t.UTC(), err == nil
	case json.Number:
		f, err := x.Float64()
		// Past 2286 it is milliseconds, JavaScript's Date.now(), sent by mistake.
		if err != nil || f < 0 || f >= 1e10 {
			return time.Time{}, false
		}
		secs, frac := math.Modf(f)
		return time.Unix(int64(secs), int64(frac*1e9)).UTC(), true
	}
	return time.Time{}, false
}

// sw4rmField is a package field that a metadata entry fills.
type sw4rmField struct {
	path string // in the package, for errors
	// set stores v, or returns a message completing "metadata.KEY " when v is unusable.
	set func(p *Package, v string) string
}

// sw4rmMetadata maps the metadata keys the desk understands. The rest become
// structured entities, as they are facts the bot established, like account_id.
var sw4rmMetadata = map[string]sw4rmField{
	"contact_id":            {"contact.id", func(p *Package, v string) string { p.Contact.ID = v; return "" }},
	"contact_name":          {"contact.display_name", func(p *Package, v string) string { p.Contact.DisplayName = v; return "" }},
	"contact_email":         {"contact.email", func(p *Package, v string) string { p.Contact.Email = v; return "" }},
	"contact_phone":         {"contact.phone", func(p *Package, v string) string { p.Contact.Phone = v; return "" }},
	"user_verified":         {"user_verified", setSW4RMUserVerified},
	"trigger":               {"trigger", setSW4RMTrigger},
	"priority":              {"priority", func(p *Package, v string) string { p.Priority = Priority(v); return "" }},
	"sentiment":             {"sentiment", func(p *Package, v string) string { p.Sentiment = Sentiment(v); return "" }},
	"locale":                {"locale", func(p *Package, v string) string { p.Locale = v; return "" }},
	"channel_origin":        {"channel_origin", func(p *Package, v string) string { p.ChannelOrigin = Channel(v); return "" }},
	"channel_target":        {"channel_target", func(p *Package, v string) string { p.ChannelTarget = Channel(v); return "" }},
	"problem_statement":     {"problem_statement", func(p *Package, v string) string { p.ProblemStatement = v; return "" }},
	"recommended_next_step": {"recommended_next_step", func(p *Package, v string) string { p.RecommendedNextStep = v; return "" }},
	"draft_reply":           {"draft_reply", func(p *Package, v string) string { p.DraftReply = v; return "" }},
	"preferred_agent":       {"preferred_agent", func(p *Package, v string) string { p.PreferredAgent = v; return "" }},
	"run_id":                {"source_run_id", func(p *Package, v string) string { p.SourceRunID = v; return "" }},
	"refund_amount":         {"refund.amount", func(p *Package, v string) string { sw4rmRefund(p).Amount = v; return "" }},
	"refund_currency":       {"refund.currency", func(p *Package, v string) string { sw4rmRefund(p).Currency = v; return "" }},
}

func setSW4RMUserVerified(p *Package, v string) string {
	b, err := strconv.ParseBool(v)
	if err != nil {
		return `must be "true" or "false"`
	}
	p.UserVerified = b
	return ""
}

// setSW4RMTrigger keeps a valid trigger only: an unknown one is the sender's own
// vocabulary, and the conversion derives a trigger instead.
func setSW4RMTrigger(p *Package, v string) string {
	if slices.Contains(Triggers(), Trigger(v)) {
		p.Trigger = Trigger(v)
	}
	return ""
}

func sw4rmRefund(p *Package) *Refund {
	if p.Refund == nil {
		p.Refund = &Refund{}
	}
	return p.Refund
}

// sw4rmRoles maps the role spellings of common LLM APIs to transcript roles.
var sw4rmRoles = map[string]Role{
	"user": RoleUser, "human": RoleUser, "customer": RoleUser,
	"assistant": RoleAssistant, "ai": RoleAssistant, "agent": RoleAssistant, "bot": RoleAssistant, "model": RoleAssistant,
	"tool": RoleTool, "function": RoleTool,
	"system": RoleSystem, "developer": RoleSystem,
}

// sw4rmConversion builds a package from a request and remembers, for each package
// field it filled, the request field it came from, so that errors name what
// the sender wrote.
type sw4rmConversion struct {
	p    Package
	from map[string]string // package path → request path
	errs []FieldError      // already in request paths
}

// sw4rmSourced is an item of a list the conversion trims, with its request path.
type sw4rmSourced[T any] struct {
	v    T
	from string
}

func (r SW4RMRequest) convert(ctx SW4RMContext, queue string) (Package, []FieldError) {
	c := sw4rmConversion{from: map[string]string{
		"source_agent":        "from_agent",
		"reason":              "reason",
		"structured_entities": "metadata",
	}}
	// Errors about a field that metadata fills, present or not (a missing
	// contact), name the metadata key.
	for key, field := range sw4rmMetadata {
		c.from[field.path] = "metadata." + key
	}
	c.p = Package{
		SchemaVersion: sw4rmVersion,
		SourceAgent:   r.FromAgent,
		TargetProfile: queue,
		TransferMode:  TransferModeCold,
		Reason:        r.Reason,
	}
	if r.PreserveHistory {
		c.p.TransferMode = TransferModeWarm
	}
	c.requestRules(r)
	c.handoffID(r, ctx)
	c.metadata(r.Metadata)

	if c.p.Trigger == "" {
		c.p.Trigger = TriggerUserRequest
		if len(r.CapabilitiesRequired) > 0 {
			c.p.Trigger = TriggerCapabilityMismatch
		}
	}
	if strings.TrimSpace(c.p.ProblemStatement) == "" {
		c.p.ProblemStatement = r.Reason
		c.from["problem_statement"] = "reason"
	}
	c.p.ProblemStatement = firstParagraph(c.p.ProblemStatement, sw4rmMaxSummary)
	if c.p.SourceRunID == "" {
		c.p.SourceRunID = c.p.HandoffID
		delete(c.from, "source_run_id")
		if from, ok := c.from["handoff_id"]; ok {
			c.from["source_run_id"] = from
		}
	}
	if r.PreserveHistory {
		c.transcript(ctx.ConversationHistory)
	}
	c.toolState(ctx.ToolState)
	c.p.timesToUTC()

	errs := c.errs
	for _, fe := range c.p.fieldErrors() {
		errs = append(errs, c.translate(fe))
	}
	return c.p, errs
}

// requestRules checks the fields that route the request rather than fill the package.
func (c *sw4rmConversion) requestRules(r SW4RMRequest) {
	if utf8.RuneCountInString(r.ToAgent) > 128 {
		c.errs = append(c.errs, tooLong("to_agent", 128))
	}
	if len(r.CapabilitiesRequired) > sw4rmMaxCapabilities {
		c.errs = append(c.errs, FieldError{Field: "capabilities_required", Rule: ruleMax,
			Message: fmt.Sprintf("capabilities_required must have at most %d items", sw4rmMaxCapabilities)})
	}
	for i, capability := range r.CapabilitiesRequired {
		path := fmt.Sprintf("capabilities_required[%d]", i)
		if strings.TrimSpace(capability) == "" {
			c.errs = append(c.errs, FieldError{Field: path, Rule: "notblank", Message: path + " must not be blank"})
		} else if utf8.RuneCountInString(capability) > 128 {
			c.errs = append(c.errs, tooLong(path, 128))
		}
	}
	if r.Timeout < 0 {
		c.errs = append(c.errs, FieldError{Field: "timeout", Rule: "min", Message: "timeout must not be negative"})
	}
}

// handoffID takes the sender's request id, or derives one from the request's
// content: a retry of the same request then gets the same id, and the desk
// answers it as a replay instead of queueing the customer twice. The content
// is hashed as decoded, so whitespace, member order and the choice between a
// base64 and an inline context do not change the id.
func (c *sw4rmConversion) handoffID(r SW4RMRequest, ctx SW4RMContext) {
	if r.RequestID != "" {
		c.p.HandoffID = r.RequestID
		c.from["handoff_id"] = "request_id"
		return
	}
	content, err := json.Marshal(struct {
		Request SW4RMRequest `json:"request"`
		Context SW4RMContext `json:"context"`
	}{r, ctx})
	if err != nil { // only for a ToolState built in Go from values JSON cannot hold
		c.errs = append(c.errs, FieldError{Field: "context_snapshot.tool_state", Rule: ruleType,
			Message: "context_snapshot.tool_state must hold JSON values only: " + err.Error()})
		return
	}
	sum := sha256.Sum256(content)
	c.p.HandoffID = "sw4rm_" + hex.EncodeToString(sum[:16])
}

func (c *sw4rmConversion) metadata(md map[string]string) {
	for _, key := range slices.Sorted(maps.Keys(md)) {
		v, path := md[key], "metadata."+key
		field, known := sw4rmMetadata[key]
		switch {
		case known:
			if problem := field.set(&c.p, v); problem != "" {
				c.errs = append(c.errs, FieldError{Field: path, Rule: ruleType, Message: path + " " + problem})
			}
		case strings.TrimSpace(v) != "":
			c.entity(key, StringEntity(v), path)
		}
	}
}

func (c *sw4rmConversion) entity(key string, v EntityValue, from string) {
	if c.p.StructuredEntities == nil {
		c.p.StructuredEntities = map[string]EntityValue{}
	}
	c.p.StructuredEntities[key] = v
	c.from["structured_entities."+key] = from
}

func (c *sw4rmConversion) transcript(history []SW4RMMessage) {
	const path = "context_snapshot.conversation_history"
	var turns []sw4rmSourced[Turn]
	for i, m := range history {
		from := fmt.Sprintf("%s[%d]", path, i)
		role, ok := sw4rmRoles[strings.ToLower(m.Role)]
		if !ok {
			c.errs = append(c.errs, sw4rmRoleError(from+".role", m.Role))
			continue
		}
		// Messages that only call tools have no text for a human to read.
		if strings.TrimSpace(m.Content) == "" {
			continue
		}
		turns = append(turns, sw4rmSourced[Turn]{Turn{Role: role, Content: truncateText(m.Content, sw4rmMaxTurnContent), At: m.At}, from})
	}
	c.p.Transcript = keepLastSourced(turns, sw4rmMaxTurns, "transcript", c.from)
}

func sw4rmRoleError(path, role string) FieldError {
	if role == "" {
		return FieldError{Field: path, Rule: ruleRequired, Message: path + " is required"}
	}
	return FieldError{Field: path, Rule: "oneof", Message: fmt.Sprintf("%s %q must be one of: %s",
		path, role, strings.Join(slices.Sorted(maps.Keys(sw4rmRoles)), ", "))}
}

// toolState reads attempted actions from lists shaped like them, and sums up
// everything else as entities, so the agent sees what the bot knew without
// the package carrying raw tool state.
func (c *sw4rmConversion) toolState(state any) {
	const path = "context_snapshot.tool_state"
	var actions []sw4rmSourced[AttemptedAction]
	if obj, ok := state.(map[string]any); ok {
		for _, key := range slices.Sorted(maps.Keys(obj)) {
			if found, ok := sw4rmActionList(path+"."+key, obj[key]); ok {
				actions = append(actions, found...)
			} else {
				c.summary("tool_state."+key, path+"."+key, obj[key])
			}
		}
	} else if found, ok := sw4rmActionList(path, state); ok {
		actions = found
	} else {
		c.summary("tool_state", path, state)
	}
	c.p.AttemptedActions = keepLastSourced(actions, sw4rmMaxActions, "attempted_actions", c.from)
}

// sw4rmActionList reads v as attempted actions if it is a non-empty list of
// objects with tool and result strings, and an ok boolean and an at time at
// most.
func sw4rmActionList(path string, v any) ([]sw4rmSourced[AttemptedAction], bool) {
	items, ok := v.([]any)
	if !ok || len(items) == 0 {
		return nil, false
	}
	actions := make([]sw4rmSourced[AttemptedAction], len(items))
	for i, item := range items {
		obj, ok := item.(map[string]any)
		if !ok {
			return nil, false
		}
		var a AttemptedAction
		for key, val := range obj {
			switch key {
			case "tool":
				a.Tool, ok = val.(string)
			case "result":
				var result string
				result, ok = val.(string)
				a.Result = truncateText(result, sw4rmMaxSummary)
			case "ok":
				var b bool
				b, ok = val.(bool)
				a.OK = &b
			case "at":
				var t time.Time
				t, ok = sw4rmTime(val)
				a.At = &t
			default:
				ok = false
			}
			if !ok {
				return nil, false
			}
		}
		if strings.TrimSpace(a.Tool) == "" || strings.TrimSpace(a.Result) == "" {
			return nil, false
		}
		actions[i] = sw4rmSourced[AttemptedAction]{a, fmt.Sprintf("%s[%d]", path, i)}
	}
	return actions, true
}

// summary stores v as a string entity, while the package has room; the
// sender's metadata, read first, keeps its entities.
func (c *sw4rmConversion) summary(key, from string, v any) {
	key = sw4rmEntityKey(key)
	if _, taken := c.p.StructuredEntities[key]; taken || len(c.p.StructuredEntities) >= sw4rmMaxEntities {
		return
	}
	var text string
	switch x := v.(type) {
	case nil:
		return
	case string:
		text = x
	case json.Number:
		text = string(x)
	case bool:
		text = strconv.FormatBool(x)
	default:
		b, err := json.Marshal(x)
		if err != nil {
			c.errs = append(c.errs, FieldError{Field: from, Rule: ruleType, Message: from + " must hold JSON values only: " + err.Error()})
			return
		}
		text = string(b)
	}
	if strings.TrimSpace(text) != "" {
		c.entity(key, StringEntity(truncateText(text, sw4rmMaxSummary)), from)
	}
}

// sw4rmEntityKey makes a tool state key fit the rule of entity keys, as the
// sender chose those keys for its tools, not for the desk.
func sw4rmEntityKey(key string) string {
	b := []byte(key)
	for i, ch := range b {
		if !(ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || strings.IndexByte("_.:-", ch) >= 0) {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 64)])
}

// keepLastSourced returns the last n items, recording where each came from under
// its index in the package list field.
func keepLastSourced[T any](items []sw4rmSourced[T], n int, field string, from map[string]string) []T {
	items = items[max(len(items)-n, 0):]
	out := make([]T, len(items))
	for i, item := range items {
		out[i] = item.v
		from[fmt.Sprintf("%s[%d]", field, i)] = item.from
	}
	return out
}

// translate renames a package field error after the request field the value
// came from: the longest recorded package path containing the field wins.
func (c *sw4rmConversion) translate(fe FieldError) FieldError {
	best := ""
	for pkgPath := range c.from {
		if len(pkgPath) > len(best) && within(fe.Field, pkgPath) {
			best = pkgPath
		}
	}
	if best == "" {
		return fe
	}
	to := c.from[best] + fe.Field[len(best):]
	if rest, ok := strings.CutPrefix(fe.Message, fe.Field); ok {
		fe.Message = to + rest
	}
	fe.Field = to
	return fe
}

// firstParagraph keeps the first paragraph of s, cut to n characters.
func firstParagraph(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i, line := range lines {
		if strings.TrimSpace(line) == "" {
			lines = lines[:i]
			break
		}
	}
	return truncateText(strings.Join(lines, "\n"), n)
}

// truncateText cuts s to n characters, the last an ellipsis to show the cut.
func truncateText(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
