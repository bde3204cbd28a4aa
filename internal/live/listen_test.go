package live

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/logtest"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

func TestSharedMemoComputesOncePerKeyAndNests(t *testing.T) {
	s := NewShared()
	calls := 0
	outer := s.Memo("frame", func() any {
		return s.Memo("items", func() any { calls++; return 1 }).(int) + 1
	})
	again := s.Memo("items", func() any { calls++; return 99 })
	if outer != 2 || again != 1 || calls != 1 {
		t.Fatalf("outer %v, items %v, %d computations; want 2, 1 and one", outer, again, calls)
	}
}

func TestListenAcceptsPoolSettingsInTheURL(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t) + "&pool_max_conns=4"
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	// listenOnce returns only on failure; a connection that LISTENs blocks until the deadline.
	if err := listenOnce(ctx, url, "self", func(string) {}); ctx.Err() == nil {
		t.Fatalf("listen with pool_max_conns in the URL failed: %v", err)
	}
}

// An instance's own notifications come back to its listener, which must not wake the hub for
// them: the notifier woke it already.
func TestListenIgnoresItsOwnEcho(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	db, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(ctx)
	wakes := make(chan string, 10)
	go func() { _ = listenOnce(ctx, url, "me", func(p string) { wakes <- p }) }()
	if p := <-wakes; p != "" {
		t.Fatalf("first wake %q, want the one on listening", p)
	}
	// One transaction: its notifications arrive together and in order, so "other" comes after
	// "me" was seen.
	if _, err := db.Exec(ctx, `SELECT pg_notify($1, 'me'), pg_notify($1, 'other')`, Channel); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-wakes:
		if p != "other" {
			t.Fatalf("woken for %q, want only the other instance's notification", p)
		}
	case <-ctx.Done():
		t.Fatal("the other instance's notification woke nobody")
	}
}

// A listener that lost its connection once reconnects after the first wait, however many
// connections it lost before: each of them had listened, so none is a failing streak that would
// call for a longer wait.
func TestListenReconnectsSoonAfterEachWorkingConnection(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	log, logger := logtest.New()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		Listen(ctx, url, NewHub(nil, logger), "self", logger)
	}()
	defer func() {
		cancel()
		<-stopped
	}()
	// Backends terminated before: one may linger in pg_stat_activity a while after.
	terminated := []int32{}
	for round := 1; round <= 3; round++ {
		// Terminate the listening connection once its LISTEN is answered (idle): terminated while
		// the LISTEN runs, it never listened, and its wait rightly grows.
		for {
			var now []int32
			err := admin.QueryRow(ctx, `SELECT coalesce(array_agg(pid) FILTER (WHERE pg_terminate_backend(pid)), '{}')
				FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
				AND query = 'LISTEN `+Channel+`' AND state = 'idle' AND pid <> ALL($1)`, terminated).Scan(&now)
			if err != nil {
				t.Fatal(err)
			}
			if len(now) > 0 {
				terminated = append(terminated, now...)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		lost := 0
		rec := log.Wait(t, "about the lost connection", func(r slog.Record) bool {
			if r.Message != "listen connection lost; reconnecting" {
				return false
			}
			lost++
			return lost == round
		})
		if in, _ := logtest.Attr(rec, "in"); in.Duration() != firstReconnectWait {
			t.Fatalf("connection %d lost: reconnecting in %v, want %v\n%s", round, in, firstReconnectWait, log)
		}
	}
}
