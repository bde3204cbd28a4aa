package server

import (
	"context"
	"errors"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/mcp"
)

// mcpPath is where the desk serves its bot API as MCP tools (SPEC §2b).
const mcpPath = "/mcp"

// handleMCP serves the MCP tools to a bot whose key requireBot checked: the tools act as that
// bot, with its key's queues, through the functions the REST routes call.
func (s *Server) handleMCP() echo.HandlerFunc {
	h, err := mcp.Handler(mcpDesk{s}, openAPI, s.logger)
	if err != nil {
		panic(err) // the binary's own OpenAPI document: every test reads it
	}
	return func(c echo.Context) error {
		req := c.Request()
		c.SetRequest(req.WithContext(context.WithValue(req.Context(), botContextKey{}, sender(c))))
		h.ServeHTTP(c.Response(), c.Request())
		return nil
	}
}

type botContextKey struct{}

// mcpDesk is the desk as the MCP tools call it, for the bot in the call's context.
type mcpDesk struct{ s *Server }

func bot(ctx context.Context) intake.Sender { return ctx.Value(botContextKey{}).(intake.Sender) }

func (d mcpDesk) HandOff(ctx context.Context, pkg []byte) (any, error) {
	if len(pkg) > maxPackageBytes {
		return nil, desk.Errorf(desk.TooLarge, "the package is over %d KiB", maxPackageBytes>>10)
	}
	return d.s.submit(ctx, bot(ctx), pkg)
}

func (d mcpDesk) Handoff(ctx context.Context, handoffID string) (any, error) {
	return d.s.intake.Get(ctx, bot(ctx), handoffID)
}

func (d mcpDesk) OpenHandoffs(ctx context.Context, contactID string) (any, error) {
	return d.s.listHandoffs(ctx, bot(ctx), contactID, true)
}

func (d mcpDesk) PostMessage(ctx context.Context, handoffID string, msg []byte) (any, error) {
	return d.s.postMessage(ctx, bot(ctx), handoffID, msg)
}

func (d mcpDesk) Messages(ctx context.Context, handoffID string, after int, wait time.Duration) (any, error) {
	return d.s.thread(ctx, bot(ctx), handoffID, after, wait)
}

func (d mcpDesk) Cancel(ctx context.Context, handoffID string) (any, error) {
	return d.s.cancel(ctx, bot(ctx), handoffID)
}

func (d mcpDesk) RecordCSAT(ctx context.Context, handoffID string, survey []byte) (any, error) {
	return d.s.recordCSAT(ctx, bot(ctx), handoffID, survey)
}

// Refusal is what the REST route answers for err (apiAnswer), logged as handleError logs it.
func (d mcpDesk) Refusal(err error) mcp.Refusal {
	status, body, retry := apiAnswer(err)
	switch {
	case errors.Is(err, context.Canceled):
		// The bot hung up on its call, a wait most likely: nobody reads the answer.
	case unavailable(err) != nil:
		d.s.logger.Warn("unavailable", "path", mcpPath, "reason", body.Reason, "err", err)
	case status >= 500 && status != 503:
		d.s.logger.Error("tool call failed", "path", mcpPath, "err", err)
	}
	return mcp.Refusal{Status: status, Body: body, Message: body.Error, Fields: body.Fields, RetryAfter: retry,
		Reason: body.Reason, Details: body.Details}
}
