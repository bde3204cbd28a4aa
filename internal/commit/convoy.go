// Package commit lets many small writes share one transaction and its durable commit. Domain code
// says what to write; this package decides which writes travel together. Intake groups its
// packages with a Convoy; the desk's actions send their statements as Trips.
package commit

import "sync"

// Convoy is how intake and the actions share commits. Work that arrives while one group is on
// its way to PostgreSQL waits and travels with the next group: a round trip, a durable commit and
// each statement's fixed cost are paid once per group. Work that finds nothing on its way goes at
// once, in a group of its own. One group at a time: on this desk's benchmarks two in flight were
// no faster, only smaller, and cost PostgreSQL more CPU per item.
type Convoy[T any] struct {
	take  func(waiting []T) (group, rest []T)
	write func(group []T)

	mu      sync.Mutex
	waiting []T
	running bool
}

// NewConvoy returns a convoy that forms groups with take, which splits what waits into the next
// group and the rest (given work, it takes some), and sends each with write, which answers its
// items.
func NewConvoy[T any](take func(waiting []T) (group, rest []T), write func(group []T)) *Convoy[T] {
	return &Convoy[T]{take: take, write: write}
}

// Join adds item to the next group, and sends that group itself when none is on its way. The
// caller then waits for item's answer, which write gives.
func (c *Convoy[T]) Join(item T) {
	c.mu.Lock()
	c.waiting = append(c.waiting, item)
	lead := !c.running
	c.running = true
	c.mu.Unlock()
	if lead {
		c.lead()
	}
}

// Waiting counts the items waiting for the next group.
func (c *Convoy[T]) Waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiting)
}

// lead sends one group. Should more be waiting then, a new goroutine takes the lead, so that the
// caller that led is answered as soon as its group is back.
func (c *Convoy[T]) lead() {
	c.mu.Lock()
	group, rest := c.take(c.waiting)
	c.waiting = rest
	c.mu.Unlock()
	// Even when write panics (a request's handler recovers it), the next group must still go:
	// a convoy left running with nobody leading it would stall every later caller.
	defer func() {
		c.mu.Lock()
		more := len(c.waiting) > 0
		c.running = more
		c.mu.Unlock()
		if more {
			go c.lead()
		}
	}()
	c.write(group)
}

// FirstOf takes up to n items in arrival order.
func FirstOf[T any](n int) func([]T) ([]T, []T) {
	return func(waiting []T) ([]T, []T) {
		n := min(len(waiting), n)
		return waiting[:n:n], waiting[n:]
	}
}
