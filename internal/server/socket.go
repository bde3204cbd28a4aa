package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/audit"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/internal/postgres"
)

// Websocket timing, as in gorilla's chat example: the writer pings well inside the reader's
// deadline, and a browser only ever sends small control messages.
const (
	writeWait = 10 * time.Second
	// turnWriteWait bounds a write made on the hub's shared workers: a browser that has not read
	// its kernel buffer empty in this long holds a worker every other socket needs, so it is
	// dropped, to reconnect and catch up.
	turnWriteWait  = 3 * time.Second
	pongWait       = 60 * time.Second
	pingPeriod     = pongWait * 9 / 10
	maxMessageSize = 512
)

// checkOrigin accepts upgrades only from pages of this desk: a websocket is not covered by the
// browser's same-origin rules, so without it any site could read a logged-in agent's queue.
func (s *Server) checkOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	base, _ := url.Parse(s.cfg.BaseURL)
	return u.Host == r.Host || (u.Scheme == base.Scheme && u.Host == base.Host)
}

func (s *Server) handleSocket(c echo.Context) error {
	ctx := c.Request().Context()
	user := currentUser(c)
	if err := s.userSockets.take(user.ID); err != nil {
		return err
	}
	opened := false
	defer func() {
		if !opened {
			s.userSockets.give(user.ID)
		}
	}()
	r, err := s.watchRequest(ctx, c, user)
	if err != nil {
		return err
	}
	w := r.w
	since := events.Mark(c.QueryParam("since"))
	if since != "" && !since.Valid() {
		return desk.Errorf(desk.BadRequest, "since %q is not a mark this desk sent", since)
	}
	w.queueKey = fmt.Sprint(w.queueIDs)
	k := &socket{s: s}
	var mark events.Mark
	// Subscribed before the user's access is checked: a change the check does not see yet reaches
	// the socket and closes it. The hub keeps its own copy of what is watched.
	watch := w
	k.sub, mark = s.hub.Subscribe(watch.watches, k.receive, s.shutdown)
	var sessionEnds time.Time
	if w.user, sessionEnds, err = s.mayWatch(ctx, c, r); err != nil {
		s.hub.Unsubscribe(k.sub)
		return err
	}
	k.w = w
	// Counted before the upgrade: until the hijack, http.Server.Shutdown waits for this request,
	// so the count is in place before Serve waits for the sockets.
	s.sockets.Add(1)
	conn, err := s.upgrader.Upgrade(c.Response(), c.Request(), nil)
	if err != nil {
		s.sockets.Done()
		s.hub.Unsubscribe(k.sub)
		return nil // the upgrader has answered the client
	}
	opened, k.conn = true, conn
	s.metrics.SocketOpened()
	s.presence.Connect(w.user.ID)
	if w.handoff != 0 {
		s.presence.Open(w.user.ID, w.handoff)
	}
	k.ping = time.AfterFunc(pingPeriod, k.pingSoon)
	k.figuresTimer = time.AfterFunc(time.Hour, k.sub.Poke)
	k.figuresTimer.Stop()
	// A session runs out without an event to say so; the page is closed as for a logout, and its
	// reload lands on the login page. WriteControl and Close may be called beside the hub's writes.
	k.sessionEnd = time.AfterFunc(time.Until(sessionEnds), func() { k.goodbye(closeAccessChanged, "session ended") })
	go k.read()
	// The hello and the catch-up go out from here, before the hub's turns start. Then the handler
	// returns: net/http's connection goroutine, its stack grown by the middleware and queries
	// above, goes away, and the socket lives on in its reader alone.
	// A failed write abandons the connection: closing it ends the reader, which tidies up, and a
	// close error would say nothing more than the write's.
	if err := s.writeFrame(conn, frame{Type: "hello", Mark: mark}); err != nil {
		_ = conn.Close()
	} else if since != "" {
		f, err := s.catchUpFrame(ctx, w, since, mark)
		if err == nil {
			err = s.recordFrame(w.user.ID, f.shown)
		}
		if err != nil {
			k.failed(err)
		} else if err := s.writeFrame(conn, f); err != nil {
			_ = conn.Close()
		}
	}
	if since != "" && w.dashboard != nil {
		// The figures may have moved while the browser was away: its first turn sends them anew.
		k.figuresDue = time.Now()
		k.sub.Poke()
	}
	k.sub.Start()
	return nil
}

// socket is one browser's websocket. Its one goroutine reads; the hub's workers write, in the
// socket's turns, so an idle socket holds no writer goroutine, stack or write buffer.
type socket struct {
	s    *Server
	conn *websocket.Conn
	w    watcher
	sub  *live.Subscriber
	// ping asks for a turn every pingPeriod; pingDue tells that turn to send the ping.
	ping    *time.Timer
	pingDue atomic.Bool
	// sessionEnd closes the socket when its session runs out.
	sessionEnd *time.Timer
	// The dashboard's figures: figuresDue is when they go out next, zero while no package has
	// changed since they last did; figuresTimer asks for the turn then. Only the socket's turns,
	// which never overlap, read and write figuresDue.
	figuresDue   time.Time
	figuresTimer *time.Timer
}

// receive is the socket's turn: the batches that waited, then a ping if one is due, then the
// goodbye of a last turn. A failed write closes the connection, which ends the reader and with
// it the socket.
func (k *socket) receive(batches []live.Batch, ending live.Ending) {
	for _, b := range batches {
		if k.w.accessChanged(b.Events) {
			k.goodbye(closeAccessChanged, "access changed")
			return
		}
	}
	for _, b := range batches {
		msg, err := k.s.messageFor(context.Background(), k.w, b)
		if err == nil {
			err = k.s.recordFrame(k.w.user.ID, msg.shown)
		}
		if err != nil {
			k.failed(err)
			return
		}
		_ = k.conn.SetWriteDeadline(time.Now().Add(turnWriteWait))
		if err := k.conn.WritePreparedMessage(msg.PreparedMessage); err != nil {
			_ = k.conn.Close()
			return
		}
		k.s.metrics.FrameSent()
	}
	if k.w.dashboard != nil && !k.sendFigures(batches) {
		return
	}
	if k.pingDue.Swap(false) {
		if err := k.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(turnWriteWait)); err != nil {
			_ = k.conn.Close()
			return
		}
		k.ping.Reset(pingPeriod)
	}
	switch ending {
	case live.FellBehind:
		// Dropped for falling behind: closing makes the browser reconnect and catch up.
		k.goodbye(websocket.CloseTryAgainLater, "fell behind")
	case live.Stopped:
		// Going away: the browser reconnects, through the load balancer, to another instance.
		k.goodbye(websocket.CloseGoingAway, "server shutting down")
	}
}

// sendFigures sends the dashboard's figures DashboardEvery after the first change since they last
// went out: however many events arrive in that time, the browser gets one frame for them all,
// and none while nothing changes. It reports whether the socket is still open.
func (k *socket) sendFigures(batches []live.Batch) bool {
	if k.figuresDue.IsZero() {
		for _, b := range batches {
			if slices.ContainsFunc(b.Events, func(e events.Event) bool { return e.HandoffID != 0 }) {
				k.figuresDue = time.Now().Add(k.s.cfg.DashboardEvery)
				k.figuresTimer.Reset(k.s.cfg.DashboardEvery)
				return true
			}
		}
		return true
	}
	if time.Now().Before(k.figuresDue) {
		return true
	}
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	f, err := k.s.figuresFrame(ctx, *k.w.dashboard)
	if err != nil {
		k.failed(err)
		return false
	}
	_ = k.conn.SetWriteDeadline(time.Now().Add(turnWriteWait))
	if err := k.conn.WriteJSON(f); err != nil {
		_ = k.conn.Close()
		return false
	}
	k.s.metrics.FrameSent()
	k.figuresDue = time.Time{}
	return true
}

// failed answers a frame that could not be built: the browser is told, to show itself offline
// and reconnect, rather than left showing a page that silently stopped following the desk. A
// database out of reach (killed, restarting) is a warning, as for the rest of the work that rides
// out an outage: the page reconnects once it is back.
func (k *socket) failed(err error) {
	if errors.Is(err, errAccessChanged) {
		k.goodbye(closeAccessChanged, "access changed")
		return
	}
	if postgres.OutOfReach(err) {
		k.s.logger.Warn("websocket frame: the database cannot answer now; the page reconnects", "err", err)
	} else {
		k.s.logger.Error("websocket frame", "err", err)
	}
	_ = k.conn.SetWriteDeadline(time.Now().Add(turnWriteWait))
	_ = k.conn.WriteJSON(couldNotUpdate)
	k.goodbye(websocket.CloseInternalServerErr, "")
}

func (k *socket) goodbye(code int, reason string) {
	_ = k.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(turnWriteWait))
	_ = k.conn.Close()
}

func (k *socket) pingSoon() {
	k.pingDue.Store(true)
	k.sub.Poke()
}

// read keeps the pong deadline; when the connection ends, so does the socket. The browser has
// nothing to say on it: what it does goes through forms, and whether its agent may be rung is
// their choice (POST /me/status), not whether the tab is hidden.
func (k *socket) read() {
	defer k.close()
	conn := k.conn
	conn.SetReadLimit(maxMessageSize)
	_ = conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(pongWait)) })
	for {
		if _, _, err := conn.ReadMessage(); err != nil {
			return
		}
	}
}

func (k *socket) close() {
	k.ping.Stop()
	k.sessionEnd.Stop()
	k.figuresTimer.Stop()
	k.s.hub.Unsubscribe(k.sub)
	k.s.presence.Disconnect(k.w.user.ID)
	if k.w.handoff != 0 {
		k.s.presence.Close(k.w.user.ID, k.w.handoff)
	}
	k.s.userSockets.give(k.w.user.ID)
	_ = k.conn.Close()
	k.s.metrics.SocketClosed()
	k.s.sockets.Done()
}

// recordFrame records what a frame shows its user unmasked, before it is sent: one pii_views row
// per frame that shows any, naming its packages. Agents below a queue's PII role, the many sockets,
// write nothing; a supervisor watching a busy queue writes a row per batch their socket is sent,
// which the hub's batching keeps to a few a second at most.
func (s *Server) recordFrame(userID int64, shown audit.Shown) error {
	if shown.Empty() {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), loadTimeout)
	defer cancel()
	return audit.Record(ctx, s.db, userID, audit.ViaFrame, shown)
}

func (s *Server) writeFrame(conn *websocket.Conn, f frame) error {
	_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
	if err := conn.WriteJSON(f); err != nil {
		return err
	}
	s.metrics.FrameSent()
	return nil
}
