package live

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
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
