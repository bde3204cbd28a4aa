// Package clocktest holds a clock that tests step instead of sleeping through.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a time that moves only when Advance is called; safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New returns a Clock standing at now.
func New(now time.Time) *Clock { return &Clock{now: now} }

// Now is the clock's time, to pass where code takes a func() time.Time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
