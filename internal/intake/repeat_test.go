package intake

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/handoff/handofftest"
)

// A package is a repeat contact when its contact had another package resolved or returned to the
// bot within the 7 days before it arrived: exactly 7 days before counts, a second more does not,
// and an expiry or a cancel is not a resolution.
func TestIntakeDecidesRepeatContacts(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	now := time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)
	d.intake = New(d.db, func() time.Time { return now }, nil, nil)
	ctx := context.Background()
	earlier := []struct {
		contact, status string
		closedBefore    time.Duration
	}{
		{"day7", "resolved", 7 * 24 * time.Hour},
		{"day8", "resolved", 7*24*time.Hour + time.Second},
		{"returned", "returned_to_bot", time.Hour},
		{"expired", "expired", time.Hour},
		{"canceled", "canceled", time.Hour},
	}
	for i, e := range earlier {
		closed := now.Add(-e.closedBefore)
		if _, err := d.db.Exec(ctx, `
			INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package,
				body_sha256, expires_at, created_at, enqueued_at, closed_at)
			VALUES ($1, $2, $3, $4, 2, $5, 'tier1', '{"trigger": "policy_boundary"}', '\x00', $6, $7, $7, $6)`,
			fmt.Sprintf("ho_earlier_%d", i), d.sender.APIKeyID, d.sender.QueueIDs[0], e.status, e.contact, closed,
			closed.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]bool{"day7": true, "day8": false, "returned": true, "expired": false, "canceled": false, "new": false}
	for contact := range want {
		p := handofftest.Harbor(t)
		p.HandoffID, p.Contact.ID, p.TargetProfile = "ho_now_"+contact, contact, "billing"
		if _, err := d.intake.Submit(ctx, d.sender, p); err != nil {
			t.Fatalf("submit for %s: %v", contact, err)
		}
	}
	rows, err := d.db.Query(ctx, `SELECT contact_id, repeat_contact FROM handoffs WHERE handoff_id LIKE 'ho_now_%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]bool{}
	for rows.Next() {
		var contact string
		var repeat bool
		if err := rows.Scan(&contact, &repeat); err != nil {
			t.Fatal(err)
		}
		got[contact] = repeat
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for contact, repeat := range want {
		if r, ok := got[contact]; !ok || r != repeat {
			t.Errorf("package of contact %s: repeat %v (stored: %v), want %v", contact, r, ok, repeat)
		}
	}
}
