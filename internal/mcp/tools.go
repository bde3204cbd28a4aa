package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/csat"
	"github.com/handoffdesk/desk/internal/handoff"
)

// instructions is what a client may give its model about the server as a whole.
const instructions = `Handoff Desk: hand the customer's conversation to a human support agent, and take it back when the human is done.
Call handoff_to_human when the customer asks for a person, when policy does not let you act, or when you tried and cannot solve it.
After a handoff, stop answering the customer yourself: relay each message they write with post_customer_message, and pass on the human's replies, which get_messages returns.
When get_messages or get_handoff says the handoff is resolved or returned_to_bot, the conversation is yours again: get_handoff's hand_back says what the human did (done), which facts they confirmed or corrected, what the customer was told last (last_reply) and what you must do now (instruction). Follow it, and do not hand off again for what the human settled.`

// tool is one MCP tool: its definition as clients list it, the line the model reads before a
// successful answer, and the call into the desk.
type tool struct {
	tool *sdk.Tool
	next string
	call func(ctx context.Context, args []byte) (any, error)
}

// tools lists every tool, each beside its REST route, as routes.go lists routes. Each decodes its
// arguments by the desk's rules for a request body (every bad field named at once) and calls the
// same function as the route.
func tools(d Desk, doc openAPI) []tool {
	return []tool{
		{ // POST /api/v1/handoffs
			tool: &sdk.Tool{Name: "handoff_to_human", Title: "Hand off to a human agent",
				Annotations: &sdk.ToolAnnotations{IdempotentHint: true, OpenWorldHint: new(true), DestructiveHint: new(false)},
				InputSchema: json.RawMessage(handoff.Schema()),
				Description: `Hand the conversation to a human support agent. Call it when the customer asks for a person, when policy does not let you act (a refund over your limit, a legal or safety matter), or when you tried and cannot solve the problem.
The arguments are the handoff package (schema v1). Write problem_statement so that an agent can act without reading the chat; put what you tried in attempted_actions, the facts you know in structured_entities, and the answer you would give in draft_reply, which the agent may send as it is. Choose a handoff_id of your own: calling again with the same handoff_id and the same package is safe, and answers as the first call did.
A refusal lists every bad field with its rule: fix them all and call again with the same handoff_id. A refusal for an open handoff names it: relay to that one instead of handing off again.
After it succeeds, stop answering the customer yourself: tell them a person will take over, relay each message they write with post_customer_message, and wait for the human's replies with get_messages.`},
			next: "Handed off. Stop answering the customer yourself: tell them a person will take over, relay each message they write with post_customer_message, and wait for the human's replies with get_messages.",
			call: d.HandOff,
		},
		{ // GET /api/v1/handoffs/{id}
			tool: &sdk.Tool{Name: "get_handoff", Title: "Read a handoff's status",
				Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)},
				InputSchema: object(doc, prop{"handoff_id", handoffIDSchema(doc), true}),
				Description: `Read where a handoff stands. status is queued (waiting for an agent), reserved or accepted (an agent has it), awaiting_approval (a supervisor decides a refund), resolved (the agent solved it), returned_to_bot (the agent gave the conversation back to you), canceled or expired.
When it is resolved or returned_to_bot, the conversation is yours again. hand_back says what to carry on with: done (what the agent did), confirmed and corrected (the package's facts the agent checked; use the corrected values from now on), last_reply (what the customer was told last: do not contradict it or repeat an older promise) and instruction (what you must do now). outcome and outcome_note give the agent's code and note. Do not hand off again for what the human settled.`},
			next: "The handoff as the desk has it:",
			call: func(ctx context.Context, args []byte) (any, error) {
				var a idArgs
				if err := decode(args, &a); err != nil {
					return nil, err
				}
				return d.Handoff(ctx, a.HandoffID)
			},
		},
		{ // POST /api/v1/handoffs/{id}/messages
			tool: &sdk.Tool{Name: "post_customer_message", Title: "Relay the customer's message",
				Annotations: &sdk.ToolAnnotations{IdempotentHint: true, OpenWorldHint: new(true), DestructiveHint: new(false)},
				InputSchema: object(doc, append([]prop{{"handoff_id", handoffIDSchema(doc), true}}, doc.properties("MessageIn")...)...),
				Description: `Relay to the desk a message of the conversation after the handoff, so that the human agent reads what the customer said. Post every message the customer writes as role user, in order, each with a message_id of your own: the same message_id with the same message again is safe (it is not posted twice). On a user message, draft_reply is the answer you would give, which the agent may use.
While no agent holds the handoff you may post what you yourself tell the customer (role assistant), so the agent sees it; once an agent holds it, do not talk to the customer: the human does.
A customer message on a handoff resolved within the queue's reopen window reopens it for the same agent.`},
			next: "Relayed: the message is in the thread at the seq below. Keep relaying the customer's messages, and read the human's replies with get_messages.",
			call: func(ctx context.Context, args []byte) (any, error) {
				id, msg, err := splitID(args, func(body []byte) error { _, err := conversation.Decode(body); return err })
				if err != nil {
					return nil, err
				}
				return d.PostMessage(ctx, id, msg)
			},
		},
		{ // GET /api/v1/handoffs/{id}/messages
			tool: &sdk.Tool{Name: "get_messages", Title: "Read the human's replies",
				Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)},
				InputSchema: object(doc, prop{"handoff_id", handoffIDSchema(doc), true},
					prop{"after", map[string]any{"type": "integer", "minimum": 0, "description": "Only messages after this seq: the highest seq you have read (0, or left out: the whole thread)."}, false},
					prop{"wait_seconds", map[string]any{"type": "integer", "minimum": 0, "maximum": maxWaitSeconds,
						"description": "How long to wait for the human's next reply when there is none after `after` yet, at most 30 (0, or left out: do not wait)."}, false}),
				Description: `Read the thread of a handoff after seq after: the customer's messages, yours, and the human agent's replies (role agent). Pass each agent reply on to the customer word for word, then call again with after = the highest seq you have read.
With wait_seconds (at most 30) it waits for the agent's next reply, or for the handoff to close, and answers as soon as one comes; an empty messages list means no reply yet: call again.
status says whether the human still has the conversation. When it is resolved or returned_to_bot, the conversation is yours again: read get_handoff's hand_back (what the agent did, the facts they corrected, what the customer was told last, your instruction) and carry on from there.`},
			next: "The thread after the seq you gave, and the handoff's status. Pass each reply with role agent on to the customer word for word; if status is resolved or returned_to_bot the conversation is yours again.",
			call: func(ctx context.Context, args []byte) (any, error) {
				var a messagesArgs
				if err := decode(args, &a); err != nil {
					return nil, err
				}
				return d.Messages(ctx, a.HandoffID, int(a.After), time.Duration(a.WaitSeconds)*time.Second)
			},
		},
		{ // POST /api/v1/handoffs/{id}/cancel
			tool: &sdk.Tool{Name: "cancel_handoff", Title: "Cancel a handoff",
				Annotations: &sdk.ToolAnnotations{IdempotentHint: false, OpenWorldHint: new(true), DestructiveHint: new(true)},
				InputSchema: object(doc, prop{"handoff_id", handoffIDSchema(doc), true}),
				Description: `Cancel a handoff that is still open because the customer left or no longer needs a person: it leaves the agents' queue. Do not cancel in order to hand off again; relay to the open handoff instead.`},
			next: "Canceled: the handoff left the queue.",
			call: func(ctx context.Context, args []byte) (any, error) {
				var a idArgs
				if err := decode(args, &a); err != nil {
					return nil, err
				}
				return d.Cancel(ctx, a.HandoffID)
			},
		},
		{ // POST /api/v1/handoffs/{id}/csat
			tool: &sdk.Tool{Name: "record_csat", Title: "Record the customer's verdict",
				Annotations: &sdk.ToolAnnotations{IdempotentHint: false, OpenWorldHint: new(false), DestructiveHint: new(false)},
				InputSchema: object(doc, append([]prop{{"handoff_id", handoffIDSchema(doc), true}}, doc.properties("CSATIn")...)...),
				Description: `Record the customer's verdict on a handoff that has closed (resolved, returned_to_bot, canceled or expired): the score from 1 (very bad) to 5 (very good) they gave in the survey you ran, their comment if they wrote one, and which leg they rated: human for the agents' part of the conversation, bot for yours.
Ask the customer once the conversation ended, and record what they said: each leg is recorded once, and a handoff still open is refused. Do not make a score up when the customer gave none.`},
			next: "Recorded: the customer's verdict is kept with the handoff.",
			call: func(ctx context.Context, args []byte) (any, error) {
				id, survey, err := splitID(args, func(body []byte) error { _, err := csat.Decode(body); return err })
				if err != nil {
					return nil, err
				}
				return d.RecordCSAT(ctx, id, survey)
			},
		},
		{ // GET /api/v1/handoffs?contact_id=…&open=true
			tool: &sdk.Tool{Name: "list_open_handoffs", Title: "A customer's open handoffs",
				Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, IdempotentHint: true, OpenWorldHint: new(false)},
				InputSchema: object(doc, prop{"contact_id", map[string]any{"type": "string", "minLength": 1, "maxLength": 128,
					"description": "The customer's id, as in the package's contact.id."}, true}),
				Description: `List the customer's handoffs that are still open (queued, reserved, accepted or awaiting_approval), newest first. Call it when a customer comes back, before handing off: if one is open, relay their messages to it with post_customer_message instead of handing off again.`},
			next: "The customer's open handoffs (an empty list: none is open):",
			call: func(ctx context.Context, args []byte) (any, error) {
				var a contactArgs
				if err := decode(args, &a); err != nil {
					return nil, err
				}
				return d.OpenHandoffs(ctx, a.ContactID)
			},
		},
	}
}

// maxWaitSeconds bounds get_messages' wait_seconds: a call answers within the desk's request time.
const maxWaitSeconds = 30

// The tools' own arguments, checked by the rules a request body is: every bad field named at once.
type (
	idArgs struct {
		HandoffID string `json:"handoff_id" validate:"required,max=128,handoff_id"`
	}
	messagesArgs struct {
		HandoffID   string `json:"handoff_id" validate:"required,max=128,handoff_id"`
		After       int64  `json:"after" validate:"min=0"`
		WaitSeconds int64  `json:"wait_seconds" validate:"min=0,max=30"`
	}
	contactArgs struct {
		ContactID string `json:"contact_id" validate:"required,max=128"`
	}
)

// decode reads a tool's own arguments into dst.
func decode(args []byte, dst any) error {
	err := handoff.DecodeObject(args, dst, "the tool's arguments")
	var invalid *handoff.ValidationError
	if errors.As(err, &invalid) {
		invalid.Subject = "call"
	}
	return err
}

// splitID takes handoff_id out of a tool's arguments, leaving the body its REST route takes. A
// missing or bad handoff_id is refused with the body's own bad fields (check's), all in one answer.
func splitID(args []byte, check func(body []byte) error) (string, []byte, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(args, &members); err != nil {
		return "", nil, decode(args, &idArgs{}) // the desk's reader says what is wrong with it
	}
	idOnly := map[string]json.RawMessage{}
	if id, ok := members["handoff_id"]; ok {
		idOnly["handoff_id"] = id
		delete(members, "handoff_id")
	}
	rawID, _ := json.Marshal(idOnly) // raw messages always encode
	body, _ := json.Marshal(members) // as do they in a map
	var a idArgs
	err := decode(rawID, &a)
	var badID, badBody *handoff.ValidationError
	if !errors.As(err, &badID) {
		return a.HandoffID, body, err
	}
	if errors.As(check(body), &badBody) {
		both := handoff.NewValidationError(append(badID.Fields, badBody.Fields...)).(*handoff.ValidationError)
		both.Subject = badBody.Subject
		return "", nil, both
	}
	return "", nil, err
}
