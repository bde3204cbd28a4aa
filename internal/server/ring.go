package server

import (
	"context"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/views"
)

// ringKey and availabilityKey are where the top bar leaves the viewer's ring slot and
// availability for the page's layout.
const (
	ringKey         = "ring"
	availabilityKey = "availability"
)

// ringReads are what the top of the agent's pages shows of their rings: their live ring, the
// rings they let run out lately (from the offers, so that a reload keeps them), and what they are,
// for the header's switch.
type ringReads struct {
	offer        *actions.Offer
	missed       []actions.Missed
	availability queue.Availability
}

// queueRing adds the reads of the user's ring slot to b.
func (s *Server) queueRing(b *pgx.Batch, userID int64) *ringReads {
	r := &ringReads{}
	s.actions.QueueLiveOffer(b, userID, &r.offer)
	s.actions.QueueMissedRings(b, userID, &r.missed)
	queue.QueueAvailabilityOf(b, userID, &r.availability)
	return r
}

// slot is the ring slot as user sees it: the live ring masked for them, and whether the desk set
// them away for the missed ones.
func (r *ringReads) slot(user auth.User) views.RingSlotView {
	var slot views.RingSlotView
	if o := r.offer; o != nil {
		p := o.Package.MaskFor(handoff.VisibilityFor(user.Role, handoff.PIIRule{MinRole: o.PIIMinRole, EntityKeys: o.PIIEntityKeys}))
		slot.Ring = &views.RingView{ID: o.PublicID, Queue: o.Queue, Problem: p.ProblemStatement, UntilMillis: o.Until.UnixMilli()}
	}
	for _, m := range r.missed {
		slot.Missed = append(slot.Missed, views.MissedRingView{ID: m.PublicID, Queue: m.Queue, At: m.At})
	}
	slot.SetAway = r.availability.Reason == queue.ReasonMissedRings
	return slot
}

// ringSlot is the ring slot and the availability of user, read in one round trip.
func (s *Server) ringSlot(ctx context.Context, user auth.User) (views.RingSlotView, queue.Availability, error) {
	b := &pgx.Batch{}
	r := s.queueRing(b, user.ID)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return views.RingSlotView{}, queue.Availability{}, err
	}
	return r.slot(user), r.availability, nil
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
