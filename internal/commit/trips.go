package commit

import (
	"context"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// trip is the statements of one action that needs no answer from PostgreSQL before its end: it
// travels in one batch, which PostgreSQL runs as one implicit transaction.
type trip struct {
	// b holds the statements but is never sent itself: a pgx batch goes only once, and a trip may
	// go again.
	b *pgx.Batch
	// read consumes the results of b's statements, in order, from the batch b was sent in.
	read func(pgx.BatchResults) error
	err  error
	done chan struct{}
}

// Trips sends actions' trips in groups that share one batch and its commit (see convoy). A group
// holds the row locks its trips take until it commits, but a trip locks only its agent's own row
// and packages that agent holds, and the claim skips locked packages, so a group seldom waits on
// another, and briefly.
type Trips struct {
	db     *pgxpool.Pool
	groups *Convoy[*trip]
}

// NewTrips returns Trips that send over db.
func NewTrips(db *pgxpool.Pool) *Trips {
	ts := &Trips{db: db}
	ts.groups = NewConvoy(FirstOf[*trip](maxTripGroup), ts.write)
	return ts
}

const (
	maxTripGroup = 32
	tripTimeout  = 30 * time.Second
)

// Send runs the statements of b in one transaction, shared with whatever other trips are waiting,
// and has read consume their results. An error is always b's own: a group that fails is sent
// again in parts until the trip at fault travels alone.
//
// If ctx ends first send returns its error, but the trip may still commit with its group, as when
// any answer is lost on the way.
func (ts *Trips) Send(ctx context.Context, b *pgx.Batch, read func(pgx.BatchResults) error) error {
	t := &trip{b: b, read: read, done: make(chan struct{})}
	// A trip that leads its group sends it on Join's goroutine: not this one, which must stop
	// waiting when ctx ends.
	go ts.groups.Join(t)
	select {
	case <-t.done:
		return t.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Waiting counts the trips waiting for the next group.
func (ts *Trips) Waiting() int { return ts.groups.Waiting() }

// write sends a group and answers its trips. When a statement fails, the transaction is rolled
// back for every trip of the group: the trip whose statement failed goes again alone, to learn
// whether the failure is its own (a package not as expected, a second reservation) or came from
// the company it kept (a deadlock with another instance's group), and the others go again
// together. A failure no trip can be blamed for (a lost connection) sends each alone.
func (ts *Trips) write(group []*trip) {
	// No request's goroutine runs the write (see Send), so no handler would recover a panic: the
	// group's trips are answered with it instead. It comes before any of them is answered, since
	// a write again in parts recovers its own.
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("sending a group of trips panicked: %v\n%s", r, debug.Stack())
			for _, t := range group {
				t.err = err
				close(t.done)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), tripTimeout)
	defer cancel()
	failed, err := ts.writeGroup(ctx, group)
	if err != nil && len(group) > 1 {
		if failed < 0 {
			for _, t := range group {
				ts.write([]*trip{t})
			}
			return
		}
		ts.write(group[failed : failed+1])
		if rest := append(group[:failed:failed], group[failed+1:]...); len(rest) > 0 {
			ts.write(rest)
		}
		return
	}
	for _, t := range group {
		t.err = err
		close(t.done)
	}
}

// writeGroup sends the group's statements in one batch and reports, when it fails, which trip's
// results could not be read (-1 for none).
func (ts *Trips) writeGroup(ctx context.Context, group []*trip) (failed int, err error) {
	b := &pgx.Batch{}
	for _, t := range group {
		for _, q := range t.b.QueuedQueries {
			b.Queue(q.SQL, q.Arguments...)
		}
	}
	br := ts.db.SendBatch(ctx, b)
	failed = -1
	for i, t := range group {
		if err = t.read(br); err != nil {
			failed = i
			break
		}
	}
	if closeErr := br.Close(); err == nil {
		err = closeErr
	}
	return failed, err
}

// ExecAll reads the results of a trip whose statements return nothing the caller needs.
func ExecAll(b *pgx.Batch) func(pgx.BatchResults) error {
	n := b.Len()
	return func(br pgx.BatchResults) error {
		for range n {
			if _, err := br.Exec(); err != nil {
				return err
			}
		}
		return nil
	}
}
