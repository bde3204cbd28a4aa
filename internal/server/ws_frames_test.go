package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/live"
)

var agentOnQueue1 = watcher{user: auth.User{ID: 1, Role: auth.RoleAgent}, queueIDs: []int64{1}, queueKey: "[1]"}

func queuedItem() board.Item {
	return board.Item{ID: 7, State: actions.State{PublicID: "HD-7", Status: handoff.StatusQueued}, QueueID: 1, Queue: "billing_t2",
		PIIMinRole: string(auth.RoleSupervisor)}
}

// batchOf is a batch announcing item, its items already loaded as the batch's first socket would
// have loaded them, so no database is needed.
func batchOf(item board.Item) live.Batch {
	b := live.Batch{Events: []events.Event{{QueueID: item.QueueID, HandoffID: item.ID, Kind: "queued"}}, Shared: live.NewShared()}
	_, _ = memo(b.Shared, "items", func() (map[int64]board.Item, error) {
		return map[int64]board.Item{item.ID: item}, nil
	})
	_, _ = memo(b.Shared, "waiting", func() (map[int64]conversation.Waiting, error) { return nil, nil })
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

func TestSocketAnswersAFrameItCannotBuildWithAnErrorFrame(t *testing.T) {
	var logs bytes.Buffer
	s := &Server{logger: slog.New(slog.NewTextHandler(&logs, nil))}
	item, b := queuedItem(), batchOf(queuedItem())
	// Another socket of the batch rendered the card and failed; this one shares that result.
	_, _ = memo(b.Shared, cardKey{item.ID, visibility(agentOnQueue1.user, item).PII}, func() (fragment, error) {
		return fragment{}, errors.New("views/queue.templ: card exploded")
	})
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		defer close(done)
		conn, err := (&websocket.Upgrader{}).Upgrade(rw, r, nil)
		if err != nil {
			t.Error(err)
			return
		}
		(&socket{s: s, conn: conn, w: agentOnQueue1}).receive([]live.Batch{b}, 0)
	}))
	defer srv.Close()
	conn, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))

	_, data, err := conn.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v; want an error frame before the close", err)
	}
	var got map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got["type"] != "error" || got["message"] == "" || len(got) != 2 || strings.Contains(string(data), "exploded") {
		t.Errorf("frame %s; want only a type error and a generic message", data)
	}
	if _, _, err := conn.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseInternalServerErr) {
		t.Errorf("after the error frame: %v; want close 1011", err)
	}
	<-done
	if n := strings.Count(logs.String(), "card exploded"); n != 1 {
		t.Errorf("the error was logged %d times, want once:\n%s", n, &logs)
	}
}
