package server_test

import (
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/timeline"
	"github.com/handoffdesk/desk/views"
)

// TestOneDurationFormat: every duration the desk writes is in one notation ("45s", "17m 05s",
// "1h 05m"): the timeline's rings say what views.FormatSpan says, and none is Go's "17m0s".
func TestOneDurationFormat(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{20 * time.Second, "20s"}, {17 * time.Minute, "17m"}, {17*time.Minute + 5*time.Second, "17m 05s"},
		{time.Hour, "1h 00m"}, {time.Hour + 5*time.Minute + 9*time.Second, "1h 05m"}, {1500 * time.Millisecond, "2s"},
		{26 * time.Hour, "1d 2h"},
	} {
		if got := views.FormatSpan(c.d); got != c.want {
			t.Errorf("FormatSpan(%s) = %q, want %q", c.d, got, c.want)
		}
		if c.d >= 24*time.Hour {
			continue // no ring lasts a day
		}
		line := timeline.Words(timeline.Entry{Kind: events.OfferEnded, Subject: "Bea", Rang: c.d})
		if _, got, _ := strings.Cut(line.Text, " · "); got != c.want {
			t.Errorf("a ring of %s reads %q, want %q", c.d, line.Text, c.want)
		}
	}
}
