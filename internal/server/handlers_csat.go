package server

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/csat"
	"github.com/handoffdesk/desk/internal/intake"
)

// handleCSAT keeps the customer's verdict on a closed package, once per leg (SPEC §2a).
func (s *Server) handleCSAT(c echo.Context) error {
	body, err := readJSON(c)
	if err != nil {
		return err
	}
	rec, err := s.recordCSAT(c.Request().Context(), sender(c), c.Param("id"), body)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, rec)
}

// recordCSAT keeps bot's survey, a JSON body, on handoffID: the REST route and the MCP tool
// record_csat.
func (s *Server) recordCSAT(ctx context.Context, bot intake.Sender, handoffID string, body []byte) (csat.Recorded, error) {
	survey, err := csat.Decode(body)
	if err != nil {
		return csat.Recorded{}, err
	}
	return s.actions.RecordCSAT(ctx, bot.QueueIDs, handoffID, survey)
}
