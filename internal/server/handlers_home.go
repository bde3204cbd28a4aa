package server

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/views"
)

func (s *Server) handleHome(c echo.Context) error {
	user := currentUser(c)
	summaries, err := s.queues.Summaries(c.Request().Context(), user.ID, user.Role.AtLeast(auth.RoleSupervisor))
	if err != nil {
		return err
	}
	now := time.Now()
	rows := make([]views.QueueSummary, len(summaries))
	for i, q := range summaries {
		rows[i] = queueSummaryOf(q, now)
	}
	return s.render(c, http.StatusOK, views.HomePage(views.HomeView{Viewer: *viewer(c), Queues: rows,
		Live: views.LiveConfig{Summaries: true, Mark: string(s.hub.Mark())}}))
}
