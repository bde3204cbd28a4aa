package webhook_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/webhook"
)

// A rotated secret signs beside the new one for the overlap, so that a bot holding either accepts
// the deliveries; once the overlap is over only the new one signs. A rotation without overlap
// (a leaked secret) stops the old one at once.
func TestRotatedSecretSignsBesideTheNewUntilTheOverlapEnds(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusOK))
	ctx := t.Context()
	changes := access.New(f.db, auth.NewService(f.db))
	old := f.key.WebhookSecret

	rotated, err := changes.RotateWebhookSecret(ctx, f.key.ID, 24*time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rotated.Secret == old || !strings.HasPrefix(rotated.Secret, "whsec_") || rotated.Key.Name != "bot" {
		t.Fatalf("rotation = %+v, want a new whsec_ secret for key bot", rotated)
	}
	// delivered sends one event and returns what the bot received.
	delivered := func(handoffID string) receipt {
		t.Helper()
		f.enqueue(t, handoffID, "accepted")
		deliverDue(t, f.deliverer(t, webhook.Options{}))
		got := f.bot.receipts()
		last := got[len(got)-1]
		if row := f.only(t, handoffID); row.State != webhook.StateDelivered {
			t.Fatalf("%s: row = %+v, want delivered", handoffID, row)
		}
		return last
	}
	check := func(when string, r receipt, want map[string]bool) {
		t.Helper()
		h := r.header
		for secret, ok := range want {
			if got := verifiesStandard(secret, h, r.body, f.clock.Now()); got != ok {
				t.Errorf("%s: Webhook-Signature %q verifies with secret %s…: %v, want %v", when, h.Get("Webhook-Signature"), secret[:10], got, ok)
			}
			if got := verifies(secret, h.Get("X-Handoff-Timestamp"), r.body, h.Get("X-Handoff-Webhook-Signature")); got != ok {
				t.Errorf("%s: %q verifies with secret %s…: %v, want %v", when, h.Get("X-Handoff-Webhook-Signature"), secret[:10], got, ok)
			}
			legacy := strings.Split(h.Get("X-Handoff-Signature"), ", ")
			if got := slices.Contains(legacy, legacySignature(secret, r.body)); got != ok {
				t.Errorf("%s: X-Handoff-Signature %q carries secret %s…'s signature: %v, want %v", when, legacy, secret[:10], got, ok)
			}
		}
	}

	during := delivered("h-during")
	check("during the overlap", during, map[string]bool{rotated.Secret: true, old: true})
	if n := strings.Count(during.header.Get("X-Handoff-Webhook-Signature"), "v1="); n != 2 {
		t.Errorf("during the overlap: %d v1 entries, want 2 (new, then old)", n)
	}
	if n := len(strings.Fields(during.header.Get("Webhook-Signature"))); n != 2 {
		t.Errorf("during the overlap: Webhook-Signature has %d entries, want 2 (new, then old)", n)
	}

	f.clock.Advance(25 * time.Hour)
	check("after the overlap", delivered("h-after"), map[string]bool{rotated.Secret: true, old: false})

	again, err := changes.RotateWebhookSecret(ctx, f.key.ID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	check("after a rotation without overlap", delivered("h-leaked"), map[string]bool{again.Secret: true, rotated.Secret: false})

	// The log holds each rotation, naming the key and the window, and never a secret.
	rows, err := f.db.Query(ctx, `SELECT detail::text FROM events WHERE kind = 'webhook_secret_rotated' ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	var details []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		details = append(details, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(details) != 2 {
		t.Fatalf("rotation events = %v, want 2", details)
	}
	var first map[string]any
	if err := json.Unmarshal([]byte(details[0]), &first); err != nil {
		t.Fatal(err)
	}
	if first["key"] != "bot" || first["overlap"] != "24h0m0s" || first["previous_until"] == nil {
		t.Errorf("first rotation's detail = %v, want the key, the overlap and previous_until", first)
	}
	for _, d := range details {
		if strings.Contains(d, "whsec_") {
			t.Errorf("the log holds a secret: %s", d)
		}
	}

	if _, err := changes.RotateWebhookSecret(ctx, f.key.ID, -time.Hour, 0); desk.ErrorCode(err) != desk.Invalid {
		t.Errorf("negative overlap: %v, want invalid", err)
	}
	if _, err := changes.RotateWebhookSecret(ctx, f.key.ID, 31*24*time.Hour, 0); desk.ErrorCode(err) != desk.Invalid {
		t.Errorf("an overlap of 31 days: %v, want invalid", err)
	}
	if _, err := changes.RotateWebhookSecret(ctx, f.key.ID+1000, time.Hour, 0); desk.ErrorCode(err) != desk.NotFound {
		t.Errorf("an unknown key: %v, want not found", err)
	}
}
