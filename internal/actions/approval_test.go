package actions

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/approvals"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
)

// withRefund gives the package a refund.
func withRefund(amount, currency string) func(*handoff.Package) {
	return func(p *handoff.Package) { p.Refund = &handoff.Refund{Amount: amount, Currency: currency} }
}

// acceptedRefund is a package with a refund that the agent accepted.
func (d *testDesk) acceptedRefund(t *testing.T, agent auth.User, amount, currency string) string {
	t.Helper()
	id := d.submit(t, "billing", withRefund(amount, currency))
	if err := d.actions.Accept(context.Background(), agent, id); err != nil {
		t.Fatal(err)
	}
	return id
}

func (d *testDesk) kinds(t *testing.T, id string) []string {
	t.Helper()
	rows, err := d.db.Query(context.Background(), `
		SELECT e.kind FROM events e JOIN handoffs h ON h.id = e.handoff_id WHERE h.handoff_id = $1 ORDER BY e.seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	return out
}

func (d *testDesk) webhookEvents(t *testing.T, id string) string {
	t.Helper()
	var events string
	if err := d.db.QueryRow(context.Background(), `
		SELECT coalesce(string_agg(event, ',' ORDER BY id), '') FROM webhook_outbox WHERE handoff_id = $1`, id).Scan(&events); err != nil {
		t.Fatal(err)
	}
	return events
}

// The whole flow in the domain: a refund above the threshold is refused until a supervisor other
// than the requester grants it, and the grant covers that amount only.
func TestRefundApprovalFlow(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	sam := d.agent(t, "sam", auth.RoleSupervisor, 3)
	id := d.acceptedRefund(t, alex, "120.00", "USD")

	_, err := d.actions.Resolve(ctx, alex, id, "refunded", "", handoff.HandBack{})
	wantCode(t, "resolve as refunded without approval", err, desk.Conflict)
	if !strings.Contains(desk.ErrorMessage(err), "approval") || !strings.Contains(desk.ErrorMessage(err), "120.00 USD") {
		t.Errorf("refusal %q does not name the missing approval of 120.00 USD", desk.ErrorMessage(err))
	}
	_, err = d.actions.RequestApproval(ctx, alex, id, "  ")
	wantCode(t, "request without a note", err, desk.Invalid)
	_, err = d.actions.RequestApproval(ctx, sam, id, "not mine")
	wantCode(t, "request by a supervisor who does not hold the package", err, desk.Forbidden)

	approvalID, err := d.actions.RequestApproval(ctx, alex, id, "duplicate charge, customer of 8 years")
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := d.status(t, id); s != handoff.StatusAwaitingApproval {
		t.Fatalf("status after the request %s, want awaiting_approval", s)
	}
	_, err = d.actions.RequestApproval(ctx, alex, id, "again")
	wantCode(t, "a second request while one is pending", err, desk.Conflict)
	_, err = d.actions.Resolve(ctx, alex, id, "solved", "", handoff.HandBack{})
	wantCode(t, "resolve while awaiting approval", err, desk.Conflict)

	_, err = d.actions.Decide(ctx, alex, approvalID, true, "self")
	wantCode(t, "an agent grants", err, desk.Forbidden)
	_, err = d.actions.Decide(ctx, sam, approvalID, true, "")
	wantCode(t, "a grant without a note", err, desk.Invalid)
	got, err := d.actions.Decide(ctx, sam, approvalID, true, "ok, goodwill")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != approvalID || got.Refund.Amount != "120.00" || got.Refund.Currency != "USD" {
		t.Errorf("decided %+v, want approval %d for 120.00 USD", got, approvalID)
	}
	if s, assignee := d.status(t, id); s != handoff.StatusAccepted || assignee == nil || *assignee != alex.ID {
		t.Fatalf("after the grant: %s held by %v, want accepted by alex", s, assignee)
	}
	_, err = d.actions.Decide(ctx, sam, approvalID, false, "changed my mind")
	wantCode(t, "deciding a granted request again", err, desk.Conflict)

	_, err = d.actions.ResolveRefunded(ctx, alex, id, "130.00", "", handoff.HandBack{})
	wantCode(t, "resolve for another amount than granted", err, desk.Conflict)
	if msg := desk.ErrorMessage(err); !strings.Contains(msg, "120.00 USD") || !strings.Contains(msg, "130.00 USD") {
		t.Errorf("refusal %q does not name the granted and the asked amount", msg)
	}
	_, err = d.actions.ResolveRefunded(ctx, alex, id, "12e1", "", handoff.HandBack{})
	wantCode(t, "resolve for a malformed amount", err, desk.Invalid)
	if _, err := d.actions.ResolveRefunded(ctx, alex, id, "120.0", "refunded", handoff.HandBack{}); err != nil {
		t.Fatalf("resolve for the granted amount, written 120.0: %v", err)
	}
	// The package is warm and nobody is online: its warm phase ended as it came in.
	want := "queued,warm_timeout,accepted,approval_requested,approval_granted,resolved"
	if got := strings.Join(d.kinds(t, id), ","); got != want {
		t.Errorf("events %s, want %s", got, want)
	}
	if got := d.webhookEvents(t, id); !strings.Contains(got, "approval_requested") || !strings.Contains(got, "approval_granted") {
		t.Errorf("webhooks %s, want approval_requested and approval_granted", got)
	}
}

// Four eyes by any path: an agent who is also a supervisor cannot approve their own request, and a
// denial gives the package back without a grant.
func TestSelfApprovalIsRefused(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	lead := d.agent(t, "lead", auth.RoleSupervisor, 3, "billing")
	admin := d.agent(t, "ada", auth.RoleAdmin, 3)
	id := d.acceptedRefund(t, lead, "80.00", "USD")
	approvalID, err := d.actions.RequestApproval(ctx, lead, id, "please")
	if err != nil {
		t.Fatal(err)
	}
	for _, grant := range []bool{true, false} {
		_, err := d.actions.Decide(ctx, lead, approvalID, grant, "mine")
		wantCode(t, "the requester, a supervisor, decides", err, desk.Forbidden)
	}
	if _, err := d.actions.Decide(ctx, admin, approvalID, false, "not policy"); err != nil {
		t.Fatal(err)
	}
	_, err = d.actions.Resolve(ctx, lead, id, "refunded", "", handoff.HandBack{})
	wantCode(t, "resolve as refunded after a denial", err, desk.Conflict)
	if _, err := d.actions.Resolve(ctx, lead, id, "solved", "explained the policy", handoff.HandBack{}); err != nil {
		t.Fatalf("resolve otherwise after a denial: %v", err)
	}
	// The database holds four eyes too, should a path ever skip the check.
	_, err = d.db.Exec(ctx, `UPDATE approvals SET decided_by = requested_by WHERE id = $1`, approvalID)
	if err == nil {
		t.Error("the database let the requester be the decider")
	}
}

func TestApprovalIsNeededAboveTheThresholdOrInAnotherCurrency(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 5, "billing")
	for _, tc := range []struct {
		amount, currency string
		needed           bool
	}{
		{"50.00", "USD", false}, // the threshold itself is not above it
		{"50.0001", "USD", true},
		{"49.99", "USD", false},
		{"10.00", "EUR", true},
	} {
		id := d.acceptedRefund(t, alex, tc.amount, tc.currency)
		_, err := d.actions.RequestApproval(ctx, alex, id, "check")
		if tc.needed && err != nil {
			t.Errorf("%s %s: request refused: %v", tc.amount, tc.currency, err)
		}
		if !tc.needed {
			wantCode(t, "request for "+tc.amount+" "+tc.currency, err, desk.Conflict)
			if _, err := d.actions.Resolve(ctx, alex, id, "refunded", "", handoff.HandBack{}); err != nil {
				t.Errorf("%s %s: resolve as refunded: %v", tc.amount, tc.currency, err)
			}
		}
	}
	id := d.submit(t, "billing", nil)
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	_, err := d.actions.RequestApproval(ctx, alex, id, "no refund here")
	wantCode(t, "request for a package without a refund", err, desk.Conflict)
	_, err = d.actions.ResolveRefunded(ctx, alex, id, "75.00", "stated at the desk", handoff.HandBack{})
	wantCode(t, "resolve refunding 75.00 the package did not ask for", err, desk.Conflict)
}

// Two supervisors deciding at once: exactly one decision counts, the other is a Conflict.
func TestRacingDecisionsOneWins(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	sups := []auth.User{d.agent(t, "sam", auth.RoleSupervisor, 3), d.agent(t, "sue", auth.RoleSupervisor, 3)}
	for round := range 5 {
		id := d.acceptedRefund(t, alex, "300.00", "USD")
		approvalID, err := d.actions.RequestApproval(ctx, alex, id, "big one")
		if err != nil {
			t.Fatal(err)
		}
		errs := make([]error, len(sups))
		var wg sync.WaitGroup
		for i, s := range sups {
			wg.Go(func() { _, errs[i] = d.actions.Decide(ctx, s, approvalID, i == 0, "decided") })
		}
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case desk.ErrorCode(err) == desk.Conflict:
			default:
				t.Fatalf("round %d: %v, want success or a Conflict", round, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d decisions counted (%v), want exactly 1", round, won, errs)
		}
		if _, err := d.actions.Resolve(ctx, alex, id, "solved", "", handoff.HandBack{}); err != nil {
			t.Fatal(err)
		}
	}
}

// A request nobody decides within the queue's approval timeout expires: the package is the
// agent's again and the bot is told. Two sweepers at once expire it once.
func TestApprovalExpiryReturnsThePackage(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	sam := d.agent(t, "sam", auth.RoleSupervisor, 3)
	id := d.acceptedRefund(t, alex, "99.00", "USD")
	approvalID, err := d.actions.RequestApproval(ctx, alex, id, "waiting")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := d.actions.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("sweep before the timeout: %d, %v", n, err)
	}
	d.clock.Advance(4*time.Hour + time.Second)
	_, err = d.actions.Decide(ctx, sam, approvalID, true, "late")
	wantCode(t, "a grant after the timeout", err, desk.Conflict)

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
	if counts[0]+counts[1] != 1 {
		t.Fatalf("two sweepers expired %v, want 1 in all", counts)
	}
	if s, assignee := d.status(t, id); s != handoff.StatusAccepted || assignee == nil || *assignee != alex.ID {
		t.Fatalf("after expiry: %s held by %v, want accepted by alex", s, assignee)
	}
	a, err := approvals.Get(ctx, d.db, approvalID)
	if err != nil || a.State != approvals.Expired {
		t.Fatalf("approval after expiry: %+v, %v", a, err)
	}
	if got := d.webhookEvents(t, id); !strings.Contains(got, "approval_expired") {
		t.Errorf("webhooks %s, want approval_expired", got)
	}
	// The agent may ask again.
	if _, err := d.actions.RequestApproval(ctx, alex, id, "again"); err != nil {
		t.Fatal(err)
	}
}

func TestWithdrawIsTheRequesters(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	sam := d.agent(t, "sam", auth.RoleSupervisor, 3, "billing")
	id := d.acceptedRefund(t, alex, "99.00", "USD")
	if _, err := d.actions.RequestApproval(ctx, alex, id, "waiting"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a supervisor withdraws the agent's request", d.actions.WithdrawApproval(ctx, sam, id), desk.Forbidden)
	if err := d.actions.WithdrawApproval(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	if s, _ := d.status(t, id); s != handoff.StatusAccepted {
		t.Fatalf("after withdrawal: %s", s)
	}
	wantCode(t, "withdraw twice", d.actions.WithdrawApproval(ctx, alex, id), desk.Conflict)
	// A bot's cancel ends a pending request too, so it leaves the supervisors' page.
	approvalID, err := d.actions.RequestApproval(ctx, alex, id, "again")
	if err != nil {
		t.Fatal(err)
	}
	if err := d.actions.Cancel(ctx, d.sender.APIKeyID, d.sender.QueueIDs, id); err != nil {
		t.Fatal(err)
	}
	if a, err := approvals.Get(ctx, d.db, approvalID); err != nil || a.State != approvals.Withdrawn {
		t.Fatalf("approval after the bot's cancel: %+v, %v", a, err)
	}
}

func TestDecisionTimes(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 5, "billing")
	sam := d.agent(t, "sam", auth.RoleSupervisor, 3)
	start := d.clock.Now()
	for _, wait := range []time.Duration{time.Minute, 3 * time.Minute, 5 * time.Minute} {
		id := d.acceptedRefund(t, alex, "99.00", "USD")
		approvalID, err := d.actions.RequestApproval(ctx, alex, id, "please")
		if err != nil {
			t.Fatal(err)
		}
		d.clock.Advance(wait)
		if _, err := d.actions.Decide(ctx, sam, approvalID, true, "ok"); err != nil {
			t.Fatal(err)
		}
	}
	got, err := approvals.DecisionTimes(ctx, d.db, d.sender.QueueIDs[0], start, d.clock.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if got.Count != 3 || got.P50 != 3*time.Minute || got.P90 < 4*time.Minute || got.P90 > 5*time.Minute {
		t.Errorf("decision times %+v, want 3 decided, median 3m, p90 between 4m and 5m", got)
	}
	none, err := approvals.DecisionTimes(ctx, d.db, d.sender.QueueIDs[0]+1000, start, d.clock.Now().Add(time.Second))
	if err != nil || none.Count != 0 {
		t.Errorf("decision times of another queue: %+v, %v", none, err)
	}
}

// A partial refund (50.00 of 300.00 asked) needs no approval below the threshold, and says so
// wherever the outcome goes: the package, the bot's webhook and the eval record carry both the
// amount refunded and the amount asked.
func TestPartialRefundRecordsWhatWasAsked(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 5, "billing")
	id := d.acceptedRefund(t, alex, "300.00", "USD")
	if _, err := d.actions.ResolveRefunded(ctx, alex, id, "50", "", handoff.HandBack{}); err != nil {
		t.Fatalf("a partial refund below the threshold: %v", err)
	}
	want := handoff.RefundOutcome{Amount: "50", Currency: "USD", RequestedAmount: "300.00", RequestedCurrency: "USD", Partial: true}
	var stored, hooked, recorded handoff.RefundOutcome
	if err := d.db.QueryRow(ctx, `SELECT refund FROM handoffs WHERE handoff_id = $1`, id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if err := d.db.QueryRow(ctx, `SELECT payload->'refund' FROM webhook_outbox WHERE payload->>'handoff_id' = $1 AND event = 'resolved'`, id).Scan(&hooked); err != nil {
		t.Fatal(err)
	}
	if err := d.db.QueryRow(ctx, `SELECT e.refund FROM evals e JOIN handoffs h ON h.id = e.handoff_id WHERE h.handoff_id = $1 AND e.kind = 'resolve'`, id).Scan(&recorded); err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string]handoff.RefundOutcome{"the package": stored, "the webhook": hooked, "the eval record": recorded} {
		if got != want {
			t.Errorf("%s says %+v, want %+v", name, got, want)
		}
	}

	whole := d.acceptedRefund(t, alex, "40.00", "USD")
	if _, err := d.actions.Resolve(ctx, alex, whole, "refunded", "", handoff.HandBack{}); err != nil {
		t.Fatal(err)
	}
	if err := d.db.QueryRow(ctx, `SELECT refund FROM handoffs WHERE handoff_id = $1`, whole).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored.Partial || stored.Amount != "40.00" || stored.RequestedAmount != "40.00" {
		t.Errorf("the whole refund reads %+v", stored)
	}
}
