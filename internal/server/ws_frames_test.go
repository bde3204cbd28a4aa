package server

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/a-h/templ"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/live"
)

var agentOnQueue1 = watcher{user: auth.User{ID: 1, Role: auth.RoleAgent}, queueIDs: []int64{1}, queueKey: "[1]"}

func queuedItem() handoff.Item {
	return handoff.Item{ID: 7, PublicID: "HD-7", QueueID: 1, Queue: "billing_t2", Status: handoff.StatusQueued,
		PIIMinRole: string(auth.RoleSupervisor)}
}

// batchOf is a batch announcing item, its items already loaded as the batch's first socket would
// have loaded them, so no database is needed.
func batchOf(item handoff.Item) live.Batch {
	b := live.Batch{Events: []live.Event{{QueueID: item.QueueID, HandoffID: item.ID, Kind: "queued"}}, Shared: live.NewShared()}
	_, _ = memo(b.Shared, "items", func() (map[int64]handoff.Item, error) {
		return map[int64]handoff.Item{item.ID: item}, nil
	})
	return b
}

func TestRenderedReturnsTheComponentsError(t *testing.T) {
	broken := errors.New("broken component")
	c := templ.ComponentFunc(func(context.Context, io.Writer) error { return broken })
	f, err := rendered(t.Context(), fragment{Target: "card-HD-7", Op: "upsert"}, c)
	if !errors.Is(err, broken) || !strings.Contains(err.Error(), "card-HD-7") {
		t.Fatalf("rendered = %+v, %v; want the component's error, naming the target", f, err)
	}
}

func TestFrameWithACardThatCannotRenderIsAnError(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel() // the real card component refuses to render for a done context
	f, err := (&Server{}).framesFor(ctx, agentOnQueue1, batchOf(queuedItem()))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("framesFor = %+v, %v; want the card's render error, not a frame", f, err)
	}
}
