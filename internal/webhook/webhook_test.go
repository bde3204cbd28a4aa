package webhook_test

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/webhook"
)

func TestQueueRejectsBadEvents(t *testing.T) {
	t.Parallel()
	f := setup(t, always(200))
	for name, e := range map[string]webhook.Event{
		"no event":   newEvent(f.key.ID, "h1", ""),
		"no handoff": newEvent(f.key.ID, "", "accepted"),
		"no time":    {HandoffID: "h1", APIKeyID: f.key.ID, Event: "accepted"},
	} {
		if err := webhook.Queue(&pgx.Batch{}, e); err == nil {
			t.Errorf("%s: Queue accepted %+v", name, e)
		}
	}
}

func TestQueueJoinsTheCallersTransaction(t *testing.T) {
	t.Parallel()
	f := setup(t, always(200))
	ctx := t.Context()

	tx, err := f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, tx, newEvent(f.key.ID, "h-rolled-back", "accepted"))
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err = f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	enqueue(t, tx, newEvent(f.key.ID, "h-committed", "accepted"))
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	rows, err := webhook.Deliveries(ctx, f.db, webhook.DeliveryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].HandoffID != "h-committed" {
		t.Fatalf("outbox = %+v, want only h-committed", rows)
	}
	if n := deliverDue(t, f.deliverer(t, webhook.Options{})); n != 1 {
		t.Errorf("delivered %d rows, want 1", n)
	}
}
