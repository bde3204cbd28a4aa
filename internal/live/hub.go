// Package live carries the desk's state changes to every open browser, on every instance. The
// event log is the truth; NOTIFY only says "look now", so a lost notification delays an update
// (until the next poll) but never loses it.
package live

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/postgres"
)

// Hub timing: how often it reads even without a notification (so a lost NOTIFY costs at most
// this much delay) and how many events one read takes.
const (
	PollInterval = time.Second
	readLimit    = 10000
	// Held-back events are read again after a backoff from retryMin doubling to retryMax: a
	// transaction elsewhere on the cluster ends in a few milliseconds as a rule, and waiting for
	// the next poll would add up to a second to the desk's latency.
	retryMin = 5 * time.Millisecond
	retryMax = 100 * time.Millisecond
	// subscriberBuffer is how many batches a socket may fall behind before it is dropped; a
	// dropped browser reconnects and catches up from its mark.
	subscriberBuffer = 16
)

// Batch is what one read of the event stream delivers: the events and the mark after them.
// Shared lets the receivers of one batch compute things once (load cards, render fragments).
type Batch struct {
	Events []events.Event
	Mark   events.Mark
	// Resync goes to every subscriber when the database is no longer the incarnation the hub
	// was following (it restarted, recovered from a crash or failed over): events before Mark
	// may never be read, so what each receiver shows must be loaded afresh.
	Resync bool
	Shared *Shared
}

// Shared is per-batch memory the receivers of a batch share.
type Shared struct {
	mu     sync.Mutex
	values map[any]*memo
}

type memo struct {
	once  sync.Once
	value any
}

// NewShared returns empty per-batch memory, for batches made outside the hub (catch-up).
func NewShared() *Shared { return &Shared{values: map[any]*memo{}} }

// Memo returns the value for key, computing it with f the first time it is asked for; receivers
// asking for the same key meanwhile wait rather than compute it again. f may itself use Memo with
// other keys.
func (s *Shared) Memo(key any, f func() any) any {
	s.mu.Lock()
	m, ok := s.values[key]
	if !ok {
		m = &memo{}
		s.values[key] = m
	}
	s.mu.Unlock()
	m.once.Do(func() { m.value = f() })
	return m.value
}

// Ending says why a subscriber's turn is its last; zero while it goes on.
type Ending int

const (
	_ Ending = iota
	// FellBehind: more than the hub's buffer of batches waited for the subscriber, which is
	// dropped rather than waited for.
	FellBehind
	// Stopped: the stop channel the subscriber was given closed.
	Stopped
)

// Subscriber receives the batches touching what it watches. The hub's workers hand them to its
// receive function in turns: one turn at a time, in order, never two at once, so the receiver
// (a socket) needs no goroutine of its own to wait on them.
type Subscriber struct {
	hub     *Hub
	watch   func(events.Event) bool
	receive func(batches []Batch, ending Ending)
	stop    <-chan struct{}

	mu      sync.Mutex
	pending []Batch
	ending  Ending
	poked   bool
	held    bool // until Start
	busy    bool // waiting for a turn or in one
	gone    bool // unsubscribed or had its last turn
}

// Hub reads the event stream once per instance and fans each batch out to the subscribers. A
// subscriber that falls behind is dropped, never waited for: publishing only queues the batch,
// and a fixed set of workers takes the subscribers' turns.
type Hub struct {
	db     events.Querier
	logger *slog.Logger
	wake   chan struct{}

	mu    sync.Mutex
	subs  map[*Subscriber]struct{}
	stops map[<-chan struct{}]struct{} // the stop channels watched, each by one goroutine
	mark  events.Mark
	// buffer is subscriberBuffer; tests shrink it to reach a drop quickly.
	buffer int
	// observers see each batch before any subscriber does (Observe).
	observers []func(Batch)

	// ready holds the subscribers waiting for a turn, each at most once, oldest first.
	readyMu   sync.Mutex
	readyCond sync.Cond
	ready     []*Subscriber
	stopped   bool
}

// workers is how many goroutines take the subscribers' turns. A turn writes to a network
// connection, which may block for as long as the receiver's write deadline: enough workers that
// a few stalled receivers do not hold up the rest, few enough that their stacks cost nothing
// next to thousands of sockets.
const workers = 32

// NewHub returns a hub over db; Run starts it.
func NewHub(db events.Querier, logger *slog.Logger) *Hub {
	h := &Hub{db: db, logger: logger, wake: make(chan struct{}, 1), subs: make(map[*Subscriber]struct{}),
		stops: make(map[<-chan struct{}]struct{}), buffer: subscriberBuffer}
	h.readyCond.L = &h.readyMu
	return h
}

// Wake asks the hub to read now; many wakes before it reads cost one read.
func (h *Hub) Wake() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Observe has f see every batch with events, on the hub's reading goroutine, before any
// subscriber gets it: for what must hold by the time a socket acts on the batch. f must be quick,
// as every subscriber waits for it. Observe is called before Run.
func (h *Hub) Observe(f func(Batch)) { h.observers = append(h.observers, f) }

// Subscribe adds a subscriber for the events watch accepts and returns it with the hub's current
// mark: receive gets every batch after that mark, in turns that begin once Start is called (the
// caller sends what must come first meanwhile). When stop closes, the subscriber's next turn is
// its last, with the ending Stopped; a nil stop never closes.
func (h *Hub) Subscribe(watch func(events.Event) bool, receive func(batches []Batch, ending Ending), stop <-chan struct{}) (*Subscriber, events.Mark) {
	s := &Subscriber{hub: h, watch: watch, receive: receive, stop: stop, held: true}
	h.mu.Lock()
	defer h.mu.Unlock()
	select {
	case <-stop:
		s.end(Stopped)
		return s, h.mark
	default:
	}
	h.subs[s] = struct{}{}
	if _, ok := h.stops[stop]; !ok && stop != nil {
		h.stops[stop] = struct{}{}
		go h.stopOn(stop)
	}
	return s, h.mark
}

// stopOn gives every subscriber of stop its last turn when stop closes.
func (h *Hub) stopOn(stop <-chan struct{}) {
	<-stop
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.stops, stop)
	var ready []*Subscriber
	for s := range h.subs {
		if s.stop != stop {
			continue
		}
		delete(h.subs, s)
		s.mu.Lock()
		s.end(Stopped)
		if s.schedule() {
			ready = append(ready, s)
		}
		s.mu.Unlock()
	}
	h.push(ready...)
}

// Start begins the subscriber's turns.
func (s *Subscriber) Start() { s.update(func() { s.held = false }) }

// Poke asks for a turn even with no batch waiting: the receiver has something of its own to send
// (a keepalive) in order with the batches.
func (s *Subscriber) Poke() { s.update(func() { s.poked = true }) }

// update changes s under its lock and hands it to the workers if that earns it a turn.
func (s *Subscriber) update(change func()) {
	s.mu.Lock()
	change()
	ready := s.schedule()
	s.mu.Unlock()
	if ready {
		s.hub.push(s)
	}
}

// Unsubscribe removes s: it gets no further turn, though one under way finishes. It is safe
// after the hub dropped s.
func (h *Hub) Unsubscribe(s *Subscriber) {
	h.mu.Lock()
	delete(h.subs, s)
	h.mu.Unlock()
	s.mu.Lock()
	s.gone, s.pending = true, nil
	s.mu.Unlock()
}

// Mark is where the hub has read up to; empty until Run has started.
func (h *Hub) Mark() events.Mark {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.mark
}

// Subscribers counts the live subscribers.
func (h *Hub) Subscribers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Run reads and fans out until ctx is done; subscribers get their turns only while it runs. A
// database that does not answer at start is waited for: the sockets open meanwhile are served
// from the first mark on.
func (h *Hub) Run(ctx context.Context) {
	var running sync.WaitGroup
	for range workers {
		running.Go(h.work)
	}
	defer running.Wait()
	defer func() {
		h.readyMu.Lock()
		h.stopped = true
		h.readyCond.Broadcast()
		h.readyMu.Unlock()
	}()
	mark, ok := h.firstMark(ctx)
	if !ok {
		return
	}
	h.mu.Lock()
	h.mark = mark
	h.mu.Unlock()
	ticker := time.NewTicker(PollInterval)
	defer ticker.Stop()
	var retry <-chan time.Time
	backoff := retryMin
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.wake:
		case <-ticker.C:
		case <-retry:
		}
		retry = nil
		for {
			batch, next, waiting, err := events.Read(ctx, h.db, mark, readLimit)
			if errors.Is(err, events.ErrOtherIncarnation) {
				h.logger.Warn("the database restarted, recovered from a crash or failed over: live pages reload", "mark", next)
				mark = next
				h.publish(Batch{Mark: next, Resync: true, Shared: NewShared()})
				break
			}
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				if postgres.OutOfReach(err) {
					h.logger.Warn("reading desk events: the database cannot answer now; retrying", "err", err)
				} else {
					h.logger.Error("reading desk events", "err", err)
				}
				break
			}
			mark = next
			h.publish(Batch{Events: batch, Mark: next, Shared: NewShared()})
			if len(batch) >= readLimit {
				continue
			}
			if waiting {
				retry = time.After(backoff)
				backoff = min(backoff*2, retryMax)
			} else {
				backoff = retryMin
			}
			break
		}
	}
}

// firstMark asks the database where the event stream stands, again and again with a growing pause
// while it does not answer; ok is false when ctx ends first.
func (h *Hub) firstMark(ctx context.Context) (mark events.Mark, ok bool) {
	backoff := 100 * time.Millisecond
	for {
		mark, err := events.Now(ctx, h.db)
		if err == nil {
			return mark, true
		}
		if ctx.Err() != nil {
			return "", false
		}
		h.logger.Warn("live hub cannot start: the database does not answer; retrying", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return "", false
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (h *Hub) publish(b Batch) {
	if len(b.Events) > 0 {
		for _, f := range h.observers {
			f(b)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mark = b.Mark
	if len(b.Events) == 0 && !b.Resync {
		return
	}
	// Walking thousands of subscribers takes milliseconds, so the workers get them in chunks as
	// the walk goes rather than all at its end: the first sockets are written meanwhile.
	ready := make([]*Subscriber, 0, publishChunk)
	for s := range h.subs {
		if !s.wants(b) {
			continue
		}
		s.mu.Lock()
		if len(s.pending) == h.buffer {
			delete(h.subs, s)
			s.end(FellBehind)
			h.logger.Warn("dropped a slow live subscriber")
		} else {
			s.pending = append(s.pending, b)
		}
		if s.schedule() {
			ready = append(ready, s)
		}
		s.mu.Unlock()
		if len(ready) == publishChunk {
			h.push(ready...)
			ready = ready[:0]
		}
	}
	h.push(ready...)
}

// publishChunk is how many subscribers publish hands the workers at a time.
const publishChunk = 64

func (s *Subscriber) wants(b Batch) bool {
	if b.Resync {
		return true
	}
	for _, e := range b.Events {
		if s.watch(e) {
			return true
		}
	}
	return false
}

// end makes the subscriber's next turn its last; s.mu is held.
func (s *Subscriber) end(why Ending) {
	if s.ending == 0 {
		s.ending, s.pending = why, nil
	}
}

// schedule reports whether s needs a turn it has not been given yet and, if so, marks it given:
// the caller pushes it. s.mu is held.
func (s *Subscriber) schedule() bool {
	if s.held || s.busy || s.gone {
		return false
	}
	if len(s.pending) == 0 && !s.poked && s.ending == 0 {
		return false
	}
	s.busy = true
	return true
}

func (h *Hub) push(subs ...*Subscriber) {
	if len(subs) == 0 {
		return
	}
	h.readyMu.Lock()
	h.ready = append(h.ready, subs...)
	h.readyMu.Unlock()
	if len(subs) == 1 {
		h.readyCond.Signal()
	} else {
		h.readyCond.Broadcast()
	}
}

// work takes turns until Run ends.
func (h *Hub) work() {
	for {
		h.readyMu.Lock()
		for len(h.ready) == 0 && !h.stopped {
			h.readyCond.Wait()
		}
		if h.stopped {
			h.readyMu.Unlock()
			return
		}
		s := h.ready[0]
		h.ready[0] = nil
		h.ready = h.ready[1:]
		h.readyMu.Unlock()
		h.turn(s)
	}
}

// turn hands s what waited for it. A subscriber with more waiting afterwards goes to the back of
// the line, so a busy one does not keep a worker from the others.
func (h *Hub) turn(s *Subscriber) {
	s.mu.Lock()
	if s.gone {
		s.busy = false
		s.mu.Unlock()
		return
	}
	batches, ending := s.pending, s.ending
	s.pending, s.poked = nil, false
	s.gone = ending != 0
	s.mu.Unlock()

	s.receive(batches, ending)

	s.mu.Lock()
	s.busy = false
	ready := s.schedule()
	s.mu.Unlock()
	if ready {
		h.push(s)
	}
}
