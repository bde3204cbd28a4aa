package webhook_test

import (
	"testing"

	"github.com/handoffdesk/desk/internal/webhook"
)

func TestSignVerify(t *testing.T) {
	t.Parallel()
	body := []byte("The quick brown fox jumps over the lazy dog")
	// The widely published example value of HMAC-SHA256("key", body), computed independently.
	const want = "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
	if got := webhook.Sign("key", body); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	if !webhook.Verify("key", want, body) {
		t.Error("Verify rejects its own signature")
	}
	for name, tc := range map[string]struct{ secret, header, body string }{
		"wrong secret":  {"other", want, string(body)},
		"tampered body": {"key", want, string(body) + "."},
		"no prefix":     {"key", want[len("sha256="):], string(body)},
		"not hex":       {"key", "sha256=zz", string(body)},
		"truncated":     {"key", want[:len(want)-2], string(body)},
		"empty":         {"key", "", string(body)},
	} {
		if webhook.Verify(tc.secret, tc.header, []byte(tc.body)) {
			t.Errorf("%s: Verify accepted", name)
		}
	}
}

func TestEnqueueRejectsBadEvents(t *testing.T) {
	t.Parallel()
	f := setup(t, always(200))
	for name, e := range map[string]webhook.Event{
		"unknown event": newEvent(f.key.ID, "h1", "exploded"),
		"no handoff":    newEvent(f.key.ID, "", webhook.EventAccepted),
		"no time":       {HandoffID: "h1", APIKeyID: f.key.ID, Event: webhook.EventAccepted},
	} {
		if err := webhook.Enqueue(t.Context(), f.db, e); err == nil {
			t.Errorf("%s: Enqueue accepted %+v", name, e)
		}
	}
}

func TestEnqueueJoinsTheCallersTransaction(t *testing.T) {
	t.Parallel()
	f := setup(t, always(200))
	ctx := t.Context()

	tx, err := f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.Enqueue(ctx, tx, newEvent(f.key.ID, "h-rolled-back", webhook.EventAccepted)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err = f.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := webhook.Enqueue(ctx, tx, newEvent(f.key.ID, "h-committed", webhook.EventAccepted)); err != nil {
		t.Fatal(err)
	}
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
