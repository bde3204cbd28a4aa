package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/handoff/handofftest"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/internal/metrics"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
)

// R5: asked to stop, the server first answers /readyz with 503 while it goes on serving
// everything else, each answer closing its connection; only when the drain ends does it stop
// accepting, and then it finishes the requests in flight.
func TestDrainFailsReadinessWhileServing(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	people, queues := auth.NewService(db), queue.NewService(db)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	s, err := New(Config{Addr: ln.Addr().String(), BaseURL: base, DrainPeriod: time.Minute}, logger, db, people, queues,
		intake.New(db, time.Now, nil, nil), actions.New(db, time.Now, nil, nil, nil, ""), board.New(db), live.NewHub(db, logger), live.NewPresence(db, logger, nil), metrics.New(db), nil)
	if err != nil {
		t.Fatal(err)
	}
	drainAsked, drained := make(chan time.Duration, 1), make(chan time.Time)
	s.after = func(d time.Duration) <-chan time.Time {
		drainAsked <- d
		return drained
	}
	serveCtx, stop := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- s.Serve(serveCtx, ln) }()

	q, err := queues.Create(ctx, queue.New{Name: "billing_t2"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := people.CreateAPIKey(ctx, auth.NewAPIKey{Name: "tier1", QueueIDs: []int64{q.ID}})
	if err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status    int
		closes    bool
		body      string
		transport error
	}
	client := &http.Client{Transport: &http.Transport{}}
	do := func(method, path string, body []byte) answer {
		req, err := http.NewRequestWithContext(ctx, method, base+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key.Key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return answer{transport: err}
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return answer{status: resp.StatusCode, closes: resp.Close, body: string(raw)}
	}
	if got := do(http.MethodGet, "/readyz", nil); got.status != http.StatusOK {
		t.Fatalf("/readyz before the stop: %+v, want 200", got)
	}

	// A package in flight through the drain and the shutdown: its insert waits for a lock the
	// test holds.
	lock, err := db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback(ctx) }()
	if _, err := lock.Exec(ctx, `LOCK TABLE handoffs IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	pkg, err := json.Marshal(handofftest.Harbor(t))
	if err != nil {
		t.Fatal(err)
	}
	inFlight := make(chan answer, 1)
	go func() { inFlight <- do(http.MethodPost, "/api/v1/handoffs", pkg) }()
	for waiting := false; !waiting; time.Sleep(10 * time.Millisecond) {
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_locks WHERE NOT granted AND relation = 'handoffs'::regclass)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}

	stop()
	select {
	case d := <-drainAsked:
		if d != time.Minute {
			t.Errorf("drained for %v, want the configured minute", d)
		}
	case err := <-served:
		t.Fatalf("serve stopped without draining: %v", err)
	}
	if got := do(http.MethodGet, "/readyz", nil); got.status != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while draining: %+v, want 503", got)
	}
	for _, path := range []string{"/healthz", "/api/v1/handoffs?contact_id=cust_9912"} {
		if got := do(http.MethodGet, path, nil); got.status != http.StatusOK || !got.closes {
			t.Errorf("GET %s while draining: %+v, want 200 closing its connection", path, got)
		}
	}

	close(drained)
	for {
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			break // the listener is closed: shutdown waits for the request in flight
		}
		_ = conn.Close()
		time.Sleep(10 * time.Millisecond)
	}
	if err := lock.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := <-inFlight; got.status != http.StatusCreated {
		t.Errorf("the package in flight through the shutdown: %+v, want 201", got)
	}
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
}
