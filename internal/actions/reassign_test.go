package actions

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
)

// A supervisor moves a package Alex holds to Blake: Blake holds it, accepted; the bot hears
// reassigned with Blake's name; the log says who moved it from whom; Alex may no longer act on it.
func TestReassignMovesTheHoldAndTellsTheBot(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	blake := d.agent(t, "blake", auth.RoleAgent, 3, "billing")
	sam := d.agent(t, "sam", auth.RoleSupervisor, 3)
	id := d.submit(t, "billing", nil)
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	name, err := d.actions.Reassign(ctx, sam, id, " Blake@Example.com ")
	if err != nil || name != "blake" {
		t.Fatalf("reassign = %q, %v; want blake", name, err)
	}
	if st, who := d.status(t, id); st != "accepted" || who == nil || *who != blake.ID {
		t.Fatalf("after the reassign: %s by %v, want accepted by blake (%d)", st, who, blake.ID)
	}
	// The package is warm and nobody is online: its warm phase ended as it came in.
	if got := d.webhookEvents(t, id); got != "queued,warm_timeout,accepted,reassigned" {
		t.Fatalf("webhooks %q, want queued,warm_timeout,accepted,reassigned", got)
	}
	var assignee, detail string
	if err := d.db.QueryRow(ctx, `SELECT payload->>'assignee' FROM webhook_outbox WHERE handoff_id = $1 AND event = 'reassigned'`, id).
		Scan(&assignee); err != nil || assignee != "blake" {
		t.Fatalf("the reassigned webhook names %q (%v), want blake", assignee, err)
	}
	if err := d.db.QueryRow(ctx, `SELECT detail::text FROM events WHERE kind = 'reassigned' AND actor_user = $1`, sam.ID).
		Scan(&detail); err != nil || !strings.Contains(detail, `"from": "alex"`) || !strings.Contains(detail, `"to": "blake"`) {
		t.Fatalf("the log's detail %s (%v), want from alex to blake", detail, err)
	}
	// Alex's hold on this instance is gone: the fast path must not let Alex resolve Blake's package.
	wantCode(t, "alex resolving after the reassign", errOf(d.actions.Resolve(ctx, alex, id, "solved", "", handoff.HandBack{})), desk.Forbidden)
	if _, err := d.actions.Resolve(ctx, blake, id, "solved", "", handoff.HandBack{}); err != nil {
		t.Fatalf("blake resolving: %v", err)
	}
}

// Each refusal names its cause, with the status it maps to, and changes nothing.
func TestReassignRefusals(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing", "sales")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	full := d.agent(t, "full", auth.RoleAgent, 1, "billing")
	d.agent(t, "seller", auth.RoleAgent, 3, "sales")
	gone := d.agent(t, "gone", auth.RoleAgent, 3, "billing")
	if _, err := d.db.Exec(ctx, `UPDATE users SET disabled = true WHERE id = $1`, gone.ID); err != nil {
		t.Fatal(err)
	}
	sam := d.agent(t, "sam", auth.RoleSupervisor, 3)
	held := d.submit(t, "billing", nil)
	if err := d.actions.Accept(ctx, alex, held); err != nil {
		t.Fatal(err)
	}
	waiting := d.submit(t, "billing", nil)
	if err := d.actions.Accept(ctx, full, d.submit(t, "billing", nil)); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		by         auth.User
		id, to     string
		code, says string
	}{
		{alex, held, "alex@example.com", desk.Forbidden, "only a supervisor"},
		{sam, waiting, "alex@example.com", desk.Conflict, "only a package someone holds"},
		{sam, held, "alex@example.com", desk.Conflict, "alex already holds"},
		{sam, held, "nobody@example.com", desk.Invalid, "no desk user has the email nobody@example.com"},
		{sam, held, "not an email", desk.Invalid, "to:"},
		{sam, held, "gone@example.com", desk.Invalid, "gone's account is disabled"},
		{sam, held, "seller@example.com", desk.Invalid, "seller does not work the queue billing"},
		{sam, held, "full@example.com", desk.Conflict, "full already holds 1 of their 1 packages"},
		{sam, "ho_missing", "alex@example.com", desk.NotFound, "no handoff"},
	} {
		_, err := d.actions.Reassign(ctx, c.by, c.id, c.to)
		if desk.ErrorCode(err) != c.code || !strings.Contains(desk.ErrorMessage(err), c.says) {
			t.Errorf("%s reassigning %s to %q: %v; want %s saying %q", c.by.DisplayName, c.id, c.to, err, c.code, c.says)
		}
	}
	if st, who := d.status(t, held); st != "accepted" || who == nil || *who != alex.ID {
		t.Fatalf("after the refusals: %s by %v, want still accepted by alex", st, who)
	}
	// A supervisor takes a package over without working its queue, as their accept may.
	if name, err := d.actions.Reassign(ctx, sam, held, "sam@example.com"); err != nil || name != "sam" {
		t.Fatalf("sam taking over: %q, %v", name, err)
	}
}

// Two supervisors reassign two packages to Casey at once, who has room for one: Casey's row lock
// makes the second count the first, so exactly one wins and the other names Casey's capacity.
func TestReassignRacesKeepTheTargetsCapacity(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	casey := d.agent(t, "casey", auth.RoleAgent, 1, "billing")
	sups := []auth.User{d.agent(t, "sam", auth.RoleSupervisor, 3), d.agent(t, "sky", auth.RoleSupervisor, 3)}
	ids := []string{d.submit(t, "billing", nil), d.submit(t, "billing", nil)}
	for _, id := range ids {
		if err := d.actions.Accept(ctx, alex, id); err != nil {
			t.Fatal(err)
		}
	}
	// Hold Casey's row so that both reassignments reach their count and wait there.
	tx, err := d.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, casey.ID); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() { _, errs[i] = d.actions.Reassign(ctx, sups[i], ids[i], "casey@example.com") })
	}
	for deadline := time.Now().Add(10 * time.Second); !d.waitsOnALock(t); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no reassignment waits on Casey's row")
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("reassigns = %v, %v; want exactly one to succeed", errs[0], errs[1])
	}
	for _, err := range errs {
		if err != nil && (desk.ErrorCode(err) != desk.Conflict || !strings.Contains(desk.ErrorMessage(err), "casey already holds 1 of their 1")) {
			t.Fatalf("the loser: %v, want a conflict naming Casey's capacity", err)
		}
	}
	var holding int
	if err := d.db.QueryRow(ctx, `SELECT count(*) FROM handoffs WHERE assignee_id = $1 AND closed_at IS NULL`, casey.ID).Scan(&holding); err != nil || holding != 1 {
		t.Fatalf("casey holds %d (%v), want 1", holding, err)
	}
}

// The holder resolves while a supervisor reassigns: one of them goes first and the other is
// refused, never both applied.
func TestReassignAgainstTheHoldersResolve(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	d.agent(t, "blake", auth.RoleAgent, 3, "billing")
	sam := d.agent(t, "sam", auth.RoleSupervisor, 3)
	for range 5 {
		id := d.submit(t, "billing", nil)
		if err := d.actions.Accept(ctx, alex, id); err != nil {
			t.Fatal(err)
		}
		var reassignErr, resolveErr error
		var wg sync.WaitGroup
		wg.Go(func() { _, reassignErr = d.actions.Reassign(ctx, sam, id, "blake@example.com") })
		wg.Go(func() { _, resolveErr = d.actions.Resolve(ctx, alex, id, "solved", "", handoff.HandBack{}) })
		wg.Wait()
		if (reassignErr == nil) == (resolveErr == nil) {
			t.Fatalf("reassign %v, resolve %v: want exactly one to succeed", reassignErr, resolveErr)
		}
		kinds := strings.Join(d.kinds(t, id), ",")
		if strings.Contains(kinds, "reassigned") == strings.Contains(kinds, "resolved") {
			t.Fatalf("the log says %s: want one of reassigned and resolved", kinds)
		}
	}
}
