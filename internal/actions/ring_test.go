package actions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/queue"
)

// online gives the users a fresh presence, as an open socket's instance writes it.
func (d *testDesk) online(t *testing.T, users ...auth.User) {
	t.Helper()
	for _, u := range users {
		if _, err := d.db.Exec(context.Background(), `
			INSERT INTO presence (instance_id, user_id, sockets) VALUES ('test', $1, 1)
			ON CONFLICT (instance_id, user_id) DO UPDATE SET seen_at = now()`, u.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// offline removes the user's presence, as their last socket's close does.
func (d *testDesk) offline(t *testing.T, u auth.User) {
	t.Helper()
	if _, err := d.db.Exec(context.Background(), `DELETE FROM presence WHERE user_id = $1`, u.ID); err != nil {
		t.Fatal(err)
	}
}

// busyAgent is an agent of the queue who is online but holds a package at their capacity of
// one: a warm package can wait for them, not ring them.
func (d *testDesk) busyAgent(t *testing.T, name, queueName string) auth.User {
	t.Helper()
	u := d.agent(t, name, auth.RoleAgent, 1, queueName)
	d.online(t, u)
	held := d.submit(t, queueName, func(p *handoff.Package) { p.TransferMode = handoff.TransferModeCold })
	if err := d.actions.Accept(context.Background(), u, held); err != nil {
		t.Fatal(err)
	}
	return u
}

// warm submits a warm package and rings its first agent, as the intake handler does.
func (d *testDesk) warm(t *testing.T, queueName string, edit func(*handoff.Package)) (string, Ringing) {
	t.Helper()
	id := d.submit(t, queueName, func(p *handoff.Package) {
		p.TransferMode = handoff.TransferModeWarm
		if edit != nil {
			edit(p)
		}
	})
	r, err := d.actions.Ring(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return id, r
}

// hooks lists the package's webhooks, in order, as event:reason.
func (d *testDesk) hooks(t *testing.T, id string) []string {
	t.Helper()
	rows, err := d.db.Query(context.Background(), `SELECT event, payload->>'reason' FROM webhook_outbox WHERE handoff_id = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var event string
		var reason *string
		if err := rows.Scan(&event, &reason); err != nil {
			t.Fatal(err)
		}
		if reason != nil && event == "warm_timeout" {
			event += ":" + *reason
		}
		out = append(out, event)
	}
	return out
}

// offers lists the package's offers in order, as agent:outcome.
func (d *testDesk) offers(t *testing.T, id string) string {
	t.Helper()
	rows, err := d.db.Query(context.Background(), `
		SELECT u.display_name || ':' || coalesce(o.outcome, 'live') FROM offers o JOIN users u ON u.id = o.user_id
		JOIN handoffs h ON h.id = o.handoff_id WHERE h.handoff_id = $1 ORDER BY o.id`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func TestWarmPackageRingsOneAgentWhoAloneMayAcceptIt(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")
	cy := d.agent(t, "cy", auth.RoleAgent, 3, "billing")
	d.online(t, alex, bea, cy)

	// bea is preferred: she rings first, although alex's id is lower.
	id, r := d.warm(t, "billing", func(p *handoff.Package) { p.PreferredAgent = "BEA@example.com" })
	if r.Agent != "bea" {
		t.Fatalf("rang %q, want the preferred bea", r.Agent)
	}
	wantCode(t, "alex accepts bea's ring", d.actions.Accept(ctx, alex, id), desk.Conflict)
	if _, err := d.actions.Next(ctx, alex, "billing"); desk.ErrorCode(err) != desk.NotFound {
		t.Fatalf("alex's next while it rings bea = %v, want nothing for him", err)
	}
	wantCode(t, "alex declines bea's ring", errOf(d.actions.Decline(ctx, alex, id)), desk.Conflict)

	// A second warm package cannot ring bea, who rings already: alex and cy never had an offer
	// or an accept, so the tie goes to the lower id, alex.
	second, r := d.warm(t, "billing", nil)
	if r.Agent != "alex" {
		t.Fatalf("second package rang %q, want alex (bea rings already; alex and cy tie, alex has the lower id)", r.Agent)
	}

	d.clock.Advance(1500 * time.Millisecond)
	if err := d.actions.Accept(ctx, bea, id); err != nil {
		t.Fatal(err)
	}
	if got := d.offers(t, id); got != "bea:accepted" {
		t.Errorf("offers %s, want bea:accepted", got)
	}
	var payload map[string]any
	var raw []byte
	if err := d.db.QueryRow(ctx, `SELECT payload FROM webhook_outbox WHERE handoff_id = $1 AND event = 'accepted'`, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &payload); err != nil {
		t.Fatal(err)
	}
	if payload["assignee"] != "bea" || payload["seconds_to_accept"] != 1.5 {
		t.Errorf("accepted webhook %s, want assignee bea and seconds_to_accept 1.5", raw)
	}
	if got := d.hooks(t, id); strings.Join(got, " ") != "queued accepted" {
		t.Errorf("webhooks %v, want queued accepted", got)
	}
	if got := d.offers(t, second); got != "alex:live" {
		t.Errorf("second package's offers %s, want alex:live", got)
	}
}

func TestWarmTimeoutWhenNoAgentIsOnline(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	id, r := d.warm(t, "billing", nil)
	if r.Agent != "" || r.EstimatedWait != 15*time.Minute {
		t.Fatalf("ring %+v, want nobody and the queue's SLA as the estimate (no accepts yet)", r)
	}
	if got := d.hooks(t, id); strings.Join(got, " ") != "queued warm_timeout:no_agent_online" {
		t.Errorf("webhooks %v, want queued warm_timeout:no_agent_online", got)
	}
	// It waits as any other package, and is pulled like one.
	if got, err := d.actions.Next(ctx, alex, "billing"); err != nil || got != id {
		t.Fatalf("next = %q, %v; want %s", got, err, id)
	}

	// With accepts behind it, the estimate is the queue's median time to accept.
	d.clock.Advance(40 * time.Second)
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	_, r = d.warm(t, "billing", nil)
	if r.EstimatedWait < 39*time.Second || r.EstimatedWait > 41*time.Second {
		t.Errorf("estimated wait %s, want the one accept's 40s", r.EstimatedWait)
	}
}

func TestWarmTimeoutWhenAllDecline(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")
	d.online(t, alex, bea)
	id, r := d.warm(t, "billing", nil)
	if r.Agent != "alex" {
		t.Fatalf("rang %q, want alex", r.Agent)
	}
	if _, err := d.actions.Decline(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	if got := d.offers(t, id); got != "alex:declined bea:live" {
		t.Fatalf("offers %s, want alex:declined bea:live", got)
	}
	if _, err := d.actions.Decline(ctx, bea, id); err != nil {
		t.Fatal(err)
	}
	if got := d.hooks(t, id); strings.Join(got, " ") != "queued warm_timeout:all_declined" {
		t.Errorf("webhooks %v, want queued warm_timeout:all_declined", got)
	}
	// The warm phase is over: a decline is refused, and anyone may take it.
	wantCode(t, "decline after the warm phase", errOf(d.actions.Decline(ctx, bea, id)), desk.Conflict)
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
}

func TestRingTimesOutOrIsWithdrawnAndRingsTheNext(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")
	cy := d.agent(t, "cy", auth.RoleAgent, 3, "billing")
	d.online(t, alex, bea, cy)
	if err := d.queues.SetWarm(ctx, "billing", 5*time.Second, time.Minute); err != nil {
		t.Fatal(err)
	}
	id, _ := d.warm(t, "billing", nil)

	d.clock.Advance(4 * time.Second)
	if _, err := d.actions.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := d.offers(t, id); got != "alex:live" {
		t.Fatalf("offers %s before the window ran out, want alex:live", got)
	}
	d.clock.Advance(time.Second)
	if _, err := d.actions.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := d.offers(t, id); got != "alex:timed_out bea:live" {
		t.Fatalf("offers %s, want alex:timed_out bea:live", got)
	}

	// bea's last socket closes: her ring goes to cy at once, and alex, who let it ring out,
	// is not rung again.
	d.offline(t, bea)
	if err := d.actions.Withdraw(ctx, bea.ID); err != nil {
		t.Fatal(err)
	}
	if got := d.offers(t, id); got != "alex:timed_out bea:withdrawn cy:live" {
		t.Fatalf("offers %s, want alex:timed_out bea:withdrawn cy:live", got)
	}
	if o, err := d.actions.LiveOffer(ctx, cy.ID); err != nil || o == nil || o.PublicID != id {
		t.Fatalf("cy's live offer = %+v, %v; want %s", o, err, id)
	}
	if err := d.actions.Accept(ctx, cy, id); err != nil {
		t.Fatal(err)
	}
	var kinds []string
	rows, err := d.db.Query(ctx, `SELECT e.kind || coalesce(':' || (e.detail->>'outcome'), '') FROM events e
		JOIN handoffs h ON h.id = e.handoff_id WHERE h.handoff_id = $1 ORDER BY e.seq`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, k)
	}
	want := "queued offered offer_ended:timed_out offered offer_ended:withdrawn offered offer_ended:accepted accepted"
	if strings.Join(kinds, " ") != want {
		t.Errorf("events %v, want %s", kinds, want)
	}

	// The supervisors' roster shows each agent's rings and how the last one ended.
	roster, err := d.queues.Roster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, a := range roster.Agents {
		got[a.Name] = fmt.Sprintf("%d/%d/%s", a.Rings, a.RingsAccepted, a.LastRing)
	}
	for name, want := range map[string]string{"alex": "1/0/timed_out", "bea": "1/0/withdrawn", "cy": "1/1/accepted"} {
		if got[name] != want {
			t.Errorf("roster rings of %s = %s, want %s (rings/accepted/last)", name, got[name], want)
		}
	}
}

func TestWarmPackageWaitsForABusyAgentUntilItWaitedTooLong(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	// alex is at his capacity of one: he is online but cannot be rung.
	d.busyAgent(t, "alex", "billing")
	id, r := d.warm(t, "billing", nil)
	if r.Agent != "" {
		t.Fatalf("rang %q, want nobody while alex is full", r.Agent)
	}
	if got := d.hooks(t, id); strings.Join(got, " ") != "queued" {
		t.Fatalf("webhooks %v: a package whose agents are busy keeps waiting for one", got)
	}
	d.clock.Advance(time.Minute)
	if _, err := d.actions.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := d.hooks(t, id); strings.Join(got, " ") != "queued warm_timeout:waited_too_long" {
		t.Errorf("webhooks %v, want queued warm_timeout:waited_too_long", got)
	}
}

// The database itself refuses a second live offer for one agent or one package, whatever code
// races to write it.
func TestDatabaseHoldsOneLiveOfferPerAgentAndPackage(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")
	one, two := d.submit(t, "billing", nil), d.submit(t, "billing", nil)
	offer := func(handoffID string, u auth.User) error {
		_, err := d.db.Exec(ctx, `INSERT INTO offers (handoff_id, user_id, offered_at, until)
			SELECT id, $2, now(), now() + interval '20 seconds' FROM handoffs WHERE handoff_id = $1`, handoffID, u.ID)
		return err
	}
	if err := offer(one, alex); err != nil {
		t.Fatal(err)
	}
	if err := offer(two, alex); err == nil || !strings.Contains(err.Error(), "offers_live_agent_idx") {
		t.Errorf("a second live offer to alex: %v, want offers_live_agent_idx to refuse it", err)
	}
	if err := offer(one, bea); err == nil || !strings.Contains(err.Error(), "offers_live_package_idx") {
		t.Errorf("a second live offer of one package: %v, want offers_live_package_idx to refuse it", err)
	}
}

// An agent's rings never overlap in their history, even when the ring of the next package waited
// on a lock while the agent's last ring ended: an offer is stamped once its package is locked,
// not when its transaction began.
func TestAnAgentsOffersNeverOverlap(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	// The wall clock: the stamps are what is tested.
	work := New(d.db, time.Now, nil, nil, nil, "")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")
	d.online(t, bea)
	warm := func() string {
		return d.submit(t, "billing", func(p *handoff.Package) { p.TransferMode = handoff.TransferModeWarm })
	}
	first, second := warm(), warm()
	if r, err := work.Ring(ctx, first); err != nil || r.Agent != "bea" {
		t.Fatalf("first ring %+v, %v; want bea", r, err)
	}
	if r, err := work.Ring(ctx, second); err != nil || r.Agent != "" {
		t.Fatalf("second ring %+v, %v; want nobody while bea rings", r, err)
	}
	// The second package's next ring starts, and waits on its row.
	tx, err := d.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT 1 FROM handoffs WHERE handoff_id = $1 FOR UPDATE`, second); err != nil {
		t.Fatal(err)
	}
	rang := make(chan error, 1)
	go func() {
		_, err := work.Ring(ctx, second)
		rang <- err
	}()
	for !d.waitsOnALock(t) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond)
	// Meanwhile bea declines the first: her ring ends, and she is free for the second.
	if _, err := work.Decline(ctx, bea, first); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-rang; err != nil {
		t.Fatal(err)
	}
	var ended, offered time.Time
	if err := d.db.QueryRow(ctx, `
		SELECT a.ended_at, b.offered_at FROM offers a JOIN offers b ON b.user_id = a.user_id AND b.id > a.id
		WHERE a.user_id = $1`, bea.ID).Scan(&ended, &offered); err != nil {
		t.Fatalf("bea's two offers: %v", err)
	}
	if offered.Before(ended) {
		t.Errorf("bea's second ring began at %s, %s before her first ended", offered.Format(time.StampMicro), ended.Sub(offered))
	}
}

// A backlog of warm packages whose agents are all busy hears waited_too_long in one sweep, not a
// hundred a pass.
func TestOneSweepEndsEveryWarmWaitThatRanOut(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	d.busyAgent(t, "alex", "billing")
	const n = sweepBatch*2 + 10
	for range n {
		d.submit(t, "billing", func(p *handoff.Package) { p.TransferMode = handoff.TransferModeWarm })
	}
	d.clock.Advance(time.Minute)
	if _, err := d.actions.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	var ended int
	if err := d.db.QueryRow(ctx, `SELECT count(*) FROM webhook_outbox WHERE event = 'warm_timeout' AND payload->>'reason' = 'waited_too_long'`).Scan(&ended); err != nil {
		t.Fatal(err)
	}
	if ended != n {
		t.Errorf("one sweep ended %d of %d warm waits", ended, n)
	}
}

// The sweeper wakes when a warm wait runs out, whichever comes first, not at its next tick: with a
// tick of an hour, a package whose agents are all busy hears waited_too_long just after its wait.
func TestSweeperWakesWhenAWarmWaitRunsOut(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	work := New(d.db, time.Now, nil, nil, nil, "")
	in := intake.New(d.db, time.Now, nil, nil)
	d.busyAgent(t, "alex", "billing")
	if err := d.queues.SetWarm(ctx, "billing", time.Minute, time.Second); err != nil {
		t.Fatal(err)
	}
	sweeping, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		work.RunSweeper(sweeping, time.Hour, slog.New(slog.DiscardHandler))
		close(done)
	}()
	defer func() {
		stop()
		<-done
	}()
	p := d.packages.Next(t, "billing")
	p.TransferMode = handoff.TransferModeWarm
	if _, err := in.Submit(ctx, d.sender, p); err != nil {
		t.Fatal(err)
	}
	if r, err := work.Ring(ctx, p.HandoffID); err != nil || r.Agent != "" {
		t.Fatalf("ring %+v, %v; want nobody while alex is full", r, err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var late *time.Duration
		if err := d.db.QueryRow(ctx, `SELECT w.created_at - (h.created_at + interval '1 second')
			FROM webhook_outbox w JOIN handoffs h ON h.handoff_id = w.handoff_id
			WHERE w.handoff_id = $1 AND w.event = 'warm_timeout'`, p.HandoffID).Scan(&late); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
		if late != nil {
			t.Logf("waited_too_long %s after the warm wait", late.Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no warm_timeout 20s after a warm wait of 1s: the sweeper waits for its tick")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// choose records what the user chose to be, stamped with the desk's stepped clock, as
// live.Presence.Choose does with its own.
func (d *testDesk) choose(t *testing.T, u auth.User, status string) {
	t.Helper()
	b := &pgx.Batch{}
	queue.QueueChoice(b, u.ID, status, "", d.clock.Now())
	if err := d.db.SendBatch(context.Background(), b).Close(); err != nil {
		t.Fatal(err)
	}
}

// ringsOut lets every live ring's window run out and sweeps.
func (d *testDesk) ringsOut(t *testing.T, window time.Duration) {
	t.Helper()
	d.clock.Advance(window)
	if _, err := d.actions.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// The queue's missed rings before away (2 by default) rings let run out in a row set the agent
// away, as if they had chosen it, with the desk's reason, and the next agent is rung at once; a
// decline breaks the row, and choosing available again starts it afresh. Each ring that ran out
// is in the agent's missed list, newest first.
func TestMissedRingsInARowSetTheAgentAway(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")
	d.online(t, alex, bea)
	const window = 5 * time.Second
	if err := d.queues.SetWarm(ctx, "billing", window, time.Hour); err != nil {
		t.Fatal(err)
	}
	availability := func(u auth.User, want queue.Availability) {
		t.Helper()
		var got queue.Availability
		b := &pgx.Batch{}
		queue.QueueAvailabilityOf(b, u.ID, &got)
		if err := d.db.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("%s is %+v, want %+v", u.DisplayName, got, want)
		}
	}
	available := queue.Availability{Status: queue.Available}
	setAway := queue.Availability{Status: queue.Away, Reason: queue.ReasonMissedRings}

	// alex lets his first ring run out: one miss is not enough.
	first, _ := d.warm(t, "billing", nil)
	d.ringsOut(t, window)
	if got := d.offers(t, first); got != "alex:timed_out bea:live" {
		t.Fatalf("first package: offers %s, want alex:timed_out bea:live", got)
	}
	availability(alex, available)
	if _, err := d.actions.Decline(ctx, bea, first); err != nil {
		t.Fatal(err)
	}

	// His second in a row sets him away, in the transaction that ends it: the package rings bea
	// at once, not at the next sweep.
	second, r := d.warm(t, "billing", nil)
	if r.Agent != "alex" {
		t.Fatalf("second package rang %q, want alex, whose last ring is older than bea's", r.Agent)
	}
	d.ringsOut(t, window)
	availability(alex, setAway)
	if got := d.offers(t, second); got != "alex:timed_out bea:live" {
		t.Fatalf("second package: offers %s, want alex:timed_out bea:live", got)
	}
	var ends []string
	rows, err := d.db.Query(ctx, `SELECT e.detail->>'agent' || ':' || coalesce(e.detail->>'away', '-') FROM events e
		WHERE e.kind = 'offer_ended' AND e.detail->>'outcome' = 'timed_out' ORDER BY e.seq`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, s)
	}
	if got := strings.Join(ends, " "); got != "alex:- alex:true" {
		t.Errorf("timed-out offers' ends %s, want the second of alex's to say he was set away", got)
	}

	// bea declined her last ring: the one she lets run out now is her first in a row.
	d.ringsOut(t, window)
	availability(bea, available)
	if got := strings.Join(d.hooks(t, second), " "); got != "queued warm_timeout:all_declined" {
		t.Errorf("second package's webhooks %s, want queued warm_timeout:all_declined", got)
	}

	// Back and available, alex's misses before count no more.
	d.clock.Advance(time.Second)
	d.choose(t, alex, queue.Available)
	third, r := d.warm(t, "billing", nil)
	if r.Agent != "alex" {
		t.Fatalf("third package rang %q, want alex", r.Agent)
	}
	d.ringsOut(t, window)
	availability(alex, available)

	// A queue that allows one miss sets away at the first, and the desk's reason goes when one
	// chooses oneself.
	if _, err := d.db.Exec(ctx, `UPDATE queues SET missed_rings_away = 1 WHERE name = 'billing'`); err != nil {
		t.Fatal(err)
	}
	d.ringsOut(t, window) // bea's ring of the third package
	availability(bea, setAway)
	d.choose(t, bea, queue.Away)
	availability(bea, queue.Availability{Status: queue.Away})

	missed, err := d.actions.MissedRings(ctx, alex.ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range missed {
		got = append(got, m.PublicID+"@"+m.Queue)
	}
	if want := third + "@billing " + second + "@billing " + first + "@billing"; strings.Join(got, " ") != want {
		t.Errorf("alex's missed rings %v, want %s", got, want)
	}
}
