package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/gorilla/websocket"
	"golang.org/x/sync/singleflight"

	"github.com/handoffdesk/desk/internal/approvals"
	"github.com/handoffdesk/desk/internal/audit"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/dashboard"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/views"
)

// frame is what the browser receives.
type frame struct {
	// "hello", "events", or "reload": the page cannot be brought up to date by events and is
	// loaded afresh.
	Type      string      `json:"type"`
	Mark      events.Mark `json:"mark"`
	Fragments []fragment  `json:"fragments,omitempty"`
	// Urgent names urgent packages that just arrived, for the opt-in desktop notification, by
	// their ids alone: the notification's text carries nothing that falls under the PII rule.
	Urgent []string `json:"urgent,omitempty"`
	// Ring says that a warm package rings for the socket's user: the page sounds the tone.
	Ring bool `json:"ring,omitempty"`
	// shown is what the frame shows unmasked, for the record of PII reads; never sent.
	shown audit.Shown
}

// errorFrame tells the browser that what it shows could not be brought up to date. The message
// is the same whatever went wrong: the cause goes to the log, not to every agent's browser.
type errorFrame struct {
	Type    string `json:"type"` // "error"
	Message string `json:"message"`
}

var couldNotUpdate = errorFrame{Type: "error", Message: "The desk could not update this page."}

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
	roster   bool // every change anywhere moves the supervisors' roster
	// approvals: the supervisors' /approvals page, which every step of a refund approval moves.
	// waiting: the user is a supervisor, whose every page counts the approvals that wait.
	approvals, waiting bool
	// dashboard is the figures the page shows beside the roster, sent at most every
	// Config.DashboardEvery (socket.sendFigures), never as part of a batch's frame.
	dashboard *dashboard.Filter
	queueKey  string // queueIDs spelled once, for frameKey
	// held is what the user holds: every page follows it, for the count in the top bar. mine: the
	// page is "My work", which lists them.
	held *heldSet
	mine bool
	// summaries are the queues "my queues" counts, and whether the user works each.
	summaries map[int64]bool
}

// watches reports whether e moves what w shows, or changes the access of its user.
func (w *watcher) watches(e events.Event) bool {
	if e.Kind == events.Viewing {
		return e.HandoffID == w.handoff // only the package's open views show who is viewing
	}
	if e.Kind.Configures() {
		return false // an admin's change of a queue or key shows on each page's next render
	}
	if e.Kind.ChangesAccess() {
		return e.UserID == w.user.ID
	}
	if e.Kind.Rings() && e.UserID == w.user.ID {
		return true // the ring shows on every page of its agent
	}
	// A page of no package (w.handoff zero) shows nothing of an event about no package (presence):
	// without the w.handoff check, every connect and disconnect anywhere sent every socket a frame.
	return w.roster || ((w.approvals || w.waiting) && e.Kind.IsApproval()) || (w.handoff != 0 && e.HandoffID == w.handoff) || slices.Contains(w.queueIDs, e.QueueID) ||
		slices.Contains(w.queueIDs, e.FromQueueID) || w.follows(e) || w.summarized(e)
}

// messageFor encodes what one socket shows of a batch. Sockets that would receive the same frame
// (the same queues and role, no package page or roster, holding none of the batch's packages)
// share one encoded message: a busy queue watched by thousands of agents is rendered and
// encoded once per role, not once per socket. They share what it shows unmasked too, which the
// role and the queues decide.
func (s *Server) messageFor(ctx context.Context, w watcher, b live.Batch) (message, error) {
	if b.Resync {
		return memo(b.Shared, "reload", func() (message, error) {
			return prepared(frame{Type: "reload", Mark: b.Mark})
		})
	}
	items, err := s.batchItems(ctx, b)
	if err != nil {
		return message{}, err
	}
	encode := func() (message, error) {
		f, err := s.framesFor(ctx, w, b)
		if err != nil {
			return message{}, err
		}
		return prepared(f)
	}
	if key, ok := w.shareKey(items); ok && !w.rings(b) && !slices.ContainsFunc(b.Events, w.follows) {
		return memo(b.Shared, key, encode)
	}
	return encode()
}

// message is an encoded frame and what it shows unmasked.
type message struct {
	*websocket.PreparedMessage
	shown audit.Shown
}

func prepared(f frame) (message, error) {
	data, err := json.Marshal(f)
	if err != nil {
		return message{}, err
	}
	msg, err := websocket.NewPreparedMessage(websocket.TextMessage, data)
	return message{msg, f.shown}, err
}

// memo computes a value once per batch for all the sockets asking with the same key. The error
// is kept with the value, so a render that failed fails every socket sharing it instead of
// handing them an empty fragment.
func memo[T any](shared *live.Shared, key any, f func() (T, error)) (T, error) {
	r := shared.Memo(key, func() any {
		v, err := f()
		return memoed[T]{v, err}
	}).(memoed[T])
	return r.v, r.err
}

type memoed[T any] struct {
	v   T
	err error
}

// frameKey names a frame that several sockets share.
type frameKey struct {
	queues string
	role   auth.Role
}

func (w watcher) shareKey(items map[int64]board.Item) (frameKey, bool) {
	if w.roster || w.approvals || w.handoff != 0 || w.mine || len(w.summaries) > 0 {
		return frameKey{}, false
	}
	for _, it := range items {
		if it.HeldBy(w.user.ID) {
			return frameKey{}, false
		}
	}
	return frameKey{queues: w.queueKey, role: w.user.Role}, true
}

// rings reports whether the batch starts or ends a ring of w's user: their frame carries the
// ring slot, which is theirs alone.
func (w watcher) rings(b live.Batch) bool {
	return slices.ContainsFunc(b.Events, func(e events.Event) bool { return e.Kind.Rings() && e.UserID == w.user.ID })
}

// catchUpWindow is how many events, of the whole desk, a browser that comes back is caught up on.
// Past it the catch-up would cost more than loading the page again, which is what the browser is
// told to do.
const catchUpWindow = 10000

// errAccessChanged says that the user's access changed since the browser's mark: what its page
// shows was rendered for the access they had, so it is not brought up to date but reloaded.
var errAccessChanged = errors.New("the user's access changed since the mark")

// catchUpFrame is what changed for w between the browser's last mark and upto, the hub's mark
// the socket's batches start from; or a reload frame when since is too far behind, of another
// incarnation of the database, or not one the desk handed out.
func (s *Server) catchUpFrame(ctx context.Context, w watcher, since, upto events.Mark) (frame, error) {
	read, err := events.Missed(ctx, s.db, since, upto, catchUpWindow)
	if errors.Is(err, events.ErrOtherIncarnation) || errors.Is(err, events.ErrTooFarBehind) {
		return frame{Type: "reload", Mark: upto}, nil
	}
	if err != nil {
		return frame{}, err
	}
	var missed []events.Event
	for _, e := range read {
		if w.watches(e) {
			missed = append(missed, e)
		}
	}
	if w.accessChanged(missed) {
		return frame{}, errAccessChanged
	}
	f, err := s.framesFor(ctx, w, live.Batch{Events: missed, Mark: upto, Shared: live.NewShared()})
	if err != nil || len(read) == 0 {
		return f, err
	}
	mine, shown, err := s.mineAfresh(ctx, w)
	f.Fragments = append(f.Fragments, mine...)
	f.shown.Merge(shown)
	if err == nil && w.waiting {
		var count fragment
		count, err = s.approvalsCount(ctx)
		f.Fragments = append(f.Fragments, count)
	}
	return f, err
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
		// Read once per batch for every supervisor's socket; laid out for each (their take-over).
		r, err := memo(b.Shared, "roster", func() (queue.Roster, error) {
			ctx, cancel := context.WithTimeout(ctx, loadTimeout)
			defer cancel()
			return s.queues.Roster(ctx)
		})
		if err != nil {
			return frame{}, err
		}
		roster, err := rendered(ctx, fragment{Target: "roster", Op: "replace"}, views.Roster(rosterView(r, w.user, time.Now())))
		if err != nil {
			return frame{}, err
		}
		f.Fragments = append(f.Fragments, roster)
	}
	if w.rings(b) {
		ring, rings, err := s.ringFragments(ctx, w.user)
		if err != nil {
			return frame{}, err
		}
		f.Fragments = append(f.Fragments, ring...)
		f.Ring = rings
	}
	approving := slices.ContainsFunc(b.Events, func(e events.Event) bool { return e.Kind.IsApproval() })
	if w.approvals && approving {
		list, shown, err := s.approvalsFragment(ctx, w.user, b)
		if err != nil {
			return frame{}, err
		}
		f.Fragments = append(f.Fragments, list)
		f.shown.Merge(shown)
	}
	if w.waiting && approving {
		count, err := memo(b.Shared, "approvals-count", func() (fragment, error) { return s.approvalsCount(ctx) })
		if err != nil {
			return frame{}, err
		}
		f.Fragments = append(f.Fragments, count)
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
			frags, err := s.listFragments(ctx, w, item, b)
			if err != nil {
				return frame{}, err
			}
			f.Fragments = append(f.Fragments, frags...)
			if slices.ContainsFunc(frags, func(fr fragment) bool { return fr.Op == "upsert" }) {
				f.shown.Add(item.ID, cardUnmasked(item, visibility(w.user, item), cardEntities))
			}
			if e.Kind == events.Queued && item.Status == handoff.StatusQueued && item.Priority() == handoff.PriorityUrgent {
				f.Urgent = append(f.Urgent, item.PublicID)
			}
		}
		if item.ID == w.handoff {
			evs := packageEvents(b, item.ID)
			thread, said, err := s.threadFragments(ctx, w, item, evs, b.Shared)
			if err != nil {
				return frame{}, err
			}
			f.Fragments = append(f.Fragments, thread...)
			f.shown.Add(item.ID, said)
			if slices.ContainsFunc(evs, func(e events.Event) bool { return e.Kind == events.Viewing }) {
				viewing, err := s.viewingFragment(ctx, w, item, b)
				if err != nil {
					return frame{}, err
				}
				f.Fragments = append(f.Fragments, viewing)
			}
			if slices.ContainsFunc(evs, func(e events.Event) bool { return !slices.Contains(threadOnly, e.Kind) }) {
				// A message, or a reply's delivery, changes the thread alone, and who is viewing only
				// who is viewing; anything else the package's state too.
				frags, notes, err := s.packageFragments(ctx, w.user, item)
				if err != nil {
					return frame{}, err
				}
				f.Fragments = append(f.Fragments, frags...)
				// The header shows the card's fields, the timeline what people wrote.
				f.shown.Add(item.ID, cardUnmasked(item, visibility(w.user, item), 0))
				f.shown.Add(item.ID, notes)
			}
		}
	}
	mine, shown, err := s.mineFragments(ctx, w, b, items)
	if err != nil {
		return frame{}, err
	}
	f.Fragments = append(f.Fragments, mine...)
	f.shown.Merge(shown)
	summaries, err := s.summaryFragments(ctx, w, b)
	if err != nil {
		return frame{}, err
	}
	f.Fragments = append(f.Fragments, summaries...)
	return f, nil
}

// figuresFrame is the dashboard's figures as of now. It carries no mark: it brings no event,
// and the browser keeps the mark of the last frame that did. The figures hold no customer data
// and are the same for every viewer, so the sockets watching the same queue and window share one
// read and one render (figuresShared).
func (s *Server) figuresFrame(ctx context.Context, f dashboard.Filter) (frame, error) {
	return s.figures.get(f, min(figuresFresh, s.cfg.DashboardEvery/2), func() (frame, error) {
		v, err := s.dashboardFigures(ctx, f)
		if err != nil {
			return frame{}, err
		}
		frag, err := rendered(ctx, fragment{Target: "dashboard-figures", Op: "replace"}, views.DashboardNumbers(v))
		if err != nil {
			return frame{}, err
		}
		return frame{Type: "events", Fragments: []fragment{frag}}, nil
	})
}

// figuresFresh is how long at most one read of a dashboard's figures serves the other sockets
// watching the same queue and window; never more than half the DashboardEvery each socket waits
// between sends, so no socket sends figures it already sent.
const figuresFresh = time.Second

// figuresShared is the dashboard's figures as last read per queue and window. Sockets' timers
// fire at their own times, so a read in flight is shared (singleflight) and a fresh one is kept
// for figuresFresh: however many supervisors watch, a filter is read about once a second at most.
type figuresShared struct {
	flight singleflight.Group
	mu     sync.Mutex
	last   map[string]sharedFigures
}

type sharedFigures struct {
	at time.Time
	f  frame
}

func (c *figuresShared) get(f dashboard.Filter, fresh time.Duration, read func() (frame, error)) (frame, error) {
	key := f.Queue + "\x00" + f.Window.Name
	c.mu.Lock()
	last, ok := c.last[key]
	c.mu.Unlock()
	if ok && time.Since(last.at) < fresh {
		return last.f, nil
	}
	v, err, _ := c.flight.Do(key, func() (any, error) {
		fr, err := read()
		if err != nil {
			return frame{}, err
		}
		c.mu.Lock()
		if c.last == nil {
			c.last = map[string]sharedFigures{}
		}
		c.last[key] = sharedFigures{at: time.Now(), f: fr}
		c.mu.Unlock()
		return fr, nil
	})
	return v.(frame), err
}

// batchItems reads the batch's packages once for every socket. The customers waiting on them, which
// every card shows, are read beside them rather than after: every socket's first frame of the batch
// waits for the slower of the two reads instead of their sum.
func (s *Server) batchItems(ctx context.Context, b live.Batch) (map[int64]board.Item, error) {
	return memo(b.Shared, "items", func() (map[int64]board.Item, error) {
		if slices.ContainsFunc(b.Events, showsOnCards) {
			// The read's result and error wait in the batch's memo for the frames that need them.
			go func() { _, _ = s.batchWaiting(context.WithoutCancel(ctx), b) }()
		}
		ctx, cancel := context.WithTimeout(ctx, loadTimeout)
		defer cancel()
		return s.board.Items(ctx, batchIDs(b))
	})
}

// showsOnCards reports whether e may change a package's card, which shows whether its customer waits.
func showsOnCards(e events.Event) bool { return e.HandoffID != 0 && e.Kind != events.Viewing }

// loadTimeout bounds a load made for a frame: the hub's workers take every socket's turns, and
// one waiting on the database holds up the sockets behind it.
const loadTimeout = 10 * time.Second

// listFragments places or removes the package's card in a queue list and in the held list.
func (s *Server) listFragments(ctx context.Context, w watcher, item board.Item, b live.Batch) ([]fragment, error) {
	cardID, heldID := "card-"+item.PublicID, "held-"+item.PublicID
	card, held := fragment{Target: cardID, Op: "remove"}, fragment{Target: heldID, Op: "remove"}
	waiting := item.Status == handoff.StatusQueued || item.Status == handoff.StatusReserved
	customers, err := s.batchWaiting(ctx, b)
	if err != nil {
		return nil, err
	}
	if waiting && slices.Contains(w.queueIDs, item.QueueID) {
		vis := visibility(w.user, item)
		card, err = memo(b.Shared, cardKey{item.ID, vis.PII}, func() (fragment, error) {
			return rendered(ctx, fragment{Target: cardID, Op: "upsert", List: "cards", Sort: item.SortKey()},
				views.QueueCard(withWaiting(cardOf(item, vis, cardEntities), customers, item.ID)))
		})
		if err != nil {
			return nil, err
		}
	}
	if item.HeldBy(w.user.ID) && item.Status.Open() {
		held, err = rendered(ctx, fragment{Target: heldID, Op: "upsert", List: "held", Sort: item.SortKey()},
			views.HeldCard(withWaiting(cardOf(item, visibility(w.user, item), cardEntities), customers, item.ID)))
		if err != nil {
			return nil, err
		}
	}
	return []fragment{card, held}, nil
}

type cardKey struct {
	id  int64
	pii bool
}

// packageFragments refreshes an open package view: its status bar, the actions the viewer may
// now take and its timeline; and says what the timeline shows unmasked. The view is loaded as the
// package page loads it, so both show the same.
func (s *Server) packageFragments(ctx context.Context, user auth.User, item board.Item) ([]fragment, []string, error) {
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	v, _, notes, err := s.loadHandoff(ctx, user, item.PublicID)
	if err != nil {
		return nil, nil, err
	}
	status, err := rendered(ctx, fragment{Target: "status-" + item.PublicID, Op: "replace"}, views.HandoffHeader(v.Card, v.Outcome))
	if err != nil {
		return nil, nil, err
	}
	actions, err := rendered(ctx, fragment{Target: "actions-" + item.PublicID, Op: "replace"}, views.ActionPanel(v.Card, v.Controls))
	if err != nil {
		return nil, nil, err
	}
	lines, err := rendered(ctx, fragment{Target: "timeline-lines-" + item.PublicID, Op: "replace"}, views.TimelineLines(item.PublicID, v.Timeline.Lines))
	if err != nil {
		return nil, nil, err
	}
	// The reply's place: a page whose agent loses the package says so at once (desk.js keeps
	// the composer while it is still theirs).
	reply, err := rendered(ctx, fragment{Target: "reply-" + item.PublicID, Op: "replace"}, views.ReplySlot(v))
	if err != nil {
		return nil, nil, err
	}
	return []fragment{status, actions, lines, reply}, notes, nil
}

// approvalsFragment is the pending requests' list as user sees it: who may decide which request
// is the user's own, so it is rendered per socket (supervisors are few).
func (s *Server) approvalsFragment(ctx context.Context, user auth.User, b live.Batch) (fragment, audit.Shown, error) {
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	// The list is read once per batch for every supervisor's socket; only its rendering is theirs.
	pending, err := memo(b.Shared, "approvals", func() ([]approvals.Listed, error) { return approvals.PendingList(ctx, s.db) })
	if err != nil {
		return fragment{}, audit.Shown{}, err
	}
	around, err := memo(b.Shared, "approvals-context", func() (map[int64]approvalContext, error) { return s.approvalContexts(ctx, pending) })
	if err != nil {
		return fragment{}, audit.Shown{}, err
	}
	rows, shown := approvalRows(user, pending, around)
	f, err := rendered(ctx, fragment{Target: "approvals", Op: "replace"}, views.ApprovalList(rows))
	return f, shown, err
}

// approvalsCount is the count of approvals that wait, for a supervisor's top bar: the same for
// every supervisor.
func (s *Server) approvalsCount(ctx context.Context) (fragment, error) {
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	n, err := approvals.PendingCount(ctx, s.db)
	if err != nil {
		return fragment{}, err
	}
	return rendered(ctx, fragment{Target: "approvals-count", Op: "replace"}, views.ApprovalsCount(n))
}

// rendered is f with c rendered as its HTML. A fragment whose component failed is an error,
// never an empty element: the browser would put nothing in the element's place.
func rendered(ctx context.Context, f fragment, c templ.Component) (fragment, error) {
	var buf bytes.Buffer
	if err := c.Render(ctx, &buf); err != nil {
		return fragment{}, fmt.Errorf("render %s: %w", f.Target, err)
	}
	f.HTML = buf.String()
	return f, nil
}

// packageEvents are the batch's events about package id.
func packageEvents(b live.Batch, id int64) []events.Event {
	var evs []events.Event
	for _, e := range b.Events {
		if e.HandoffID == id {
			evs = append(evs, e)
		}
	}
	return evs
}
