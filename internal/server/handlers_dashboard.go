package server

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/views"
)

func (s *Server) rosterView(ctx context.Context) (views.RosterView, error) {
	r, err := s.queues.Roster(ctx)
	if err != nil {
		return views.RosterView{}, err
	}
	var v views.RosterView
	now := time.Now()
	for _, q := range r.Queues {
		h := views.QueueHealth{Name: q.Name, Waiting: q.Waiting, Reserved: q.Reserved, Accepted: q.Accepted, AgentsOnline: q.AgentsOnline}
		if q.OldestWait != nil {
			h.OldestWait = now.Sub(*q.OldestWait)
			h.OverSLA = h.OldestWait > q.SLA
		}
		v.Queues = append(v.Queues, h)
	}
	for _, a := range r.Agents {
		v.Agents = append(v.Agents, views.AgentLoad{Name: a.Name, Role: a.Role, Status: a.Status, Holding: a.Holding,
			Capacity: a.Capacity, Queues: strings.Join(a.Queues, ", "), Ringing: a.Ringing})
	}
	return v, nil
}

func (s *Server) handleDashboard(c echo.Context) error {
	roster, err := s.rosterView(c.Request().Context())
	if err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.DashboardPage(views.DashboardView{
		Viewer: *viewer(c), Roster: roster, Live: views.LiveConfig{Roster: true, Mark: string(s.hub.Mark())},
	}))
}
