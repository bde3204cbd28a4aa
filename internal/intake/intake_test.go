package intake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/handoff/handofftest"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"

	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/queue"
)

// testDesk is a database with queues and a bot key, and intake over it, for one test.
type testDesk struct {
	db       *pgxpool.Pool
	queues   *queue.Service
	intake   *Intake
	sender   Sender
	packages handofftest.Numbered
}

func newDesk(t testing.TB, queues ...string) *testDesk {
	t.Helper()
	db := pgtest.New(t)
	d := &testDesk{db: db, queues: queue.NewService(db), intake: New(db, time.Now, nil, nil)}
	var ids []int64
	for _, name := range queues {
		q, err := d.queues.Create(context.Background(), queue.New{Name: name})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, q.ID)
	}
	key, err := auth.NewService(db).CreateAPIKey(context.Background(), auth.NewAPIKey{Name: "bot", QueueIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	d.sender = Sender{APIKeyID: key.ID, QueueIDs: ids}
	return d
}

// batchOf prepares packages for Intake.write as Submit would.
func (d *testDesk) batchOf(t testing.TB, packages ...handoff.Package) []*submission {
	t.Helper()
	var batch []*submission
	for _, p := range packages {
		s, err := newSubmission(d.sender, p)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, s)
	}
	return batch
}

func (d *testDesk) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := d.db.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// One batch holds packages with every kind of answer: each gets its own, and only the admitted
// ones are written.
func TestBatchAnswersEachPackage(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	if _, err := d.queues.Create(context.Background(), queue.New{Name: "closed"}); err != nil {
		t.Fatal(err)
	}
	waiting := d.packages.Next(t, "billing")
	if _, err := d.intake.Submit(context.Background(), d.sender, waiting); err != nil {
		t.Fatal(err)
	}
	first, second := d.packages.Next(t, "billing"), d.packages.Next(t, "billing")
	unknown, forbidden := d.packages.Next(t, "nowhere"), d.packages.Next(t, "closed")
	sameContact := d.packages.Next(t, "billing")
	sameContact.Contact.ID = waiting.Contact.ID
	changed := waiting
	changed.ProblemStatement += " (edited)"
	batch := d.batchOf(t, first, unknown, waiting, forbidden, sameContact, changed, second)
	d.intake.write(batch)

	want := []struct {
		status   handoff.Status
		position int
		replayed bool
		invalid  bool
		code     string
		reason   string
	}{
		{status: handoff.StatusQueued, position: 1},
		{invalid: true},
		{status: handoff.StatusQueued, position: 0, replayed: true},
		{code: desk.Forbidden},
		{code: desk.Conflict, reason: handoff.ReasonOpenHandoff},
		{code: desk.Conflict},
		{status: handoff.StatusQueued, position: 2},
	}
	for i, s := range batch {
		w := want[i]
		<-s.done
		var invalid *handoff.ValidationError
		if w.invalid != errors.As(s.err, &invalid) {
			t.Errorf("package %d: err = %v, want a validation error: %v", i, s.err, w.invalid)
		}
		if w.invalid {
			continue
		}
		if w.code != "" {
			var deskErr *desk.Error
			if desk.ErrorCode(s.err) != w.code || (w.reason != "" && (!errors.As(s.err, &deskErr) || deskErr.Reason != w.reason)) {
				t.Errorf("package %d: err = %v, want %s %s", i, s.err, w.code, w.reason)
			}
			continue
		}
		if s.err != nil || s.receipt.Status != w.status || s.receipt.Position != w.position || s.receipt.Replayed != w.replayed {
			t.Errorf("package %d: receipt %+v, err %v; want %s at %d, replayed %v", i, s.receipt, s.err, w.status, w.position, w.replayed)
		}
	}
	if n := d.count(t, `SELECT count(*) FROM handoffs`); n != 3 {
		t.Errorf("%d handoffs stored, want 3", n)
	}
	// The packages are warm and nobody is online: each one's warm phase ended as it came in.
	for _, of := range []string{"events WHERE kind", "webhook_outbox WHERE event"} {
		for _, kind := range []string{"queued", "warm_timeout"} {
			if n := d.count(t, `SELECT count(*) FROM `+of+` = $1`, kind); n != 3 {
				t.Errorf("%d %s rows in %s, want one per queued package: 3", n, kind, of)
			}
		}
	}
}

// A batch's insert writes every package's search row (migration 00050) as package_search_of
// gives it, one row per package.
func TestBatchWritesEachPackagesSearchRow(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	var ps []handoff.Package
	for i := range 3 {
		p := d.packages.Next(t, "billing")
		p.Contact.DisplayName = fmt.Sprintf("Customer %d", i)
		ps = append(ps, p)
	}
	batch := d.batchOf(t, ps...)
	d.intake.write(batch)
	for _, s := range batch {
		if s.err != nil {
			t.Fatal(s.err)
		}
	}
	if n := d.count(t, `SELECT count(*) FROM package_search`); n != len(ps) {
		t.Errorf("%d search rows, want %d", n, len(ps))
	}
	if n := d.count(t, `
		SELECT count(*) FROM handoffs h JOIN package_search ps ON ps.handoff_id = h.id, package_search_of(h) want
		WHERE (ps.words, ps.contact_words, ps.ids, ps.contact) = (want.words, want.contact_words, want.ids, want.contact)`); n != len(ps) {
		t.Errorf("%d search rows as package_search_of gives them, want %d", n, len(ps))
	}
}

// An id that another transaction takes between the batch's read and its insert fails the whole
// batch; written again one by one, only that package is refused.
func TestBatchRetriesOneByOneWhenAnIdIsTakenMeanwhile(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	taken, other := d.packages.Next(t, "billing"), d.packages.Next(t, "billing")
	batch := d.takeMeanwhile(t, d.sender.APIKeyID, taken, other)

	if desk.ErrorCode(batch[0].err) != desk.Conflict {
		t.Errorf("taken id: err = %v, want a conflict", batch[0].err)
	}
	if batch[1].err != nil || batch[1].receipt.Status != handoff.StatusQueued {
		t.Errorf("other package: receipt %+v, err %v; want queued", batch[1].receipt, batch[1].err)
	}
	if n := d.count(t, `SELECT count(*) FROM handoffs WHERE handoff_id = $1`, other.HandoffID); n != 1 {
		t.Errorf("other package stored %d times, want once", n)
	}
}

// An id another key takes meanwhile is answered as one it had taken before: a 422 on handoff_id
// that says nothing of the other key's package.
func TestIdTakenMeanwhileByAnotherKey(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	other, err := d.queues.Create(context.Background(), queue.New{Name: "secret_q"})
	if err != nil {
		t.Fatal(err)
	}
	rivalKey, err := auth.NewService(d.db).CreateAPIKey(context.Background(), auth.NewAPIKey{Name: "rival", QueueIDs: []int64{other.ID}})
	if err != nil {
		t.Fatal(err)
	}
	taken := d.packages.Next(t, "billing")
	batch := d.takeMeanwhile(t, rivalKey.ID, taken)

	var invalid *handoff.ValidationError
	if !errors.As(batch[0].err, &invalid) || len(invalid.Fields) != 1 || invalid.Fields[0].Field != "handoff_id" || invalid.Fields[0].Rule != "taken" {
		t.Fatalf("id taken by another key: err = %v, want a 422 on handoff_id, rule taken", batch[0].err)
	}
	if strings.Contains(invalid.Error(), "secret_q") || strings.Contains(invalid.Error(), "someone-else") {
		t.Errorf("the answer tells of the other key's package: %v", invalid)
	}
}

// takeMeanwhile writes batch while another transaction, for key, inserts the first package's id
// for another contact and commits once the batch waits on it. It returns the answered batch.
func (d *testDesk) takeMeanwhile(t *testing.T, key int64, packages ...handoff.Package) []*submission {
	t.Helper()
	ctx := context.Background()
	tx, err := d.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `
		INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package, body_sha256, expires_at)
		VALUES ($1, $2, (SELECT queue_id FROM api_key_queues WHERE api_key_id = $2 LIMIT 1), 'queued', 2, 'someone-else', 'rival', '{}', '\x00',
			now() + interval '1 hour')`,
		packages[0].HandoffID, key); err != nil {
		t.Fatal(err)
	}
	batch := d.batchOf(t, packages...)
	written := make(chan struct{})
	go func() {
		d.intake.write(batch)
		close(written)
	}()
	// The batch's insert now waits on the rival's uncommitted id.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if d.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the batch never waited on the rival's id")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	<-written
	return batch
}

// Packages submitted at once travel in batches and still get every place in the queue once.
func TestConcurrentSubmissionsGetEveryPositionOnce(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	const n = 60
	positions := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		p := d.packages.Next(t, "billing")
		wg.Go(func() {
			r, err := d.intake.Submit(context.Background(), d.sender, p)
			if err != nil {
				t.Error(err)
			}
			positions[i] = r.Position
		})
	}
	wg.Wait()
	slices.Sort(positions)
	for i, p := range positions {
		if p != i {
			t.Fatalf("sorted positions = %v, want 0..%d once each", positions, n-1)
		}
	}
	if got := d.count(t, `SELECT count(*) FROM events WHERE kind = 'queued'`); got != n {
		t.Errorf("%d audit rows, want %d", got, n)
	}
}
