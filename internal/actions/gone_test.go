package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/queue"
)

// setQuiet saves the queue's customer_idle and customer_gone through the admin form's path.
func (d *testDesk) setQuiet(t *testing.T, name, idle, gone string) {
	t.Helper()
	ctx := context.Background()
	q, err := d.queues.ByName(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	values := queue.Values(q)
	values["customer_idle"], values["customer_gone"] = []string{idle}, []string{gone}
	if err := pgx.BeginFunc(ctx, d.db, func(tx pgx.Tx) error { _, _, err := queue.Save(ctx, tx, q.ID, values); return err }); err != nil {
		t.Fatal(err)
	}
}

func (d *testDesk) customerWrites(t *testing.T, id, messageID string) {
	t.Helper()
	if _, err := d.actions.PostMessage(context.Background(), d.sender.APIKeyID, d.sender.QueueIDs, id,
		conversation.Incoming{MessageID: messageID, Role: conversation.User, Text: "Are you there?"}); err != nil {
		t.Fatal(err)
	}
}

func (d *testDesk) sweep(t *testing.T) int {
	t.Helper()
	n, err := d.actions.Sweep(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// A customer who leaves the agent's reply unanswered for the queue's customer_gone is gone: the
// sweeper resolves the package as customer_unreachable, the bot gets the resolved webhook and the
// agent's capacity frees. The silence counts from the agent's reply, not from the customer's
// message: a customer waiting for the desk's answer is never gone, however long it takes.
func TestGoneCustomerIsResolved(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	d.setQuiet(t, "billing", "10m", "30m")
	alex := d.agent(t, "alex", auth.RoleAgent, 1, "billing")
	id := d.submit(t, "billing", nil)
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	// Nobody has answered the customer yet: they wait for the desk.
	d.clock.Advance(2 * time.Hour)
	if n := d.sweep(t); n != 0 {
		t.Fatalf("a package the agent never answered: swept %d", n)
	}
	d.customerWrites(t, id, "m1")
	d.clock.Advance(20 * time.Minute)
	if err := d.actions.Reply(ctx, alex, id, reply(t, "Let me check that for you.")); err != nil {
		t.Fatal(err)
	}
	repliedAt := d.clock.Now()
	// Another reply does not start the silence again: the customer has not answered the first.
	d.clock.Advance(10 * time.Minute)
	if err := d.actions.Reply(ctx, alex, id, reply(t, "Are you still there?")); err != nil {
		t.Fatal(err)
	}
	d.clock.Advance(20*time.Minute - time.Second)
	if n := d.sweep(t); n != 0 {
		t.Fatalf("a second before customer_gone: swept %d", n)
	}
	if s, _ := d.status(t, id); s != handoff.StatusAccepted {
		t.Fatalf("a second before customer_gone: %s", s)
	}
	d.clock.Advance(time.Second)
	if n := d.sweep(t); n != 1 {
		t.Fatalf("at customer_gone: swept %d, want 1", n)
	}
	var status, outcome, note string
	if err := d.db.QueryRow(ctx, `SELECT status, outcome, outcome_note FROM handoffs WHERE handoff_id = $1`, id).
		Scan(&status, &outcome, &note); err != nil {
		t.Fatal(err)
	}
	if status != "resolved" || outcome != "customer_unreachable" {
		t.Fatalf("gone: %s as %s, want resolved as customer_unreachable", status, outcome)
	}
	var raw []byte
	if err := d.db.QueryRow(ctx, `SELECT payload FROM webhook_outbox WHERE handoff_id = $1 AND event = 'resolved'`, id).Scan(&raw); err != nil {
		t.Fatalf("the resolved webhook: %v", err)
	}
	var hook struct {
		Event, Status, Outcome, Note, Assignee string
	}
	if err := json.Unmarshal(raw, &hook); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("since %s, longer than the queue's customer gone (30m)", repliedAt.UTC().Format(time.RFC3339))
	if hook.Status != "resolved" || hook.Outcome != "customer_unreachable" || hook.Assignee != "alex" || !strings.Contains(hook.Note, want) {
		t.Errorf("resolved webhook %s; want resolved as customer_unreachable, assignee alex, a note saying %q", raw, want)
	}
	if note != hook.Note {
		t.Errorf("the package's note %q, the webhook's %q", note, hook.Note)
	}
	// Alex's one slot is free again.
	next := d.submit(t, "billing", nil)
	if err := d.actions.Accept(ctx, alex, next); err != nil {
		t.Fatalf("accept after the gone customer's package closed: %v", err)
	}
	if n := d.sweep(t); n != 0 {
		t.Errorf("a later sweep: %d, want nothing more", n)
	}
}

// The customer answering stops the clock, and a package awaiting a supervisor's decision, or in a
// queue that never resolves gone customers, stays the agent's. The clock never starts before the
// package changed hands: a reassigned package's new agent gets the whole customer_gone.
func TestGoneWaitsForTheWholeSilence(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing", "support")
	ctx := context.Background()
	d.setQuiet(t, "billing", "10m", "30m")
	alex := d.agent(t, "alex", auth.RoleAgent, 5, "billing", "support")
	bea := d.agent(t, "bea", auth.RoleAgent, 5, "billing")
	sam := d.agent(t, "sam", auth.RoleSupervisor, 5, "billing")
	answered := d.submit(t, "billing", nil)
	approval := d.acceptedRefund(t, alex, "99.00", "USD")
	elsewhere := d.submit(t, "support", nil)
	moved := d.submit(t, "billing", nil)
	for _, id := range []string{answered, elsewhere, moved} {
		if err := d.actions.Accept(ctx, alex, id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{answered, approval, elsewhere, moved} {
		if err := d.actions.Reply(ctx, alex, id, reply(t, "Could you send the order number?")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.actions.RequestApproval(ctx, alex, approval, "over the threshold"); err != nil {
		t.Fatal(err)
	}
	d.clock.Advance(25 * time.Minute)
	d.customerWrites(t, answered, "m1")
	d.clock.Advance(3 * time.Hour)
	if _, err := d.actions.Reassign(ctx, sam, moved, bea.Email); err != nil {
		t.Fatal(err)
	}
	if n := d.sweep(t); n != 0 {
		t.Fatalf("swept %d; want none: one customer answered, one package awaits approval, one queue keeps them, one has just changed hands", n)
	}
	if err := d.actions.Reply(ctx, alex, answered, reply(t, "Thanks, it is on its way.")); err != nil {
		t.Fatal(err)
	}
	d.clock.Advance(30 * time.Minute)
	// The reassigned package's silence counts from the reassignment, 30 minutes ago: gone now, with
	// the answered one.
	if n := d.sweep(t); n != 2 {
		t.Fatalf("30 minutes after the last unanswered reply: swept %d, want the answered and the reassigned packages", n)
	}
	for id, want := range map[string]handoff.Status{answered: handoff.StatusResolved, moved: handoff.StatusResolved,
		approval: handoff.StatusAwaitingApproval, elsewhere: handoff.StatusAccepted} {
		if s, _ := d.status(t, id); s != want {
			t.Errorf("%s: %s, want %s", id, s, want)
		}
	}
}

// Instances sweep at once: each gone package is resolved exactly once, with one event and one
// webhook, whichever instance took it.
func TestTwoSweepersResolveEachGoneCustomerOnce(t *testing.T) {
	t.Parallel()
	const packages = 30
	d := newDesk(t, "billing")
	ctx := context.Background()
	d.setQuiet(t, "billing", "1m", "5m")
	alex := d.agent(t, "alex", auth.RoleAgent, packages, "billing")
	for range packages {
		id := d.submit(t, "billing", nil)
		if err := d.actions.Accept(ctx, alex, id); err != nil {
			t.Fatal(err)
		}
		if err := d.actions.Reply(ctx, alex, id, reply(t, "Hello, I am on it.")); err != nil {
			t.Fatal(err)
		}
	}
	d.clock.Advance(5 * time.Minute)
	other := New(d.db, d.clock.Now, nil, nil, nil, "")
	counts := make([]int, 2)
	var wg sync.WaitGroup
	for i, a := range []*Service{d.actions, other} {
		wg.Go(func() {
			n, err := a.Sweep(ctx)
			if err != nil {
				t.Error(err)
			}
			counts[i] = n
		})
	}
	wg.Wait()
	if counts[0]+counts[1] != packages {
		t.Fatalf("two sweepers resolved %v, want %d in all", counts, packages)
	}
	var resolved, events, hooks int
	if err := d.db.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM handoffs WHERE status = 'resolved' AND outcome = 'customer_unreachable'),
			(SELECT count(*) FROM events WHERE kind = 'resolved'),
			(SELECT count(*) FROM webhook_outbox WHERE event = 'resolved')`).Scan(&resolved, &events, &hooks); err != nil {
		t.Fatal(err)
	}
	if resolved != packages || events != packages || hooks != packages {
		t.Errorf("%d resolved, %d events, %d webhooks; want %d of each", resolved, events, hooks, packages)
	}
}

// What makes the once-only hold without luck in timing: a sweeper that read a package as gone
// before another instance resolved it finds it resolved under the lock and leaves it; a package
// another transaction holds (an agent acting on it, or the other sweeper) is skipped, not waited
// for, and taken at a later sweep.
func TestGoneSweepRechecksUnderTheLockAndSkipsHeldRows(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	d.setQuiet(t, "billing", "1m", "5m")
	alex := d.agent(t, "alex", auth.RoleAgent, 5, "billing")
	var ids []string
	for range 2 {
		id := d.submit(t, "billing", nil)
		if err := d.actions.Accept(ctx, alex, id); err != nil {
			t.Fatal(err)
		}
		if err := d.actions.Reply(ctx, alex, id, reply(t, "Hello, I am on it.")); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	d.clock.Advance(5 * time.Minute)
	var rowIDs []int64
	if err := d.db.QueryRow(ctx, `SELECT array_agg(id ORDER BY id) FROM handoffs`).Scan(&rowIDs); err != nil {
		t.Fatal(err)
	}

	// Another transaction holds the first package's row.
	tx, err := d.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM handoffs WHERE id = $1 FOR UPDATE`, rowIDs[0]); err != nil {
		t.Fatal(err)
	}
	waitless, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if n, err := d.actions.Sweep(waitless); err != nil || n != 1 {
		t.Fatalf("sweep beside a held row: %d, %v; want the other package resolved without waiting", n, err)
	}
	if s, _ := d.status(t, ids[0]); s != handoff.StatusAccepted {
		t.Fatalf("the held package: %s, want it left for a later sweep", s)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// A sweeper that read both as gone before the other resolved them: the second package is
	// resolved already, and only the first is resolved now.
	if n, err := d.actions.resolveGoneBatch(ctx, rowIDs); err != nil || n != 1 {
		t.Fatalf("a batch of one resolved and one gone package: %d, %v; want 1", n, err)
	}
	if n, err := d.actions.resolveGoneBatch(ctx, rowIDs); err != nil || n != 0 {
		t.Fatalf("the same batch again: %d, %v; want 0", n, err)
	}
	var events int
	if err := d.db.QueryRow(ctx, `SELECT count(*) FROM events WHERE kind = 'resolved'`).Scan(&events); err != nil || events != 2 {
		t.Fatalf("%d resolved events, %v; want one per package", events, err)
	}
}
