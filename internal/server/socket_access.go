package server

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/queue"
)

// Caps on what one person's sockets may ask of an instance. The desk's pages open one socket a
// tab, each watching one queue, one package or the roster.
const (
	// maxUserSockets bounds one person's sockets on this instance. What it protects, memory, file
	// descriptors and fan-out turns, is the instance's own, so a count per instance is enough, and
	// it costs no round trip to the database on every connect.
	maxUserSockets = 20
	// maxSocketQueues bounds the queue names one socket may ask for, checked before any is looked
	// up; the rest are looked up in one query.
	maxSocketQueues = 100
)

// closeAccessChanged closes the sockets of a person whose access changed (a logout, a disabled
// account, a new role, a queue taken away). The page was rendered for the access they had, so
// the browser reloads it: logged out, it lands on the login page; demoted, it shows what the new
// role sees.
const closeAccessChanged = 4001

// userSockets counts each person's open sockets on this instance.
type userSockets struct {
	mu   sync.Mutex
	open map[int64]int
}

// take counts one more socket of the user, unless they have maxUserSockets open already.
func (u *userSockets) take(userID int64) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.open[userID] >= maxUserSockets {
		return desk.Errorf(desk.RateLimited, "you have %d live connections to this server open, the most one person may have; close a desk tab or two", maxUserSockets)
	}
	if u.open == nil {
		u.open = map[int64]int{}
	}
	u.open[userID]++
	return nil
}

// give counts one socket of the user fewer.
func (u *userSockets) give(userID int64) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.open[userID]--; u.open[userID] <= 0 {
		delete(u.open, userID)
	}
}

// watchRequest is what a socket asks to watch, looked up before it subscribes. Whether its user
// may see all of it is checked after (mayWatch), so that a change of access the check does not
// see yet is one the subscriber hears of.
type watchRequest struct {
	w            watcher
	queues       []string // the names of w.queueIDs, in their order
	handoff      string   // the package's public id
	handoffQueue int64
}

func (s *Server) watchRequest(ctx context.Context, c echo.Context, user auth.User) (watchRequest, error) {
	r := watchRequest{w: watcher{user: user, roster: c.QueryParam("roster") == "true", approvals: c.QueryParam("approvals") == "true",
		mine: c.QueryParam("mine") == "true", waiting: user.Role.AtLeast(auth.RoleSupervisor)}}
	r.queues = queue.SplitNames(c.QueryParam("queues"))
	if len(r.queues) > maxSocketQueues {
		return r, desk.Errorf(desk.BadRequest, "a socket watches at most %d queues; this one asks for %d", maxSocketQueues, len(r.queues))
	}
	// Every page follows what its user holds, for the count in the top bar. Read before the socket
	// subscribes: a change in between is caught up on (mineAfresh).
	held, err := s.board.HeldIDs(ctx, user.ID)
	if err != nil {
		return r, err
	}
	r.w.held = newHeldSet(held)
	// "My queues" follows the counts of the queues the user sees there, which are theirs to see.
	if c.QueryParam("summaries") == "true" {
		sums, err := s.queues.Summaries(ctx, user.ID, user.Role.AtLeast(auth.RoleSupervisor))
		if err != nil {
			return r, err
		}
		r.w.summaries = make(map[int64]bool, len(sums))
		for _, q := range sums {
			r.w.summaries[q.ID] = q.Member
		}
	}
	if r.w.queueIDs, err = s.queues.IDsByName(ctx, r.queues); err != nil {
		return r, unknownQueue(err)
	}
	if c.QueryParam("dashboard_window") != "" || c.QueryParam("dashboard_queue") != "" {
		if !r.w.roster {
			return r, desk.Errorf(desk.BadRequest, "dashboard_window and dashboard_queue go with roster=true")
		}
		f, err := dashboardFilter(c.QueryParams(), "dashboard_")
		if err != nil {
			return r, err
		}
		if f.Queue != "" {
			if _, err := s.queues.IDsByName(ctx, []string{f.Queue}); err != nil {
				return r, unknownQueue(err)
			}
		}
		r.w.dashboard = &f
	}
	if r.handoff = c.QueryParam("handoff"); r.handoff != "" {
		item, err := s.board.Item(ctx, r.handoff)
		if err != nil {
			return r, err
		}
		r.w.handoff, r.handoffQueue = item.ID, item.QueueID
	}
	return r, nil
}

// mayWatch checks, against the database as it is now, that the socket's session is live and that
// its user may see everything r asks for, and returns the user as the database has them (the
// session cache may not have heard of a change yet) and when the session ends.
func (s *Server) mayWatch(ctx context.Context, c echo.Context, r watchRequest) (auth.User, time.Time, error) {
	cookie, err := c.Cookie(sessionCookie)
	if err != nil {
		return auth.User{}, time.Time{}, desk.Errorf(desk.Unauthorized, "log in first")
	}
	user, expires, err := s.auth.VerifySession(ctx, cookie.Value)
	if desk.ErrorCode(err) == desk.NotFound {
		return auth.User{}, time.Time{}, desk.Errorf(desk.Unauthorized, "your session has ended; log in again")
	}
	if err != nil {
		return auth.User{}, time.Time{}, err
	}
	user, err = s.mayWatchAs(ctx, user, r)
	return user, expires, err
}

// mayWatchAs checks that user may see everything r asks for.
func (s *Server) mayWatchAs(ctx context.Context, user auth.User, r watchRequest) (auth.User, error) {
	if r.w.roster && !user.Role.AtLeast(auth.RoleSupervisor) {
		return auth.User{}, desk.Errorf(desk.Forbidden, "the roster is for supervisors")
	}
	if r.w.approvals && !user.Role.AtLeast(auth.RoleSupervisor) {
		return auth.User{}, desk.Errorf(desk.Forbidden, "refund approvals are for supervisors")
	}
	if user.Role.AtLeast(auth.RoleSupervisor) {
		return user, nil // supervisors oversee every queue
	}
	ids := r.w.queueIDs
	if r.w.handoff != 0 {
		ids = append(slices.Clip(ids), r.handoffQueue)
	}
	works, err := s.queues.MemberOf(ctx, user.ID, ids)
	if err != nil {
		return auth.User{}, err
	}
	for i, id := range r.w.queueIDs {
		if !slices.Contains(works, id) {
			return auth.User{}, queue.Unknown(r.queues[i])
		}
	}
	if r.w.handoff != 0 && !slices.Contains(works, r.handoffQueue) {
		return auth.User{}, board.NoItem(r.handoff)
	}
	return user, nil
}

// accessChanged reports whether the access of w's user changed in any of the events.
func (w *watcher) accessChanged(evs []events.Event) bool {
	return slices.ContainsFunc(evs, func(e events.Event) bool { return e.Kind.ChangesAccess() && e.UserID == w.user.ID })
}

// unknownQueue answers a queue that does not exist (IDsByName's NotFound) as queue.Unknown, as one
// the user does not work is answered.
func unknownQueue(err error) error {
	var e *desk.Error
	if errors.As(err, &e) && e.Code == desk.NotFound && e.Details["queue"] != "" {
		return queue.Unknown(e.Details["queue"])
	}
	return err
}
