package server

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/a-h/templ"
	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/views"
)

// frame is what the browser receives.
type frame struct {
	Type      string     `json:"type"` // "hello" or "events"
	Mark      live.Mark  `json:"mark"`
	Fragments []fragment `json:"fragments,omitempty"`
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

func (w *watcher) watches(e live.Event) bool {
	return w.roster || e.HandoffID == w.handoff || slices.Contains(w.queueIDs, e.QueueID)
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

func (w watcher) shareKey(items map[int64]handoff.Item) (frameKey, bool) {
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

const catchUpLimit = 10000

// catchUp sends what changed between the browser's last mark and now.
func (s *Server) catchUp(ctx context.Context, conn *websocket.Conn, w watcher, since live.Mark) error {
	var missed []live.Event
	mark := since
	for {
		events, next, err := live.Read(ctx, s.db, mark, catchUpLimit)
		if err != nil {
			return err
		}
		for _, e := range events {
			if w.watches(e) {
				missed = append(missed, e)
			}
		}
		mark = next
		if len(events) < catchUpLimit {
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
			if e.Kind == "queued" && item.Status == handoff.StatusQueued && item.Priority() == handoff.PriorityUrgent {
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

func (s *Server) batchItems(ctx context.Context, b live.Batch) (map[int64]handoff.Item, error) {
	type loaded struct {
		items map[int64]handoff.Item
		err   error
	}
	l := b.Shared.Memo("items", func() any {
		ids := make([]int64, 0, len(b.Events))
		for _, e := range b.Events {
			ids = append(ids, e.HandoffID)
		}
		ctx, cancel := context.WithTimeout(ctx, loadTimeout)
		defer cancel()
		items, err := s.actions.Items(ctx, ids)
		return loaded{items, err}
	}).(loaded)
	return l.items, l.err
}

// loadTimeout bounds a load made for a frame: the hub's workers take every socket's turns, and
// one waiting on the database holds up the sockets behind it.
const loadTimeout = 10 * time.Second

// listFragments places or removes the package's card in a queue list and in the held list.
func (s *Server) listFragments(ctx context.Context, w watcher, item handoff.Item, shared *live.Shared) []fragment {
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
	if item.HeldBy(w.user.ID) && item.Open() {
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
func (s *Server) packageFragments(ctx context.Context, user auth.User, item handoff.Item) ([]fragment, error) {
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
