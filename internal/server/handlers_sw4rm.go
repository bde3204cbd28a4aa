package server

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/handoff/sw4rm"
)

// sw4rmRequestID is the header that echoes a SW4RM request's request_id: the spec's
// HandoffResponse has no such member, and a client that builds its class from the JSON breaks
// on one it does not know.
const sw4rmRequestID = "SW4RM-Request-Id"

// handleSW4RM takes a SW4RM HandoffRequest through the same intake as a native package. When the
// desk refuses the handoff itself (no queue has the capabilities: 422; 409, 429, 503) it answers a
// rejected HandoffResponse, as SW4RM's own routers do; malformed or invalid requests get the
// native error bodies.
func (s *Server) handleSW4RM(c echo.Context) error {
	body, err := readJSON(c)
	if err != nil {
		return err
	}
	req, conversation, err := sw4rm.Decode(body)
	if err != nil {
		return err
	}
	if req.RequestID != "" {
		c.Response().Header().Set(sw4rmRequestID, req.RequestID)
	}
	ctx := c.Request().Context()
	queueName, err := s.intake.Route(ctx, sender(c), req.ToAgent, req.CapabilitiesRequired)
	if verr, ok := errors.AsType[*handoff.ValidationError](err); ok && len(verr.Fields) == 1 && verr.Fields[0].Rule == "route" {
		// The id it would have had: Package fails on the missing queue alone.
		pkg, _ := req.Package(conversation, "")
		return c.JSON(http.StatusUnprocessableEntity, sw4rm.Response{
			Accepted: false, HandoffID: pkg.HandoffID, RejectionReason: verr.Fields[0].Message, Status: sw4rm.Rejected,
			Metadata: map[string]string{"code": desk.Invalid, "reason": "no_capable_queue"},
		})
	}
	if err != nil {
		return err
	}
	pkg, err := req.Package(conversation, queueName)
	if err != nil {
		return err
	}
	receipt, err := s.intake.Submit(ctx, sender(c), pkg)
	s.followUnanswered(err, pkg.HandoffID)
	var refusal *desk.Error
	if errors.As(err, &refusal) && (refusal.Code == desk.Conflict || refusal.Code == desk.RateLimited || refusal.Code == desk.Unavailable) {
		metadata := map[string]string{"code": refusal.Code, "reason": refusal.Reason}
		for k, v := range refusal.Details {
			metadata[k] = v
		}
		setRetryAfter(c, refusal)
		return c.JSON(statusOf[refusal.Code], sw4rm.Response{
			Accepted: false, HandoffID: pkg.HandoffID, RejectionReason: refusal.Message, Status: sw4rm.Rejected, Metadata: metadata,
		})
	}
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if receipt.Replayed {
		status = http.StatusOK
	}
	metadata := map[string]string{
		"queue": receipt.Queue, "position": strconv.Itoa(receipt.Position), "url": s.cfg.BaseURL + "/handoffs/" + receipt.HandoffID,
	}
	// A warm request (preserve_history) rings an agent as the desk's own warm packages do.
	if receipt.Status == handoff.StatusQueued && pkg.TransferMode == handoff.TransferModeWarm {
		if !receipt.RingDecided() {
			s.ring(ctx, &receipt)
		}
		if receipt.OfferedTo != "" {
			metadata["offered_to"] = receipt.OfferedTo
		} else if receipt.EstimatedWaitSeconds != nil {
			metadata["estimated_wait_seconds"] = strconv.Itoa(*receipt.EstimatedWaitSeconds)
		}
	}
	res := sw4rm.Response{Accepted: true, HandoffID: receipt.HandoffID, Status: sw4rm.StatusOf(receipt.Status), Metadata: metadata}
	// A replay of a handoff that ended without a human (canceled, expired, returned) is no
	// acceptance: it reads as the rejection it became.
	if res.Status == sw4rm.Rejected {
		res.Accepted = false
		res.RejectionReason = "handoff " + receipt.HandoffID + " already ended: " + string(receipt.Status)
		metadata["handoff_status"] = string(receipt.Status)
	}
	return c.JSON(status, res)
}
