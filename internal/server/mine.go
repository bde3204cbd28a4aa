package server

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/audit"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/timeline"
	"github.com/handoffdesk/desk/views"
)

// handleMine is "My work": every package the user holds, in whichever queue, live.
func (s *Server) handleMine(c echo.Context) error {
	ctx, user := c.Request().Context(), currentUser(c)
	held, err := s.board.Held(ctx, user.ID)
	if err != nil {
		return err
	}
	rows, shown, err := s.mineRows(ctx, user, held)
	if err != nil {
		return err
	}
	via := audit.ViaPage
	if framed(c) {
		via = audit.ViaSidebar
	}
	if err := audit.Record(ctx, s.db, user.ID, via, shown); err != nil {
		return err
	}
	if framed(c) {
		// The way back inside a CRM's frame: each package opens as the sidebar.
		for i := range rows {
			rows[i].Href = "/sidebar/" + rows[i].Card.ID
		}
		s.allowFraming(c)
		return s.render(c, http.StatusOK, views.MineFramedPage(views.MineView{Viewer: *viewer(c), Rows: rows}))
	}
	return s.render(c, http.StatusOK, views.MinePage(views.MineView{Viewer: *viewer(c), Rows: rows,
		Live: views.LiveConfig{Mine: true, Mark: string(s.hub.Mark())}}))
}

// mineRows maps the packages user holds to the rows of "My work", masked for them, in the page's
// order, and says what they show unmasked.
func (s *Server) mineRows(ctx context.Context, user auth.User, held []board.Item) ([]views.MineRow, audit.Shown, error) {
	ids := make([]int64, len(held))
	for i, it := range held {
		ids[i] = it.ID
	}
	latest, err := timeline.Latest(ctx, s.db, ids)
	if err != nil {
		return nil, audit.Shown{}, err
	}
	waiting, err := conversation.WaitingOf(ctx, s.db, ids)
	if err != nil {
		return nil, audit.Shown{}, err
	}
	quiet, err := conversation.Quiet(ctx, s.db, ids)
	if err != nil {
		return nil, audit.Shown{}, err
	}
	now := time.Now()
	var shown audit.Shown
	rows := make([]views.MineRow, 0, len(held))
	for _, it := range held {
		vis := visibility(user, it)
		last, ok := latest[it.ID]
		row := mineRowOf(it, vis, last, ok, waiting)
		row.Card.Idle = customerIdle(quiet, it, now)
		rows = append(rows, row)
		shown.Add(it.ID, cardUnmasked(it, vis, cardEntities))
	}
	slices.SortFunc(rows, func(a, b views.MineRow) int { return strings.Compare(views.MineSort(a), views.MineSort(b)) })
	return rows, shown, nil
}

// mineRowOf is a row of My work.
func mineRowOf(item board.Item, vis handoff.Visibility, last timeline.Entry, hasLast bool, waiting map[int64]conversation.Waiting) views.MineRow {
	r := views.MineRow{Card: withWaiting(cardOf(item, vis, cardEntities), waiting, item.ID), Href: "/handoffs/" + item.PublicID,
		Status: timeline.Spoken(string(item.Status))}
	r.Due = slaDue(item, r.Card.Waiting)
	if hasLast {
		l := timeline.Words(last)
		r.Last, r.LastAt = l.Text, l.At
	}
	return r
}

// slaDue is when a held package's SLA runs out, by the two clocks of /packages' sla_breached: from
// its arrival until the accept, and from its customer's first unanswered message (waiting, nil
// when nobody waits) until the answer. Whichever runs out first is the package's; a clock that
// stopped within the SLA no longer counts. Zero once accepted with nobody waiting: the card's SLA
// timer says how the accept went.
func slaDue(item board.Item, waiting *views.CustomerWaiting) time.Time {
	arrival := item.CreatedAt.Add(item.SLA)
	switch {
	case item.AcceptedAt == nil:
		// A customer writes after the arrival, so this clock runs out first.
		return arrival
	case waiting == nil:
		return time.Time{}
	case item.AcceptedAt.After(arrival):
		// Accepted late: over already, however long the customer has waited since.
		return arrival
	}
	return waiting.Since.Add(item.SLA)
}

// pageUser is the user a page load is for. Only page loads read what the layout shows atop every
// page: not the socket, the API or static files.
func pageUser(c echo.Context) (auth.User, bool) {
	user, ok := c.Get(userKey).(auth.User)
	path := c.Request().URL.Path
	return user, ok && c.Request().Method == http.MethodGet && path != "/ws" && !strings.HasPrefix(path, "/static/") &&
		!strings.HasPrefix(path, "/api/")
}

// heldSet is the packages a socket's user holds, as far as the socket knows: the hub asks it, for
// every event and socket, whether the socket follows the event's package, so it is read with one
// atomic load; it changes only when the user's packages do, by copy.
type heldSet struct {
	ids atomic.Pointer[[]int64]
}

func newHeldSet(ids []int64) *heldSet {
	h := &heldSet{}
	h.ids.Store(&ids)
	return h
}

func (h *heldSet) has(id int64) bool {
	if h == nil {
		return false
	}
	return slices.Contains(*h.ids.Load(), id)
}

// set records whether the user holds package id.
func (h *heldSet) set(id int64, held bool) {
	for {
		old := h.ids.Load()
		if slices.Contains(*old, id) == held {
			return
		}
		next := slices.DeleteFunc(slices.Clone(*old), func(x int64) bool { return x == id })
		if held {
			next = append(next, id)
		}
		if h.ids.CompareAndSwap(old, &next) {
			return
		}
	}
}

func (h *heldSet) reset(ids []int64) { h.ids.Store(&ids) }

// follows reports whether e is about a package w's user holds, or one they acted on, which may be
// theirs now: the count of what they hold may have moved. A package they act on is followed from
// then on, so that the next change of it, whoever makes it, reaches them even before the frame
// of this one finds out whether they hold it (mineFragments).
func (w *watcher) follows(e events.Event) bool {
	if e.HandoffID == 0 || w.held == nil || e.Kind == events.Viewing {
		return false // who has a package open changes nothing of what its holder's lists show
	}
	// What they did, and a package a supervisor moved to them.
	if e.ActorUser == w.user.ID || (e.Kind == events.Reassigned && e.UserID == w.user.ID) {
		w.held.set(e.HandoffID, true)
		return true
	}
	return w.held.has(e.HandoffID)
}

// summarized reports whether e changes a queue's counts on w's "my queues".
func (w *watcher) summarized(e events.Event) bool {
	_, in := w.summaries[e.QueueID]
	_, from := w.summaries[e.FromQueueID]
	return in || from
}

// holdingCount is a batch's memo key for how many packages a user holds.
type holdingCount int64

// mineFragments is what a batch changes of the packages w's user holds: the count in the top bar
// and, on "My work", their rows.
func (s *Server) mineFragments(ctx context.Context, w watcher, b live.Batch, items map[int64]board.Item) ([]fragment, audit.Shown, error) {
	var followed []int64
	for _, e := range b.Events {
		if w.follows(e) && !slices.Contains(followed, e.HandoffID) {
			followed = append(followed, e.HandoffID)
		}
	}
	if len(followed) == 0 {
		return nil, audit.Shown{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	var latest map[int64]timeline.Entry
	if w.mine {
		var err error
		latest, err = memo(b.Shared, "latest", func() (map[int64]timeline.Entry, error) {
			return timeline.Latest(ctx, s.db, batchIDs(b))
		})
		if err != nil {
			return nil, audit.Shown{}, err
		}
	}
	var waiting map[int64]conversation.Waiting
	var quiet map[int64]time.Time
	if w.mine {
		var err error
		if waiting, err = s.batchWaiting(ctx, b); err != nil {
			return nil, audit.Shown{}, err
		}
		if quiet, err = s.batchQuiet(ctx, b); err != nil {
			return nil, audit.Shown{}, err
		}
	}
	now := time.Now()
	var frags []fragment
	var shown audit.Shown
	for _, id := range followed {
		item, ok := items[id]
		held := ok && item.HeldBy(w.user.ID) && item.Status.Open()
		w.held.set(id, held)
		if !w.mine || !ok {
			continue
		}
		target := "mine-" + item.PublicID
		if !held {
			frags = append(frags, fragment{Target: target, Op: "remove"})
			continue
		}
		vis := visibility(w.user, item)
		last, hasLast := latest[id]
		row := mineRowOf(item, vis, last, hasLast, waiting)
		row.Card.Idle = customerIdle(quiet, item, now)
		frag, err := rendered(ctx, fragment{Target: target, Op: "upsert", List: "cards", Sort: views.MineSort(row)}, views.MineItem(row))
		if err != nil {
			return nil, audit.Shown{}, err
		}
		frags = append(frags, frag)
		shown.Add(item.ID, cardUnmasked(item, vis, cardEntities))
	}
	count, err := memo(b.Shared, holdingCount(w.user.ID), func() (fragment, error) {
		ids, err := s.board.HeldIDs(ctx, w.user.ID)
		if err != nil {
			return fragment{}, err
		}
		waiting, err := conversation.WaitingOf(ctx, s.db, ids)
		if err != nil {
			return fragment{}, err
		}
		return rendered(ctx, fragment{Target: "mine-count", Op: "replace"}, views.MineCount(len(ids), unread(waiting)))
	})
	if err != nil {
		return nil, audit.Shown{}, err
	}
	return append(frags, count), shown, nil
}

// mineAfresh is what a socket that caught up on missed events shows of the packages its user
// holds, read anew: the count, and on "My work" the whole list. The socket's own account (its
// heldSet) started when it opened, and a package that left the user's hands between the page's
// render and then would otherwise stay on the page.
func (s *Server) mineAfresh(ctx context.Context, w watcher) ([]fragment, audit.Shown, error) {
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	held, err := s.board.Held(ctx, w.user.ID)
	if err != nil {
		return nil, audit.Shown{}, err
	}
	ids := make([]int64, len(held))
	for i, it := range held {
		ids[i] = it.ID
	}
	w.held.reset(ids)
	waiting, err := conversation.WaitingOf(ctx, s.db, ids)
	if err != nil {
		return nil, audit.Shown{}, err
	}
	count, err := rendered(ctx, fragment{Target: "mine-count", Op: "replace"}, views.MineCount(len(ids), unread(waiting)))
	if err != nil || !w.mine {
		return []fragment{count}, audit.Shown{}, err
	}
	rows, shown, err := s.mineRows(ctx, w.user, held)
	if err != nil {
		return nil, audit.Shown{}, err
	}
	list, err := rendered(ctx, fragment{Target: "cards", Op: "replace"}, views.MineList(rows))
	return []fragment{count, list}, shown, err
}

// summaryFragments brings the rows of w's "my queues" that the batch changed up to date: one count
// of the batch's queues serves every socket.
func (s *Server) summaryFragments(ctx context.Context, w watcher, b live.Batch) ([]fragment, error) {
	var ids []int64
	for _, e := range b.Events {
		for _, q := range []int64{e.QueueID, e.FromQueueID} {
			if _, ok := w.summaries[q]; ok && !slices.Contains(ids, q) {
				ids = append(ids, q)
			}
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, loadTimeout)
	defer cancel()
	counts, err := memo(b.Shared, "summaries", func() (map[int64]queue.Summary, error) {
		var all []int64
		for _, e := range b.Events {
			all = append(all, e.QueueID, e.FromQueueID)
		}
		return s.queues.SummariesOf(ctx, all)
	})
	if err != nil {
		return nil, err
	}
	now := time.Now()
	var frags []fragment
	for _, id := range ids {
		sum, ok := counts[id]
		if !ok {
			continue
		}
		sum.Member = w.summaries[id]
		frag, err := rendered(ctx, fragment{Target: "queue-row-" + sum.Name, Op: "replace"}, views.QueueRow(queueSummaryOf(sum, now)))
		if err != nil {
			return nil, err
		}
		frags = append(frags, frag)
	}
	return frags, nil
}

// queueSummaryOf is a queue's row on "my queues".
func queueSummaryOf(q queue.Summary, now time.Time) views.QueueSummary {
	row := views.QueueSummary{Name: q.Name, Open: q.Open, Waiting: q.Waiting, Member: q.Member}
	if q.OldestWait != nil {
		row.OldestWait = now.Sub(*q.OldestWait)
		row.OverSLA = row.OldestWait > q.SLA
	}
	return row
}

func batchIDs(b live.Batch) []int64 {
	ids := make([]int64, 0, len(b.Events))
	for _, e := range b.Events {
		ids = append(ids, e.HandoffID)
	}
	return ids
}

// batchWaiting is which of the batch's packages have a customer waiting for an answer, read once
// for every socket the batch goes to.
func (s *Server) batchWaiting(ctx context.Context, b live.Batch) (map[int64]conversation.Waiting, error) {
	return memo(b.Shared, "waiting", func() (map[int64]conversation.Waiting, error) {
		ctx, cancel := context.WithTimeout(ctx, loadTimeout)
		defer cancel()
		return conversation.WaitingOf(ctx, s.db, batchIDs(b))
	})
}

// batchQuiet is since when the customers of the batch's packages have left their agent's reply
// unanswered, read once for every socket the batch goes to.
func (s *Server) batchQuiet(ctx context.Context, b live.Batch) (map[int64]time.Time, error) {
	return memo(b.Shared, "quiet", func() (map[int64]time.Time, error) {
		ctx, cancel := context.WithTimeout(ctx, loadTimeout)
		defer cancel()
		return conversation.Quiet(ctx, s.db, batchIDs(b))
	})
}
