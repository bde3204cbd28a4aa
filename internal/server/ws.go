package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync/atomic"
	"time"

	"github.com/a-h/templ"
	"github.com/gorilla/websocket"
	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/views"
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
	catchUpLimit   = 10000
)

// frame is what the browser receives.
type frame struct {
	Type      string      `json:"type"` // "hello" or "events"
	Mark      events.Mark `json:"mark"`
	Fragments []fragment  `json:"fragments,omitempty"`
	// Urgent names urgent packages that just arrived, for the opt-in desktop notification.
	Urgent []string `json:"urgent,omitempty"`
}

// fragment is one element to put in place, replace or remove, by id.
type fragment struct {
	Target string `json:"target"`
	Op     string `json:"op"`             // "upsert", "replace" or "remove"
	List   string `json:"list,omitempty"` // where an upserted element goes, ordered by Sort
	Sort   string `json:"sort,omitempty"`
	HTML   string `json:"html,omitempty"`
}

// watcher is what one socket shows: queue lists, one package, and the viewer's held list.
type watcher struct {
	user     auth.User
	queueIDs []int64
	handoff  int64
	roster   bool   // every change anywhere moves the supervisors' roster
	queueKey string // queueIDs spelled once, for frameKey
}

func (w *watcher) watches(e events.Event) bool {
	return w.roster || e.HandoffID == w.handoff || slices.Contains(w.queueIDs, e.QueueID) ||
		slices.Contains(w.queueIDs, e.FromQueueID)
}

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
	w := watcher{user: currentUser(c)}
	for _, name := range queue.SplitNames(c.QueryParam("queues")) {
		q, err := s.queues.ByName(ctx, name)
		if err != nil {
			return err
		}
		if _, err := s.mayView(ctx, w.user, q.ID); err != nil {
			return err
		}
		w.queueIDs = append(w.queueIDs, q.ID)
	}
	if id := c.QueryParam("handoff"); id != "" {
		item, err := s.board.Item(ctx, id)
		if err != nil {
			return err
		}
		if _, err := s.mayView(ctx, w.user, item.QueueID); err != nil {
			return err
		}
		w.handoff = item.ID
	}
	if c.QueryParam("roster") == "true" {
		if !w.user.Role.AtLeast(auth.RoleSupervisor) {
			return desk.Errorf(desk.Forbidden, "the roster is for supervisors")
		}
		w.roster = true
	}
	since := events.Mark(c.QueryParam("since"))
	if since != "" && !since.Valid() {
		return desk.Errorf(desk.BadRequest, "since %q is not a mark this desk sent", since)
	}
	w.queueKey = fmt.Sprint(w.queueIDs)
	// Counted before the upgrade: until the hijack, http.Server.Shutdown waits for this request,
	// so the count is in place before Serve waits for the sockets.
	s.sockets.Add(1)
	conn, err := s.upgrader.Upgrade(c.Response(), c.Request(), nil)
	if err != nil {
		s.sockets.Done()
		return nil // the upgrader has answered the client
	}
	k := &socket{s: s, conn: conn, w: w}
	var mark events.Mark
	k.sub, mark = s.hub.Subscribe(k.w.watches, k.receive, s.shutdown)
	s.presence.Connect(w.user.ID)
	k.ping = time.AfterFunc(pingPeriod, k.pingSoon)
	go k.read()
	// The hello and the catch-up go out from here, before the hub's turns start. Then the handler
	// returns: net/http's connection goroutine, its stack grown by the middleware and queries
	// above, goes away, and the socket lives on in its reader alone.
	if err := writeFrame(conn, frame{Type: "hello", Mark: mark}); err != nil {
		conn.Close()
	} else if since != "" {
		if err := s.catchUp(ctx, conn, w, since); err != nil {
			s.logger.Warn("websocket catch-up", "err", err)
			conn.Close()
		}
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
}

// receive is the socket's turn: the batches that waited, then a ping if one is due, then the
// goodbye of a last turn. A failed write closes the connection, which ends the reader and with
// it the socket.
func (k *socket) receive(batches []live.Batch, ending live.Ending) {
	for _, b := range batches {
		msg, err := k.s.messageFor(context.Background(), k.w, b)
		if err != nil {
			k.s.logger.Error("websocket render", "err", err)
			k.conn.Close()
			return
		}
		_ = k.conn.SetWriteDeadline(time.Now().Add(turnWriteWait))
		if err := k.conn.WritePreparedMessage(msg); err != nil {
			k.conn.Close()
			return
		}
	}
	if k.pingDue.Swap(false) {
		if err := k.conn.WriteControl(websocket.PingMessage, nil, time.Now().Add(turnWriteWait)); err != nil {
			k.conn.Close()
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

func (k *socket) goodbye(code int, reason string) {
	_ = k.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), time.Now().Add(turnWriteWait))
	k.conn.Close()
}

func (k *socket) pingSoon() {
	k.pingDue.Store(true)
	k.sub.Poke()
}

// read keeps the pong deadline and takes the browser's presence messages; when the connection
// ends, so does the socket.
func (k *socket) read() {
	defer k.close()
	conn, userID := k.conn, k.w.user.ID
	conn.SetReadLimit(maxMessageSize)
	_ = conn.SetReadDeadline(time.Now().Add(pongWait))
	conn.SetPongHandler(func(string) error { return conn.SetReadDeadline(time.Now().Add(pongWait)) })
	for {
		_, data, err := conn.ReadMessage()
		if err != nil {
			return
		}
		var msg struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(data, &msg) == nil {
			switch msg.Type {
			case "away":
				k.s.presence.SetAway(userID, true)
			case "back":
				k.s.presence.SetAway(userID, false)
			}
		}
	}
}

func (k *socket) close() {
	k.ping.Stop()
	k.s.hub.Unsubscribe(k.sub)
	k.s.presence.Disconnect(k.w.user.ID)
	k.conn.Close()
	k.s.sockets.Done()
}

// messageFor encodes what one socket shows of a batch. Sockets that would receive the same frame
// (the same queues and role, no package page or roster, holding none of the batch's packages)
// share one encoded message: a busy queue watched by thousands of agents is rendered and
// encoded once per role, not once per socket.
func (s *Server) messageFor(ctx context.Context, w watcher, b live.Batch) (*websocket.PreparedMessage, error) {
	items, err := s.batchItems(ctx, b)
	if err != nil {
		return nil, err
	}
	encode := func() any {
		f, err := s.framesFor(ctx, w, b)
		if err != nil {
			return err
		}
		data, err := json.Marshal(f)
		if err != nil {
			return err
		}
		msg, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
		if err != nil {
			return err
		}
		return msg
	}
	var result any
	if key, ok := w.shareKey(items); ok {
		result = b.Shared.Memo(key, encode)
	} else {
		result = encode()
	}
	if err, ok := result.(error); ok {
		return nil, err
	}
	return result.(*websocket.PreparedMessage), nil
}

// frameKey names a frame that several sockets share.
type frameKey struct {
	queues string
	role   auth.Role
}

func (w watcher) shareKey(items map[int64]board.Item) (frameKey, bool) {
	if w.roster || w.handoff != 0 {
		return frameKey{}, false
	}
	for _, it := range items {
		if it.HeldBy(w.user.ID) {
			return frameKey{}, false
		}
	}
	return frameKey{queues: w.queueKey, role: w.user.Role}, true
}

func writeFrame(conn *websocket.Conn, f frame) error {
	_ = conn.SetWriteDeadline(time.Now().Add(writeWait))
	return conn.WriteJSON(f)
}

// catchUp sends what changed between the browser's last mark and now.
func (s *Server) catchUp(ctx context.Context, conn *websocket.Conn, w watcher, since events.Mark) error {
	var missed []events.Event
	mark := since
	for {
		read, next, _, err := events.Read(ctx, s.db, mark, catchUpLimit)
		if err != nil {
			return err
		}
		for _, e := range read {
			if w.watches(e) {
				missed = append(missed, e)
			}
		}
		mark = next
		if len(read) < catchUpLimit {
			break
		}
	}
	f, err := s.framesFor(ctx, w, live.Batch{Events: missed, Mark: mark, Shared: live.NewShared()})
	if err != nil {
		return err
	}
	return writeFrame(conn, f)
}

// framesFor renders what one socket shows of a batch. Items are loaded once per batch and each
// card once per visibility, however many sockets receive it.
func (s *Server) framesFor(ctx context.Context, w watcher, b live.Batch) (frame, error) {
	items, err := s.batchItems(ctx, b)
	if err != nil {
		return frame{}, err
	}
	f := frame{Type: "events", Mark: b.Mark}
	if w.roster && len(b.Events) > 0 {
		type rendered struct {
			html string
			err  error
		}
		r := b.Shared.Memo("roster", func() any {
			ctx, cancel := context.WithTimeout(ctx, loadTimeout)
			defer cancel()
			v, err := s.rosterView(ctx)
			return rendered{renderString(ctx, views.Roster(v)), err}
		}).(rendered)
		if r.err != nil {
			return frame{}, r.err
		}
		f.Fragments = append(f.Fragments, fragment{Target: "roster", Op: "replace", HTML: r.html})
	}
	seen := map[int64]bool{}
	for _, e := range b.Events {
		if !w.watches(e) || seen[e.HandoffID] {
			continue
		}
		seen[e.HandoffID] = true
		item, ok := items[e.HandoffID]
		if !ok {
			continue
		}
		if len(w.queueIDs) > 0 {
			f.Fragments = append(f.Fragments, s.listFragments(ctx, w, item, b.Shared)...)
			if e.Kind == events.Queued && item.Status == handoff.StatusQueued && item.Priority() == handoff.PriorityUrgent {
				f.Urgent = append(f.Urgent, item.PublicID)
			}
		}
		if item.ID == w.handoff {
			frags, err := s.packageFragments(ctx, w.user, item)
			if err != nil {
				return frame{}, err
			}
			f.Fragments = append(f.Fragments, frags...)
		}
	}
	return f, nil
}

func (s *Server) batchItems(ctx context.Context, b live.Batch) (map[int64]board.Item, error) {
	type loaded struct {
		items map[int64]board.Item
		err   error
	}
	l := b.Shared.Memo("items", func() any {
		ids := make([]int64, 0, len(b.Events))
		for _, e := range b.Events {
			ids = append(ids, e.HandoffID)
		}
		ctx, cancel := context.WithTimeout(ctx, loadTimeout)
		defer cancel()
		items, err := s.board.Items(ctx, ids)
		return loaded{items, err}
	}).(loaded)
	return l.items, l.err
}

// loadTimeout bounds a load made for a frame: the hub's workers take every socket's turns, and
// one waiting on the database holds up the sockets behind it.
const loadTimeout = 10 * time.Second

// listFragments places or removes the package's card in a queue list and in the held list.
func (s *Server) listFragments(ctx context.Context, w watcher, item board.Item, shared *live.Shared) []fragment {
	cardID, heldID := "card-"+item.PublicID, "held-"+item.PublicID
	var out []fragment
	waiting := item.Status == handoff.StatusQueued || item.Status == handoff.StatusReserved
	if waiting && slices.Contains(w.queueIDs, item.QueueID) {
		vis := visibility(w.user, item)
		html := shared.Memo(cardKey{item.ID, vis.PII}, func() any {
			return renderString(ctx, views.QueueCard(cardOf(item, vis, cardEntities)))
		}).(string)
		out = append(out, fragment{Target: cardID, Op: "upsert", List: "cards", Sort: item.SortKey(), HTML: html})
	} else {
		out = append(out, fragment{Target: cardID, Op: "remove"})
	}
	if item.HeldBy(w.user.ID) && item.Status.Open() {
		card := cardOf(item, visibility(w.user, item), cardEntities)
		out = append(out, fragment{Target: heldID, Op: "upsert", List: "held", Sort: item.SortKey(), HTML: renderString(ctx, views.HeldCard(card))})
	} else {
		out = append(out, fragment{Target: heldID, Op: "remove"})
	}
	return out
}

type cardKey struct {
	id  int64
	pii bool
}

// packageFragments refreshes an open package view: its status bar and the actions the viewer
// may now take.
func (s *Server) packageFragments(ctx context.Context, user auth.User, item board.Item) ([]fragment, error) {
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	v, err := s.loadHandoff(ctx, user, item.PublicID)
	if err != nil {
		return nil, err
	}
	return []fragment{
		{Target: "status-" + item.PublicID, Op: "replace", HTML: renderString(ctx, views.HandoffHeader(v.Card, v.Outcome))},
		{Target: "actions-" + item.PublicID, Op: "replace", HTML: renderString(ctx, views.ActionPanel(v.Card, v.Controls))},
	}, nil
}

func renderString(ctx context.Context, c templ.Component) string {
	var buf bytes.Buffer
	if err := c.Render(ctx, &buf); err != nil {
		return ""
	}
	return buf.String()
}
