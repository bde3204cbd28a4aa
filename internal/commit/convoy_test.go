package commit

import (
	"sync"
	"testing"
	"time"
)

// A write that panics fails its own caller only: later work still travels.
func TestConvoyGoesOnAfterAPanic(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var written []int
	c := NewConvoy(FirstOf[int](4), func(group []int) {
		if group[0] == 0 {
			panic("write failed")
		}
		mu.Lock()
		written = append(written, group...)
		mu.Unlock()
	})
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not reach the caller that led")
			}
		}()
		c.Join(0)
	}()
	done := make(chan struct{})
	go func() {
		c.Join(1)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the convoy stalled after a panic")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(written) != 1 || written[0] != 1 {
		t.Fatalf("written %v, want [1]", written)
	}
}
