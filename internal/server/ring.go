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

// ringKey and availabilityKey are where loadRing leaves the viewer's ring slot and availability
// for the page's layout.
const (
	ringKey         = "ring"
	availabilityKey = "availability"
)

// loadRing reads the ring slot of the agent a page is rendered for, and what they are, so that
// the layout shows them at the top of every desk page. Only page loads ask: not the socket, the
// API or static files.
func (s *Server) loadRing(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		user, ok := pageUser(c)
		if !ok {
			return next(c)
		}
		slot, availability, err := s.ringSlot(c.Request().Context(), user)
		if err != nil {
			return err
		}
		slot.Path = c.Request().URL.RequestURI()
		c.Set(ringKey, slot)
		c.Set(availabilityKey, availability.Status)
		return next(c)
	}
}

// ringSlot is the top of the agent's pages: their live ring, masked for them, the rings they let
// run out lately (from the offers, so that a reload keeps them), and whether the desk set them
// away for it; and what they are, for the header's switch.
func (s *Server) ringSlot(ctx context.Context, user auth.User) (views.RingSlotView, queue.Availability, error) {
	var slot views.RingSlotView
	o, err := s.actions.LiveOffer(ctx, user.ID)
	if err != nil {
		return slot, queue.Availability{}, err
	}
	if o != nil {
		p := o.Package.MaskFor(handoff.VisibilityFor(user.Role, handoff.PIIRule{MinRole: o.PIIMinRole, EntityKeys: o.PIIEntityKeys}))
		slot.Ring = &views.RingView{ID: o.PublicID, Queue: o.Queue, Problem: p.ProblemStatement, UntilMillis: o.Until.UnixMilli()}
	}
	missed, err := s.actions.MissedRings(ctx, user.ID)
	if err != nil {
		return slot, queue.Availability{}, err
	}
	for _, m := range missed {
		slot.Missed = append(slot.Missed, views.MissedRingView{ID: m.PublicID, Queue: m.Queue, At: m.At})
	}
	availability, err := queue.AvailabilityOf(ctx, s.db, user.ID)
	slot.SetAway = availability.Reason == queue.ReasonMissedRings
	return slot, availability, err
}

// ringFragments are the ring slot and the header's availability switch as they are now for user:
// the same components as the page's, sent when a ring of theirs starts or ends, as its end may
// have set them away; rings says whether a package rings for them in it.
func (s *Server) ringFragments(ctx context.Context, user auth.User) (f []fragment, rings bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	slot, availability, err := s.ringSlot(ctx, user)
	if err != nil {
		return nil, false, err
	}
	ring, err := rendered(ctx, fragment{Target: "ring", Op: "replace"}, views.RingSlot(slot))
	if err != nil {
		return nil, false, err
	}
	toggle, err := rendered(ctx, fragment{Target: "availability-switch", Op: "replace"}, views.AvailabilitySwitch(views.Viewer{Availability: availability.Status}))
	return []fragment{ring, toggle}, slot.Ring != nil, err
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

// handleDecline turns down the agent's ring; the package rings the next agent. The agent stays
// where they were (next, the page the ring showed on), not sent to the package's queue; a form
// that names no page goes to that queue.
func (s *Server) handleDecline(c echo.Context) error {
	id := c.Param("id")
	from, err := s.actions.Decline(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return s.actionFailed(c, id, err)
	}
	if next := c.FormValue("next"); next != "" {
		return c.Redirect(http.StatusSeeOther, safeNext(next))
	}
	return c.Redirect(http.StatusSeeOther, "/queues/"+from)
}

// ring offers a warm package whose first ring intake did not decide (a replay, or a batch that
// lost the race for its agents) to its first agent, and fills in the answer: who it rings, or the
// queue's estimated wait. A failure to ring loses nothing: the package is committed and the
// sweeper rings it, so the bot still gets its 201, with no promise in it.
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
