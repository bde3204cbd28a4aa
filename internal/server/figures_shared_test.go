package server

import (
	"testing"

	"github.com/handoffdesk/desk/internal/dashboard"
)

// Sockets watching the same queue and window within figuresFresh share one read of the
// dashboard's figures; another queue or window reads its own.
func TestDashboardFiguresAreReadOncePerFilter(t *testing.T) {
	t.Parallel()
	var c figuresShared
	reads := 0
	read := func() (frame, error) { reads++; return frame{Type: "events"}, nil }
	windows := dashboard.Windows()
	billing := dashboard.Filter{Queue: "billing", Window: windows[0]}
	for range 5 {
		if _, err := c.get(billing, figuresFresh, read); err != nil {
			t.Fatal(err)
		}
	}
	if reads != 1 {
		t.Errorf("five sockets on one filter read the figures %d times, want 1", reads)
	}
	for _, f := range []dashboard.Filter{{Queue: "tech", Window: windows[0]}, {Queue: "billing", Window: windows[1]}} {
		if _, err := c.get(f, figuresFresh, read); err != nil {
			t.Fatal(err)
		}
	}
	if reads != 3 {
		t.Errorf("two more filters brought the reads to %d, want 3", reads)
	}
}
