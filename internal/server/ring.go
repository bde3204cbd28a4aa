package server

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/views"
)

// ringKey and availabilityKey are where loadRing leaves the viewer's ring and availability for
// the page's layout.
const (
	ringKey         = "ring"
	availabilityKey = "availability"
)

// loadRing reads the ring of the agent a page is rendered for, and what they chose to be, so that
// the layout shows them at the top of every desk page. Only page loads ask: not the socket, the
// API or static files.
func (s *Server) loadRing(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		user, ok := pageUser(c)
		if !ok {
			return next(c)
		}
		ring, err := s.ringView(c.Request().Context(), user)
		if err != nil {
			return err
		}
		availability, err := queue.AvailabilityOf(c.Request().Context(), s.db, user.ID)
		if err != nil {
			return err
		}
		c.Set(ringKey, ring)
		c.Set(availabilityKey, availability)
		return next(c)
	}
}

// ringView is the agent's live ring, masked for them, or nil.
func (s *Server) ringView(ctx context.Context, user auth.User) (*views.RingView, error) {
	o, err := s.actions.LiveOffer(ctx, user.ID)
	if err != nil || o == nil {
		return nil, err
	}
	p := o.Package.MaskFor(handoff.VisibilityFor(user.Role, handoff.PIIRule{MinRole: o.PIIMinRole, EntityKeys: o.PIIEntityKeys}))
	return &views.RingView{ID: o.PublicID, Queue: o.Queue, Problem: p.ProblemStatement,
		UntilMillis: o.Until.UnixMilli()}, nil
}

// ringFragment is the ring slot as it is now for user: the same component as the page's; rings
// says whether a package rings for them in it.
func (s *Server) ringFragment(ctx context.Context, user auth.User) (f fragment, rings bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	ring, err := s.ringView(ctx, user)
	if err != nil {
		return fragment{}, false, err
	}
	f, err = rendered(ctx, fragment{Target: "ring", Op: "replace"}, views.RingSlot(ring))
	return f, ring != nil, err
}

// handleSetStatus records what the user chose to be: available, break or away (form field
// status). Only an available agent with the desk open is rung; choosing a break or away takes a
// ring they have to the next agent at once. It goes back to the page it was sent from (next).
func (s *Server) handleSetStatus(c echo.Context) error {
	if err := s.presence.Choose(c.Request().Context(), currentUser(c).ID, c.FormValue("status")); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(c.FormValue("next")))
}

// handleDecline turns down the agent's ring; the package rings the next agent.
func (s *Server) handleDecline(c echo.Context) error {
	id := c.Param("id")
	from, err := s.actions.Decline(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return s.actionFailed(c, id, err)
	}
	return c.Redirect(http.StatusSeeOther, "/queues/"+from)
}

// ring offers a warm package that was just admitted to its first agent, and fills in the answer:
// who it rings, or the queue's estimated wait. A failure to ring loses nothing: the package is
// committed and the sweeper rings it, so the bot still gets its 201, with no promise in it.
func (s *Server) ring(ctx context.Context, r *intake.Receipt) {
	rang, err := s.actions.Ring(ctx, r.HandoffID)
	if err != nil {
		s.logger.Warn("ringing a warm package", "handoff_id", r.HandoffID, "err", err)
		return
	}
	if rang.Agent != "" {
		r.OfferedTo = rang.Agent
		return
	}
	wait := int(rang.EstimatedWait.Round(time.Second).Seconds())
	r.EstimatedWaitSeconds = &wait
}
