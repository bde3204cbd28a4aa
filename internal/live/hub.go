package live

import (
	"context"
	"log/slog"
	"sync"
	"time"
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
	Events []Event
	Mark   Mark
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

// Subscriber receives the batches touching what it watches. Its channel closes when the hub
// drops it for falling behind or when it unsubscribes.
type Subscriber struct {
	C       <-chan Batch
	c       chan Batch
	watch   func(Event) bool
	dropped bool
}

// Hub reads the event stream once per instance and fans each batch out to the subscribers. One
// goroutine owns the subscriber set; a subscriber that falls behind is dropped, never waited for.
type Hub struct {
	db     Querier
	logger *slog.Logger
	wake   chan struct{}

	mu   sync.Mutex
	subs map[*Subscriber]struct{}
	mark Mark
	// buffer is subscriberBuffer; tests shrink it to reach a drop quickly.
	buffer int
}

// NewHub returns a hub over db; Run starts it.
func NewHub(db Querier, logger *slog.Logger) *Hub {
	return &Hub{db: db, logger: logger, wake: make(chan struct{}, 1), subs: make(map[*Subscriber]struct{}), buffer: subscriberBuffer}
}

// Wake asks the hub to read now; many wakes before it reads cost one read.
func (h *Hub) Wake() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Subscribe adds a subscriber for the events watch accepts and returns it with the hub's current
// mark: the subscriber receives every batch after that mark.
func (h *Hub) Subscribe(watch func(Event) bool) (*Subscriber, Mark) {
	c := make(chan Batch, h.buffer)
	s := &Subscriber{C: c, c: c, watch: watch}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.subs[s] = struct{}{}
	return s, h.mark
}

// Unsubscribe removes s and closes its channel; it is safe after the hub dropped s.
func (h *Hub) Unsubscribe(s *Subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.subs[s]; ok {
		delete(h.subs, s)
		close(s.c)
	}
}

// Mark is where the hub has read up to; empty until Run has started.
func (h *Hub) Mark() Mark {
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

// Run reads and fans out until ctx is done.
func (h *Hub) Run(ctx context.Context) error {
	mark, err := Now(ctx, h.db)
	if err != nil {
		return err
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
			return nil
		case <-h.wake:
		case <-ticker.C:
		case <-retry:
		}
		retry = nil
		for {
			events, next, waiting, err := read(ctx, h.db, mark, readLimit)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				h.logger.Error("reading desk events", "err", err)
				break
			}
			mark = next
			h.publish(Batch{Events: events, Mark: next, Shared: NewShared()})
			if len(events) == readLimit {
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

func (h *Hub) publish(b Batch) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.mark = b.Mark
	if len(b.Events) == 0 {
		return
	}
	for s := range h.subs {
		if !s.wants(b) {
			continue
		}
		select {
		case s.c <- b:
		default:
			delete(h.subs, s)
			s.dropped = true
			close(s.c)
			h.logger.Warn("dropped a slow live subscriber")
		}
	}
}

func (s *Subscriber) wants(b Batch) bool {
	for _, e := range b.Events {
		if s.watch(e) {
			return true
		}
	}
	return false
}
