package server

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/postgres"
)

// handleHealthz answers while the process is up; load balancers use /readyz to route traffic.
func (s *Server) handleHealthz(c echo.Context) error {
	return c.String(http.StatusOK, "ok\n")
}

// handleReadyz answers 200 only when the database answers and carries every migration this
// binary knows, so a new instance takes no traffic before its schema is in place.
func (s *Server) handleReadyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.db.Ping(ctx); err != nil {
		return c.String(http.StatusServiceUnavailable, "database unreachable\n")
	}
	pending, err := postgres.Pending(ctx, s.db)
	if err != nil {
		return c.String(http.StatusServiceUnavailable, "cannot read migration state\n")
	}
	if pending {
		return c.String(http.StatusServiceUnavailable, "migrations pending\n")
	}
	return c.String(http.StatusOK, "ready\n")
}
