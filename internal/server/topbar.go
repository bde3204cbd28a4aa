package server

import (
	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/approvals"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/conversation"
)

// Where the top bar leaves, for the layout, how many packages the user holds ("My work"), how
// many messages their customers wrote that wait for an answer (the top bar and the window's title
// show it), and for a supervisor how many approvals wait. Pages' sockets keep them current.
const (
	holdingKey   = "holding"
	unreadKey    = "unread"
	approvalsKey = "approvals"
)

// topBar is what the layout shows atop every desk page, read in one round trip: each read is its
// own package's, queued onto the page's batch.
type topBar struct {
	user      auth.User
	ring      *ringReads
	held      []int64 // the packages the user holds
	waiting   map[int64]conversation.Waiting
	approvals int
}

// queueTopBar adds the top bar's reads, but for which packages the user holds, to b; the caller
// fills in held, by its own read or by queueing board.QueueHeldIDs.
func (s *Server) queueTopBar(b *pgx.Batch, user auth.User) *topBar {
	t := &topBar{user: user, ring: s.queueRing(b, user.ID)}
	conversation.QueueWaitingIn(b, board.HeldIDsSQL, user.ID, &t.waiting)
	if user.Role.AtLeast(auth.RoleSupervisor) {
		approvals.QueuePendingCount(b, &t.approvals)
	}
	return t
}

// set leaves what the top bar shows on the request for viewer.
func (t *topBar) set(c echo.Context) {
	slot := t.ring.slot(t.user)
	slot.Path = c.Request().URL.RequestURI()
	c.Set(ringKey, slot)
	c.Set(availabilityKey, t.ring.availability.Status)
	c.Set(holdingKey, len(t.held))
	n := 0
	for _, id := range t.held {
		n += t.waiting[id].Unread
	}
	c.Set(unreadKey, n)
	if t.user.Role.AtLeast(auth.RoleSupervisor) {
		c.Set(approvalsKey, t.approvals)
	}
}

// loadTopBar reads the top bar of a page load in one round trip. Only page loads ask (pageUser),
// and not the pages in ownTopBar.
func (s *Server) loadTopBar(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		user, ok := pageUser(c)
		if !ok || ownTopBar[c.Path()] {
			return next(c)
		}
		b := &pgx.Batch{}
		t := s.queueTopBar(b, user)
		board.QueueHeldIDs(b, user.ID, &t.held)
		if err := s.db.SendBatch(c.Request().Context(), b).Close(); err != nil {
			return err
		}
		t.set(c)
		return next(c)
	}
}

// ownTopBar are the routes whose handlers read the top bar (queueTopBar) in their own first round
// trip: the queue page reads the packages the user holds for its cards, and the top bar counts
// those rather than reading them again.
var ownTopBar = map[string]bool{"/queues/:name": true}
