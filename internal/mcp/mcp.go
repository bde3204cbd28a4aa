// Package mcp serves the desk's bot API as Model Context Protocol tools (SPEC §2b), so that a
// bot's model hands off with one tool call and reads the human's answer with another. Each tool
// is a thin call into the same code as its REST route (the Desk the server gives it), so a tool
// call and a request obey one set of rules, guards, scopes and idempotency; tools.go lists them.
//
// It speaks Streamable HTTP with the official Go SDK, stateless: every POST carries its own bot
// key, which the server checks as it checks REST's, so any instance answers any call and nothing
// is kept between calls.
package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/handoffdesk/desk/internal/handoff"
)

// Desk is what the tools call: the functions behind the REST routes, for the bot whose key the
// request carried (the server keeps it in the context). Each returns what its route answers.
type Desk interface {
	HandOff(ctx context.Context, pkg []byte) (any, error)                                       // POST /api/v1/handoffs
	Handoff(ctx context.Context, handoffID string) (any, error)                                 // GET /api/v1/handoffs/{id}
	OpenHandoffs(ctx context.Context, contactID string) (any, error)                            // GET /api/v1/handoffs?contact_id=…&open=true
	PostMessage(ctx context.Context, handoffID string, msg []byte) (any, error)                 // POST /api/v1/handoffs/{id}/messages
	Messages(ctx context.Context, handoffID string, after int, wait time.Duration) (any, error) // GET /api/v1/handoffs/{id}/messages
	Cancel(ctx context.Context, handoffID string) (any, error)                                  // POST /api/v1/handoffs/{id}/cancel
	RecordCSAT(ctx context.Context, handoffID string, survey []byte) (any, error)               // POST /api/v1/handoffs/{id}/csat
	// Refusal is what the REST route answers for err.
	Refusal(err error) Refusal
}

// Refusal is a refused call as the REST route answers it: the status, the JSON body (the tool
// result's structured content, exactly) and what the model reads of it.
type Refusal struct {
	Status     int
	Body       any
	Message    string
	Fields     []handoff.FieldError
	RetryAfter time.Duration
	// Reason and Details are the body's, for the tool's advice on what to do instead (toolHints).
	Reason  string
	Details map[string]string
}

// MaxBody bounds a call's JSON-RPC message: a package at its limit (256 KiB) with room for the
// envelope around it. The package's own limit is the desk's to check, as for REST.
const MaxBody = 256<<10 + 16<<10

// Version is the server version MCP clients are told.
const Version = "1.0.0"

// Handler serves the tools over Streamable HTTP. doc is the bot API's OpenAPI document, whose
// schemas the tools' input schemas are.
func Handler(d Desk, doc []byte, logger *slog.Logger) (http.Handler, error) {
	o, err := readOpenAPI(doc)
	if err != nil {
		return nil, err
	}
	server := sdk.NewServer(&sdk.Implementation{Name: "handoff-desk", Title: "Handoff Desk", Version: Version},
		&sdk.ServerOptions{Instructions: instructions, Logger: logger})
	for _, t := range tools(d, o) {
		server.AddTool(t.tool, t.handler(d))
	}
	return sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server },
		&sdk.StreamableHTTPOptions{Stateless: true, Logger: logger, MaxRequestBodyBytes: MaxBody}), nil
}

// handler turns a tool's call into a result: the route's answer as structured content, with a
// line for the model before it; a refusal as an error result the model can repair from.
func (t tool) handler(d Desk) sdk.ToolHandler {
	return func(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
		args := req.Params.Arguments
		if len(args) == 0 {
			args = json.RawMessage(`{}`)
		}
		answer, err := t.call(ctx, args)
		if err != nil {
			r := d.Refusal(err)
			return &sdk.CallToolResult{IsError: true, StructuredContent: r.Body, Content: []sdk.Content{&sdk.TextContent{Text: r.text(t.tool.Name)}}}, nil
		}
		body, err := json.Marshal(answer)
		if err != nil {
			return nil, err
		}
		return &sdk.CallToolResult{StructuredContent: json.RawMessage(body),
			Content: []sdk.Content{&sdk.TextContent{Text: t.next + "\n\n" + string(body)}}}, nil
	}
}

// text is the refusal as the model reads it: what was wrong, each bad field with its rule, and
// when to try again.
func (r Refusal) text(tool string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s refused (HTTP %d): %s", tool, r.Status, r.Message)
	if len(r.Fields) > 0 {
		b.WriteString("\nFix every field below and call ")
		b.WriteString(tool)
		b.WriteString(" again with the same arguments otherwise:")
		for _, f := range r.Fields {
			field := f.Field
			if field == "" {
				field = "(the arguments as a whole)"
			}
			fmt.Fprintf(&b, "\n- %s [%s]: %s", field, f.Rule, f.Message)
		}
	}
	if hint := hints[r.Reason]; hint != nil {
		b.WriteString("\n")
		b.WriteString(hint(r.Details))
	}
	if r.RetryAfter > 0 {
		fmt.Fprintf(&b, "\nTry again in %d seconds, not before.", int(math.Ceil(r.RetryAfter.Seconds())))
	}
	return b.String()
}

// hints say, for the refusals whose message names a REST route, what to do with the tools instead.
var hints = map[string]func(details map[string]string) string{
	handoff.ReasonOpenHandoff: func(d map[string]string) string {
		return fmt.Sprintf("The customer has handoff %s open: relay their messages to it with post_customer_message {handoff_id: %q} instead of handing off again.",
			d["open_handoff_id"], d["open_handoff_id"])
	},
	handoff.ReasonCircular: func(map[string]string) string {
		return "A customer who writes again after a resolve is no new handoff: relay their message to that handoff with post_customer_message and its handoff_id, which reopens it within the queue's reopen window."
	},
	"handoff_closed": func(d map[string]string) string {
		return fmt.Sprintf("The handoff is %s: the conversation is yours; call handoff_to_human with a new package if the customer needs a human again.", d["status"])
	},
}
