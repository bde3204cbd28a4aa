package intake

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/queue"
)

// agentOf creates an agent of the queue, and, with online, gives them a presence as an open
// socket's instance writes it, on an instance whose lease lasts the test.
func (d *testDesk) agentOf(t testing.TB, name, queueName string, online bool) auth.User {
	t.Helper()
	ctx := context.Background()
	u, err := auth.NewService(d.db).CreateUser(ctx, auth.NewUser{Email: name + "@example.com", DisplayName: name, Role: auth.RoleAgent,
		Password: "long-enough", Capacity: 3})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.queues.AddMembers(ctx, u.ID, []string{queueName}); err != nil {
		t.Fatal(err)
	}
	if online {
		if _, err := d.db.Exec(ctx, `
			WITH lease AS (INSERT INTO instances (id, lease_until) VALUES ('test', now() + interval '1 hour') ON CONFLICT DO NOTHING)
			INSERT INTO presence (instance_id, user_id, sockets) VALUES ('test', $1, 1)`, u.ID); err != nil {
			t.Fatal(err)
		}
	}
	return u
}

// warmBatch prepares n warm packages for the queue, each for its own contact, without a
// preferred agent unless edit gives the ith one.
func (d *testDesk) warmBatch(t *testing.T, queueName string, n int, edit func(i int, p *handoff.Package)) []*submission {
	t.Helper()
	var ps []handoff.Package
	for i := range n {
		p := d.packages.Next(t, queueName)
		p.TransferMode, p.PreferredAgent = handoff.TransferModeWarm, ""
		if edit != nil {
			edit(i, &p)
		}
		ps = append(ps, p)
	}
	return d.batchOf(t, ps...)
}

// liveOffers lists the live offers as handoff id → agent id, read back from the database.
func (d *testDesk) liveOffers(t *testing.T) map[string]int64 {
	t.Helper()
	rows, err := d.db.Query(context.Background(), `
		SELECT h.handoff_id, o.user_id FROM offers o JOIN handoffs h ON h.id = o.handoff_id
		WHERE o.ended_at IS NULL AND h.offered_to = o.user_id AND h.offered_until = o.until AND h.warm_until >= o.until`)
	if err != nil {
		t.Fatal(err)
	}
	offers := map[string]int64{}
	var id string
	var agent int64
	if _, err := pgx.ForEachRow(rows, []any{&id, &agent}, func() error {
		offers[id] = agent
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return offers
}

// A batch of warm packages decides their first rings in its own transaction: with two agents
// available, the first two packages ring one each, by the ring's order (the preferred agent
// first, then the lower id), and never the same agent twice; the others wait for them, with the
// queue's estimate, and hear nothing yet. An agent who is away, or has no desk open, is not rung.
// Each ring is in the log, and the sweeper is told when the first one runs out.
func TestBatchRingsEachAvailableAgentOnce(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agentOf(t, "alex", "billing", true)
	bea := d.agentOf(t, "bea", "billing", true)
	carl := d.agentOf(t, "carl", "billing", true)
	d.agentOf(t, "dana", "billing", false)
	b := &pgx.Batch{}
	queue.QueueChoice(b, carl.ID, queue.Away, "", time.Now())
	if err := d.db.SendBatch(ctx, b).Close(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var due []time.Time
	d.intake.OnRing(func(at time.Time) {
		mu.Lock()
		defer mu.Unlock()
		due = append(due, at)
	})

	batch := d.warmBatch(t, "billing", 5, func(i int, p *handoff.Package) {
		if i == 0 {
			p.PreferredAgent = "Bea@Example.com"
		}
	})
	before := time.Now()
	d.intake.write(batch)

	want := []string{"bea", "alex", "", "", ""}
	for i, s := range batch {
		if s.err != nil {
			t.Fatalf("package %d: %v", i, s.err)
		}
		if s.receipt.OfferedTo != want[i] {
			t.Errorf("package %d rings %q, want %q", i, s.receipt.OfferedTo, want[i])
		}
		if rings := s.receipt.OfferedTo != ""; rings == (s.receipt.EstimatedWaitSeconds != nil) || !s.receipt.RingDecided() {
			t.Errorf("package %d: offered_to %q, estimated wait %v; want exactly one of them", i, s.receipt.OfferedTo, s.receipt.EstimatedWaitSeconds)
		} else if !rings && *s.receipt.EstimatedWaitSeconds != 900 {
			t.Errorf("package %d: estimated wait %ds, want the queue's SLA (900s) with no accepts yet", i, *s.receipt.EstimatedWaitSeconds)
		}
	}
	offers := d.liveOffers(t)
	if len(offers) != 2 || offers[batch[0].p.HandoffID] != bea.ID || offers[batch[1].p.HandoffID] != alex.ID {
		t.Fatalf("live offers %v, want %s to bea (%d) and %s to alex (%d), each written with its package's offered_to",
			offers, batch[0].p.HandoffID, bea.ID, batch[1].p.HandoffID, alex.ID)
	}
	// The waiting packages stay warm for the sweeper to ring when an agent is free.
	if n := d.count(t, `SELECT count(*) FROM handoffs WHERE warm_until IS NOT NULL AND offered_to IS NULL`); n != 3 {
		t.Errorf("%d packages wait warm, want 3", n)
	}
	if n := d.count(t, `SELECT count(*) FROM events WHERE kind = 'offered'`); n != 2 {
		t.Errorf("%d offered events, want 2", n)
	}
	if n := d.count(t, `SELECT count(*) FROM events WHERE kind = 'warm_timeout'`); n != 0 {
		t.Errorf("%d warm_timeout events, want none: the busy agents' packages wait for them", n)
	}
	var offeredAt, until time.Time
	if err := d.db.QueryRow(ctx, `SELECT min(offered_at), min(until) FROM offers`).Scan(&offeredAt, &until); err != nil {
		t.Fatal(err)
	}
	if offeredAt.Before(before) || until.Sub(offeredAt) != queue.DefaultAcceptWindow {
		t.Errorf("offered at %s until %s, want a ring of the accept window (%s) from after the batch began (%s)",
			offeredAt, until, queue.DefaultAcceptWindow, before)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(due) != 1 || !due[0].Truncate(time.Microsecond).Equal(until) {
		t.Errorf("the sweeper was told %v, want once, the first ring's end %s", due, until)
	}
}

// With nobody of the queue online, each warm package of a batch ends its warm phase as it comes
// in: its bot hears warm_timeout no_agent_online once, after queued (in the outbox's order and by
// occurred_at), and the package waits as any other.
func TestBatchWithNobodyOnlineEndsEachWarmPhaseOnce(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	d.agentOf(t, "dana", "billing", false)
	batch := d.warmBatch(t, "billing", 4, nil)
	d.intake.write(batch)
	for i, s := range batch {
		if s.err != nil || s.receipt.OfferedTo != "" || s.receipt.EstimatedWaitSeconds == nil || *s.receipt.EstimatedWaitSeconds != 900 {
			t.Errorf("package %d: receipt %+v, err %v; want the SLA's 900s as the estimate", i, s.receipt, s.err)
		}
		rows, err := d.db.Query(context.Background(), `
			SELECT event || CASE WHEN event = 'warm_timeout' THEN ':' || (payload->>'reason') ELSE '' END, (payload->>'occurred_at')::timestamptz
			FROM webhook_outbox WHERE handoff_id = $1 ORDER BY id`, s.p.HandoffID)
		if err != nil {
			t.Fatal(err)
		}
		var hooks []string
		var at []time.Time
		var hook string
		var when time.Time
		if _, err := pgx.ForEachRow(rows, []any{&hook, &when}, func() error {
			hooks, at = append(hooks, hook), append(at, when)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(hooks, []string{"queued", "warm_timeout:no_agent_online"}) || !at[1].After(at[0]) {
			t.Errorf("package %d's webhooks %v at %v, want queued then warm_timeout:no_agent_online, later", i, hooks, at)
		}
	}
	if n := d.count(t, `SELECT count(*) FROM handoffs WHERE warm_until IS NULL AND status = 'queued'`); n != 4 {
		t.Errorf("%d packages out of their warm phase, want 4", n)
	}
	if n := d.count(t, `SELECT count(*) FROM offers`); n != 0 {
		t.Errorf("%d offers, want none", n)
	}
}

// meanwhile writes the batch while another transaction holds its first package's id, and runs
// during, once the batch waits on that id (its reads done, its writes begun), before that
// transaction gives the id up.
func (d *testDesk) meanwhile(t *testing.T, batch []*submission, during func()) {
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
		batch[0].p.HandoffID, d.sender.APIKeyID); err != nil {
		t.Fatal(err)
	}
	written := make(chan struct{})
	go func() {
		d.intake.write(batch)
		close(written)
	}()
	d.waitForLock(t, "INSERT INTO handoffs")
	during()
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	<-written
}

// waitForLock waits until a statement beginning with statement waits on a lock.
func (d *testDesk) waitForLock(t *testing.T, statement string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if d.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'
			AND ltrim(query, E' \t\n') LIKE $1 || '%'`, statement) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s waited on a lock", statement)
		}
	}
}

// ring offers the package to the agent outside intake, as another instance's ring would.
func (d *testDesk) ring(t *testing.T, handoffID string, agent auth.User) {
	t.Helper()
	if _, err := d.db.Exec(context.Background(), `
		INSERT INTO offers (handoff_id, user_id, offered_at, until)
		SELECT id, $2, now(), now() + interval '20 seconds' FROM handoffs WHERE handoff_id = $1`, handoffID, agent.ID); err != nil {
		t.Fatal(err)
	}
}

// Another transaction rings the agent a batch chose between the batch's read and its write: the
// database refuses the batch's second ring for them, and the batch, read again, rings the next
// agent. No agent ever has two rings, and the package's log has one.
func TestBatchThatLosesTheRaceForAnAgentRingsTheNext(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	alex := d.agentOf(t, "alex", "billing", true)
	bea := d.agentOf(t, "bea", "billing", true)
	other := d.packages.Next(t, "billing")
	other.TransferMode = handoff.TransferModeCold
	if _, err := d.intake.Submit(context.Background(), d.sender, other); err != nil {
		t.Fatal(err)
	}
	batch := d.warmBatch(t, "billing", 1, nil)
	d.meanwhile(t, batch, func() { d.ring(t, other.HandoffID, alex) })

	if batch[0].err != nil || batch[0].receipt.OfferedTo != "bea" {
		t.Fatalf("receipt %+v, err %v; want it to ring bea, alex being rung meanwhile", batch[0].receipt, batch[0].err)
	}
	offers := d.liveOffers(t)
	if offers[batch[0].p.HandoffID] != bea.ID {
		t.Errorf("live offers %v, want %s to bea (%d)", offers, batch[0].p.HandoffID, bea.ID)
	}
	if n := d.count(t, `SELECT count(*) FROM offers WHERE user_id = $1`, alex.ID); n != 1 {
		t.Errorf("alex has %d offers, want the other transaction's one", n)
	}
	if n := d.count(t, `SELECT count(*) FROM events e JOIN handoffs h ON h.id = e.handoff_id WHERE h.handoff_id = $1 AND e.kind = 'offered'`,
		batch[0].p.HandoffID); n != 1 {
		t.Errorf("%d offered events for the package, want 1", n)
	}
}

// A batch's ring of an agent that waited for another transaction's ring of them to end (one made
// after the batch read them free) starts after that end: the agent's rings never overlap in the
// log, however the batch's write and the other rings interleave.
func TestBatchRingStartsAfterTheRingItWaitedFor(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agentOf(t, "alex", "billing", true)
	other := d.packages.Next(t, "billing")
	other.TransferMode = handoff.TransferModeCold
	if _, err := d.intake.Submit(ctx, d.sender, other); err != nil {
		t.Fatal(err)
	}
	batch := d.warmBatch(t, "billing", 1, nil)
	ended := make(chan error, 1)
	d.meanwhile(t, batch, func() {
		// Rung elsewhere and, in a transaction still open when the batch writes its ring, declined.
		d.ring(t, other.HandoffID, alex)
		tx, err := d.db.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `UPDATE offers SET ended_at = clock_timestamp(), outcome = 'declined' WHERE user_id = $1`, alex.ID); err != nil {
			t.Fatal(err)
		}
		go func() {
			d.waitForLock(t, "INSERT INTO offers")
			ended <- tx.Commit(ctx)
		}()
	})
	if err := <-ended; err != nil {
		t.Fatal(err)
	}
	if batch[0].err != nil || batch[0].receipt.OfferedTo != "alex" {
		t.Fatalf("receipt %+v, err %v; want it to ring alex once his other ring ended", batch[0].receipt, batch[0].err)
	}
	var endedAt, offeredAt, until, offeredUntil, warmUntil time.Time
	if err := d.db.QueryRow(ctx, `
		SELECT a.ended_at, b.offered_at, b.until, h.offered_until, h.warm_until
		FROM offers a JOIN offers b ON b.user_id = a.user_id AND b.id > a.id JOIN handoffs h ON h.id = b.handoff_id
		WHERE a.user_id = $1`, alex.ID).Scan(&endedAt, &offeredAt, &until, &offeredUntil, &warmUntil); err != nil {
		t.Fatalf("alex's two offers: %v", err)
	}
	if offeredAt.Before(endedAt) {
		t.Errorf("alex's second ring began at %s, %s before his first ended", offeredAt.Format(time.StampMicro), endedAt.Sub(offeredAt))
	}
	if want := min(offeredAt.Add(queue.DefaultAcceptWindow).UnixMicro(), warmUntil.UnixMicro()); until.UnixMicro() != want || !offeredUntil.Equal(until) {
		t.Errorf("the ring runs until %s (the package says %s), want the accept window from its start, within the warm wait",
			until, offeredUntil)
	}
	// The log, which the timeline, the audit and make soak's overlap check read, tells the moved ring.
	var loggedAt, loggedUntil time.Time
	if err := d.db.QueryRow(ctx, `
		SELECT e.at, (e.detail->>'until')::timestamptz FROM events e JOIN handoffs h ON h.id = e.handoff_id
		WHERE h.handoff_id = $1 AND e.kind = 'offered'`, batch[0].p.HandoffID).Scan(&loggedAt, &loggedUntil); err != nil {
		t.Fatalf("the batch's ring in the log: %v", err)
	}
	if !loggedAt.Equal(offeredAt) || !loggedUntil.Equal(until) {
		t.Errorf("the log has the ring from %s until %s; the offer runs from %s until %s",
			loggedAt.Format(time.StampMicro), loggedUntil.Format(time.StampMicro), offeredAt.Format(time.StampMicro), until.Format(time.StampMicro))
	}
}
