package live

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/logtest"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// turn is one call of a subscriber's receive.
type turn struct {
	batches []Batch
	ending  Ending
}

// recorder is a receiver that records its turns and fails the test if two overlap.
type recorder struct {
	t       *testing.T
	turns   chan turn
	release chan struct{} // when set, the first turn waits for it: a receiver on a stalled network
	in      atomic.Int32
}

func newRecorder(t *testing.T) *recorder { return &recorder{t: t, turns: make(chan turn, 100)} }

func (r *recorder) receive(batches []Batch, ending Ending) {
	if r.in.Add(1) != 1 {
		r.t.Error("two turns of one subscriber at once")
	}
	defer r.in.Add(-1)
	if r.release != nil {
		<-r.release
		r.release = nil
	}
	r.turns <- turn{batches, ending}
}

func (r *recorder) next(what string) turn {
	r.t.Helper()
	select {
	case tn := <-r.turns:
		return tn
	case <-time.After(time.Minute):
		r.t.Fatalf("%s: no turn", what)
		return turn{}
	}
}

func (r *recorder) none(what string) {
	r.t.Helper()
	select {
	case tn := <-r.turns:
		r.t.Fatalf("%s: a turn with %d batches, ending %d", what, len(tn.batches), tn.ending)
	default:
	}
}

func runHub(t *testing.T, buffer int) (*Hub, func(queueID int64)) {
	t.Helper()
	db := pgtest.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	hub := NewHub(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
	hub.buffer = buffer
	done := make(chan struct{})
	go func() {
		hub.Run(ctx)
		close(done)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	for hub.Mark() == "" {
		time.Sleep(5 * time.Millisecond)
	}
	insert := func(queueID int64) {
		t.Helper()
		b := &pgx.Batch{}
		if err := events.Queue(b, events.Change{QueueID: queueID, Kind: events.Reserved, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := db.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		hub.Wake()
	}
	return hub, insert
}

func TestHubFansOutAndDropsSlowSubscribers(t *testing.T) {
	t.Parallel()
	hub, insert := runHub(t, 2)
	subscribe := func(watch func(events.Event) bool, r *recorder) {
		s, _ := hub.Subscribe(watch, r.receive, nil)
		s.Start()
	}
	queue1, queue2, slow := newRecorder(t), newRecorder(t), newRecorder(t)
	slow.release = make(chan struct{})
	subscribe(func(e events.Event) bool { return e.QueueID == 1 }, queue1)
	subscribe(func(e events.Event) bool { return e.QueueID == 2 }, queue2)
	subscribe(func(events.Event) bool { return true }, slow)

	for range hub.buffer + 2 {
		insert(1)
		tn := queue1.next("queue 1 subscriber")
		if len(tn.batches) != 1 || tn.batches[0].Events[0].QueueID != 1 || tn.ending != 0 {
			t.Fatalf("queue 1 subscriber got %+v", tn)
		}
	}
	queue2.none("queue 2 subscriber, for queue 1 events")

	// The slow one is still in its first turn: the hub dropped it rather than wait.
	if n := hub.Subscribers(); n != 2 {
		t.Fatalf("%d subscribers while one is stalled, want 2", n)
	}
	close(slow.release)
	received := 0
	for {
		tn := slow.next("slow subscriber")
		received += len(tn.batches)
		if tn.ending != 0 {
			if tn.ending != FellBehind || len(tn.batches) != 0 {
				t.Fatalf("slow subscriber's last turn: %+v, want no batches and FellBehind", tn)
			}
			break
		}
	}
	if received > hub.buffer {
		t.Fatalf("slow subscriber received %d batches before being dropped, want at most %d", received, hub.buffer)
	}
	insert(1)
	queue1.next("queue 1 subscriber after the drop")
	slow.none("slow subscriber after its last turn")
}

// More subscribers than publish hands the workers at once: each gets every batch once, in order.
func TestHubReachesEverySubscriberPastAChunk(t *testing.T) {
	t.Parallel()
	hub, insert := runHub(t, 16)
	recorders := make([]*recorder, 3*publishChunk+5)
	for i := range recorders {
		recorders[i] = newRecorder(t)
		s, _ := hub.Subscribe(func(e events.Event) bool { return e.QueueID == 1 }, recorders[i].receive, nil)
		s.Start()
	}
	insert(1)
	insert(1)
	for i, r := range recorders {
		var seqs []int64
		for len(seqs) < 2 {
			for _, b := range r.next(fmt.Sprintf("subscriber %d", i)).batches {
				for _, e := range b.Events {
					seqs = append(seqs, e.Seq)
				}
			}
		}
		if len(seqs) != 2 || seqs[0] >= seqs[1] {
			t.Fatalf("subscriber %d got events %v, want two in order", i, seqs)
		}
		r.none(fmt.Sprintf("subscriber %d after both events", i))
	}
}

func TestHubTurnsStartPokeAndStop(t *testing.T) {
	t.Parallel()
	hub, insert := runHub(t, subscriberBuffer)
	stop := make(chan struct{})
	probe, r := newRecorder(t), newRecorder(t)
	p, _ := hub.Subscribe(func(events.Event) bool { return true }, probe.receive, nil)
	p.Start()
	s, _ := hub.Subscribe(func(events.Event) bool { return true }, r.receive, stop)

	// Held until Start: what arrives meanwhile waits and comes in order.
	insert(1)
	probe.next("probe")
	insert(2)
	probe.next("probe")
	r.none("before Start")
	s.Start()
	var got []int64
	for len(got) < 2 {
		tn := r.next("after Start")
		for _, b := range tn.batches {
			for _, e := range b.Events {
				got = append(got, e.QueueID)
			}
		}
	}
	if got[0] != 1 || got[1] != 2 || len(got) != 2 {
		t.Fatalf("events after Start: queues %v, want [1 2]", got)
	}

	s.Poke()
	if tn := r.next("poke"); len(tn.batches) != 0 || tn.ending != 0 {
		t.Fatalf("poked turn %+v, want an empty one", tn)
	}

	close(stop)
	if tn := r.next("stop"); tn.ending != Stopped {
		t.Fatalf("turn after stop %+v, want the ending Stopped", tn)
	}
	late, _ := hub.Subscribe(func(events.Event) bool { return true }, r.receive, stop)
	late.Start()
	if tn := r.next("subscribed after stop"); tn.ending != Stopped {
		t.Fatalf("turn of a subscriber after stop %+v, want the ending Stopped", tn)
	}
	if n := hub.Subscribers(); n != 1 {
		t.Fatalf("%d subscribers after stop, want the probe alone", n)
	}
	insert(1)
	probe.next("probe after stop")
	r.none("after the last turn")
	hub.Unsubscribe(p)
	after := newRecorder(t)
	q, _ := hub.Subscribe(func(events.Event) bool { return true }, after.receive, nil)
	q.Start()
	insert(1)
	after.next("a subscriber after Unsubscribe")
	probe.none("after Unsubscribe")
}

// flaky answers with an error until it is told to let queries through: a database that is down
// when the hub starts.
type flaky struct {
	events.Querier
	up atomic.Bool
}

func (f *flaky) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if !f.up.Load() {
		return errRow{}
	}
	return f.Querier.QueryRow(ctx, sql, args...)
}

type errRow struct{}

func (errRow) Scan(...any) error { return errors.New("connection refused") }

func TestHubWaitsForTheDatabaseAtStart(t *testing.T) {
	t.Parallel()
	db := &flaky{Querier: pgtest.New(t)}
	hub := NewHub(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		hub.Run(ctx)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()
	r := newRecorder(t)
	s, _ := hub.Subscribe(func(events.Event) bool { return true }, r.receive, nil)
	s.Poke()
	s.Start()
	r.next("a turn while the database is down") // the workers run before the first mark
	if hub.Mark() != "" {
		t.Fatal("a mark without a database")
	}
	db.up.Store(true)
	for deadline := time.Now().Add(10 * time.Second); hub.Mark() == ""; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the hub never started once the database answered")
		}
	}
}

// An observer sees each batch before any subscriber's turn with it: what it does (forgetting a
// user's cached sessions) holds by the time a socket acts on the batch.
func TestObserversSeeABatchBeforeItsSubscribers(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	hub := NewHub(db, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var observed sync.Map // seq → true
	hub.Observe(func(b Batch) {
		for _, e := range b.Events {
			observed.Store(e.Seq, true)
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		hub.Run(ctx)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()
	for hub.Mark() == "" {
		time.Sleep(5 * time.Millisecond)
	}
	r := newRecorder(t)
	s, _ := hub.Subscribe(func(events.Event) bool { return true }, r.receive, nil)
	s.Start()
	for i := range 20 {
		b := &pgx.Batch{}
		if err := events.Queue(b, events.Change{QueueID: int64(i + 1), Kind: events.Reserved, At: time.Now()}); err != nil {
			t.Fatal(err)
		}
		if err := db.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		hub.Wake()
	}
	for seen := 0; seen < 20; {
		for _, b := range r.next("the subscriber").batches {
			for _, e := range b.Events {
				if _, ok := observed.Load(e.Seq); !ok {
					t.Fatalf("event %d reached the subscriber before the observer", e.Seq)
				}
				seen++
			}
		}
	}
}

// gone reads the mark from a database that answers, then reads events from one that went away.
type gone struct {
	events.Querier
	away events.Querier
}

func (g gone) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return g.away.Query(ctx, sql, args...)
}

// A database out of reach is an outage the hub rides out, not a bug: its failed reads are
// warnings, so that a restart of PostgreSQL does not page anyone with ERROR lines.
func TestHubWarnsWhileTheDatabaseIsOutOfReach(t *testing.T) {
	t.Parallel()
	away, err := pgxpool.New(context.Background(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer away.Close()
	logs, logger := logtest.New()
	hub := NewHub(gone{Querier: pgtest.New(t), away: away}, logger)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		hub.Run(ctx)
		close(done)
	}()
	defer func() {
		cancel()
		<-done
	}()
	rec := logs.Wait(t, "a failed read", func(r slog.Record) bool { return strings.HasPrefix(r.Message, "reading desk events") })
	if rec.Level != slog.LevelWarn {
		t.Fatalf("a read while the database is out of reach logged %s %q, want a warning", rec.Level, rec.Message)
	}
}
