package actions

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/handoff/handofftest"
	"github.com/handoffdesk/desk/internal/intake"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/clocktest"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
)

// testDesk is a database with a queue, a bot key and the two services, for one test.
type testDesk struct {
	db       *pgxpool.Pool
	auth     *auth.Service
	queues   *queue.Service
	intake   *intake.Intake
	actions  *Service
	sender   intake.Sender
	clock    *clocktest.Clock
	packages handofftest.Numbered
}

func newDesk(t testing.TB, queues ...string) *testDesk {
	t.Helper()
	db := pgtest.New(t)
	d := &testDesk{db: db, auth: auth.NewService(db), queues: queue.NewService(db), clock: clocktest.New(time.Now())}
	d.intake, d.actions = intake.New(db, d.clock.Now, nil, nil), New(db, d.clock.Now, nil, nil, nil, "")
	var ids []int64
	for _, name := range queues {
		q, err := d.queues.Create(context.Background(), queue.New{Name: name, Parent: parentOf(name)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, q.ID)
	}
	key, err := d.auth.CreateAPIKey(context.Background(), auth.NewAPIKey{Name: "bot", QueueIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	d.sender = intake.Sender{APIKeyID: key.ID, QueueIDs: ids}
	return d
}

// parentOf puts a queue named "a-b" under "a", so tests can build a tree.
func parentOf(name string) string {
	for i := range name {
		if name[i] == '-' {
			return name[:i]
		}
	}
	return ""
}

func (d *testDesk) agent(t testing.TB, name string, role auth.Role, capacity int, queues ...string) auth.User {
	t.Helper()
	u, err := d.auth.CreateUser(context.Background(), auth.NewUser{Email: name + "@example.com", DisplayName: name, Role: role, Password: "long-enough", Capacity: capacity})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.queues.AddMembers(context.Background(), u.ID, queues); err != nil {
		t.Fatal(err)
	}
	return u
}

// submit queues a copy of the Harbor package for its own contact.
func (d *testDesk) submit(t testing.TB, queueName string, edit func(*handoff.Package)) string {
	t.Helper()
	p := d.packages.Next(t, queueName)
	if edit != nil {
		edit(&p)
	}
	if _, err := d.intake.Submit(context.Background(), d.sender, p); err != nil {
		t.Fatal(err)
	}
	return p.HandoffID
}

func (d *testDesk) status(t *testing.T, id string) (handoff.Status, *int64) {
	t.Helper()
	var s handoff.Status
	var assignee *int64
	if err := d.db.QueryRow(context.Background(), `SELECT status, assignee_id FROM handoffs WHERE handoff_id = $1`, id).Scan(&s, &assignee); err != nil {
		t.Fatal(err)
	}
	return s, assignee
}

// errOf drops the queue a closing action returns, for tests that only look at the error.
func errOf(_ string, err error) error { return err }

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	if desk.ErrorCode(err) != code {
		t.Fatalf("%s: %v, want a %s error", what, err, code)
	}
}

func TestAcceptIsExactlyOnce(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	id := d.submit(t, "billing", nil)
	var agents []auth.User
	for i := range 8 {
		agents = append(agents, d.agent(t, fmt.Sprintf("a%d", i), auth.RoleAgent, 3, "billing"))
	}
	var wins, conflicts atomic.Int32
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(func() {
			err := d.actions.Accept(context.Background(), a, id)
			switch desk.ErrorCode(err) {
			case desk.Conflict:
				conflicts.Add(1)
			default:
				if err == nil {
					wins.Add(1)
				} else {
					t.Errorf("accept: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 || conflicts.Load() != 7 {
		t.Fatalf("8 agents accepting one package: %d won, %d conflicts; want 1 and 7", wins.Load(), conflicts.Load())
	}
}

func TestAgentsDrainQueueClaimingEachOnce(t *testing.T) {
	t.Parallel()
	const agents, packages = 20, 500
	d := newDesk(t, "billing")
	for range packages {
		d.submit(t, "billing", nil)
	}
	claims := make(map[string]int64)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range agents {
		a := d.agent(t, fmt.Sprintf("agent%d", i), auth.RoleAgent, 2, "billing")
		wg.Go(func() {
			ctx := context.Background()
			for {
				id, err := d.actions.Next(ctx, a, "billing")
				if desk.ErrorCode(err) == desk.NotFound {
					return
				}
				if err != nil {
					t.Errorf("next: %v", err)
					return
				}
				if err := d.actions.Accept(ctx, a, id); err != nil {
					t.Errorf("accept %s: %v", id, err)
					return
				}
				mu.Lock()
				if other, ok := claims[id]; ok {
					t.Errorf("%s claimed by %d and %d", id, other, a.ID)
				}
				claims[id] = a.ID
				mu.Unlock()
				if _, err := d.actions.Resolve(ctx, a, id, "solved", "", handoff.HandBack{}); err != nil {
					t.Errorf("resolve %s: %v", id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if len(claims) != packages {
		t.Fatalf("%d packages claimed, want %d", len(claims), packages)
	}
	var accepted, resolved int
	if err := d.db.QueryRow(context.Background(), `
		SELECT count(*) FILTER (WHERE kind = 'accepted'), count(*) FILTER (WHERE kind = 'resolved') FROM events`).
		Scan(&accepted, &resolved); err != nil {
		t.Fatal(err)
	}
	if accepted != packages || resolved != packages {
		t.Errorf("event log has %d accepts and %d resolutions, want %d each", accepted, resolved, packages)
	}
}

func TestReservationRules(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	first := d.submit(t, "billing", func(p *handoff.Package) { p.Priority = handoff.PriorityLow })
	urgent := d.submit(t, "billing", func(p *handoff.Package) { p.Priority = handoff.PriorityUrgent })
	d.clock.Advance(time.Second)
	alex := d.agent(t, "alex", auth.RoleAgent, 1, "billing")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")

	got, err := d.actions.Next(ctx, alex, "billing")
	if err != nil || got != urgent {
		t.Fatalf("next = %s, %v; want the urgent package %s before the older low one", got, err, urgent)
	}
	if again, err := d.actions.Next(ctx, alex, "billing"); err != nil || again != urgent {
		t.Fatalf("next again at capacity 1 = %s, %v; want the reservation Alex holds, %s", again, err, urgent)
	}
	wantCode(t, "someone else's reservation", d.actions.Accept(ctx, bea, urgent), desk.Conflict)

	// The reservation runs out: the sweeper returns it and Alex's late accept fails.
	d.clock.Advance(queue.DefaultReservationTimeout + time.Second)
	if n, err := d.actions.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want 1 released", n, err)
	}
	if s, _ := d.status(t, urgent); s != handoff.StatusQueued {
		t.Fatalf("after the timeout %s is %s, want queued", urgent, s)
	}
	if err := d.actions.Accept(ctx, bea, urgent); err != nil {
		t.Fatalf("bea accepts the released package: %v", err)
	}
	wantCode(t, "accepting a taken package", d.actions.Accept(ctx, alex, urgent), desk.Conflict)
	if err := d.actions.Accept(ctx, alex, first); err != nil {
		t.Fatal(err)
	}
}

// The answer to an agent's Next is lost (a dropped connection, an instance killed) and they ask
// again: they get the reservation they hold, and nothing more is claimed or recorded, at any
// capacity and in every queue they work.
func TestNextAfterALostAnswerGivesTheReservationBack(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing", "tech")
	ctx := context.Background()
	for range 3 {
		d.submit(t, "billing", nil)
		d.submit(t, "tech", nil)
	}
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing", "tech")
	held, err := d.actions.Next(ctx, alex, "billing")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"billing", "tech"} {
		if again, err := d.actions.Next(ctx, alex, q); err != nil || again != held {
			t.Fatalf("next in %s while holding %s = %s, %v; want %s again", q, held, again, err, held)
		}
	}
	var reserved, events int
	if err := d.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM handoffs WHERE status = 'reserved'),
		(SELECT count(*) FROM events WHERE kind = 'reserved')`).Scan(&reserved, &events); err != nil {
		t.Fatal(err)
	}
	if reserved != 1 || events != 1 {
		t.Fatalf("%d packages reserved and %d reservations recorded, want 1 and 1", reserved, events)
	}
	if err := d.actions.Accept(ctx, alex, held); err != nil {
		t.Fatalf("accepting the reservation given back: %v", err)
	}
	next, err := d.actions.Next(ctx, alex, "tech")
	if err != nil || next == held {
		t.Fatalf("next after accepting = %s, %v; want a new reservation", next, err)
	}
}

func TestRejectionsReachTheSupervisor(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	if _, err := d.db.Exec(ctx, `UPDATE queues SET max_rejections = 2`); err != nil {
		t.Fatal(err)
	}
	id := d.submit(t, "billing", nil)
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")
	cid := d.agent(t, "cid", auth.RoleAgent, 3, "billing")
	sam := d.agent(t, "sam", auth.RoleSupervisor, 3)

	wantCode(t, "reject without a reason", errOf(d.actions.Reject(ctx, alex, id, "", "")), desk.Invalid)
	if _, err := d.actions.Next(ctx, alex, "billing"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.actions.Reject(ctx, alex, id, "not billing", ""); err != nil {
		t.Fatal(err)
	}
	_, err := d.actions.Next(ctx, alex, "billing")
	wantCode(t, "a rejected package offered again to its rejecter", err, desk.NotFound)
	wantCode(t, "accepting what you rejected", d.actions.Accept(ctx, alex, id), desk.Conflict)

	if err := d.actions.Accept(ctx, bea, id); err != nil {
		t.Fatal(err)
	}
	if _, err := d.actions.Reject(ctx, bea, id, "also not mine", ""); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "agent after max rejections", d.actions.Accept(ctx, cid, id), desk.Forbidden)
	if _, err := d.actions.Next(ctx, cid, "billing"); desk.ErrorCode(err) != desk.NotFound {
		t.Fatalf("next offers a package waiting for a supervisor: %v", err)
	}
	if err := d.actions.Accept(ctx, sam, id); err != nil {
		t.Fatalf("supervisor takes it: %v", err)
	}
}

func TestTransferPolicyAndPingPong(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing", "billing-refunds", "tech")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing", "billing-refunds", "tech")
	id := d.submit(t, "billing", nil)

	if _, err := d.actions.Transfer(ctx, alex, id, "billing-refunds", "refund over threshold"); err != nil {
		t.Fatalf("to a child queue: %v", err)
	}
	if _, err := d.db.Exec(ctx, `UPDATE queues SET transfer_policy = '{children}' WHERE name = 'billing-refunds'`); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "to the parent, not allowed by policy", errOf(d.actions.Transfer(ctx, alex, id, "billing", "")), desk.Forbidden)
	if _, err := d.db.Exec(ctx, `UPDATE queues SET transfer_policy = '{parent}' WHERE name = 'billing-refunds'`); err != nil {
		t.Fatal(err)
	}
	_, err := d.actions.Transfer(ctx, alex, id, "billing", "")
	wantCode(t, "straight back to where it came from", err, desk.RateLimited)
	d.clock.Advance(31 * time.Minute)
	if _, err := d.actions.Transfer(ctx, alex, id, "billing", ""); err != nil {
		t.Fatalf("back after the cooldown: %v", err)
	}
	wantCode(t, "to an unknown queue", errOf(d.actions.Transfer(ctx, alex, id, "nope", "")), desk.Invalid)
	var notes int
	if err := d.db.QueryRow(ctx, `SELECT count(*) FROM handoff_notes`).Scan(&notes); err != nil || notes != 1 {
		t.Fatalf("notes kept: %d, %v; want 1", notes, err)
	}
}

// Peers are siblings under one parent. Top-level queues share no parent, so a package moves
// between two of them only when the receiving queue accepts top-level transfers; the list of
// targets the package page offers follows the same rule.
func TestTransferBetweenTopLevelQueuesNeedsTheTargetsConsent(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing", "billing-refunds", "billing-disputes", "tech")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing", "billing-refunds")
	targets := func() []string {
		t.Helper()
		billing, err := d.queues.ByName(ctx, "billing")
		if err != nil {
			t.Fatal(err)
		}
		names, err := d.queues.TransferTargets(ctx, billing)
		if err != nil {
			t.Fatal(err)
		}
		return names
	}

	sibling := d.submit(t, "billing-refunds", nil)
	if _, err := d.actions.Transfer(ctx, alex, sibling, "billing-disputes", ""); err != nil {
		t.Fatalf("to a sibling under the same parent: %v", err)
	}
	topLevel := d.submit(t, "billing", nil)
	_, err := d.actions.Transfer(ctx, alex, topLevel, "tech", "")
	wantCode(t, "to another top-level queue that does not accept them", err, desk.Forbidden)
	if msg := desk.ErrorMessage(err); !strings.Contains(msg, "top-level") || !strings.Contains(msg, "tech does not accept") {
		t.Errorf("the refusal says %q; want it to say that tech does not accept top-level transfers", msg)
	}
	if got, want := targets(), []string{"billing-disputes", "billing-refunds"}; !slices.Equal(got, want) {
		t.Errorf("billing offers transfers to %v, want %v", got, want)
	}

	if _, err := d.db.Exec(ctx, `UPDATE queues SET accepts_top_level_transfers = true WHERE name = 'tech'`); err != nil {
		t.Fatal(err)
	}
	if got, want := targets(), []string{"billing-disputes", "billing-refunds", "tech"}; !slices.Equal(got, want) {
		t.Errorf("once tech accepts top-level transfers billing offers %v, want %v", got, want)
	}
	if _, err := d.actions.Transfer(ctx, alex, topLevel, "tech", ""); err != nil {
		t.Fatalf("to a top-level queue that accepts them: %v", err)
	}
	var in string
	if err := d.db.QueryRow(ctx, `SELECT q.name FROM handoffs h JOIN queues q ON q.id = h.queue_id WHERE h.handoff_id = $1`, topLevel).Scan(&in); err != nil || in != "tech" {
		t.Errorf("after the transfer the package is in %q (%v), want tech", in, err)
	}
}

func TestCloseAndTellTheBot(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")
	returned := d.submit(t, "billing", nil)
	resolved := d.submit(t, "billing", nil)
	expiring := d.submit(t, "billing", nil)

	wantCode(t, "unknown return reason", errOf(d.actions.ReturnToBot(ctx, alex, returned, "bored", "", handoff.HandBack{})), desk.Invalid)
	if _, err := d.actions.ReturnToBot(ctx, alex, returned, "wrong_escalation", "policy covers this", handoff.HandBack{}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "resolve before accepting", errOf(d.actions.Resolve(ctx, alex, resolved, "solved", "", handoff.HandBack{})), desk.Conflict)
	if err := d.actions.Accept(ctx, alex, resolved); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "resolve someone else's", errOf(d.actions.Resolve(ctx, bea, resolved, "solved", "", handoff.HandBack{})), desk.Forbidden)
	if _, err := d.actions.Resolve(ctx, alex, resolved, "refunded", "goodwill refund", handoff.HandBack{}); err != nil {
		t.Fatal(err)
	}
	d.clock.Advance(queue.DefaultTTL + time.Minute)
	if n, err := d.actions.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want the one unclaimed package expired", n, err)
	}
	for id, want := range map[string]handoff.Status{returned: handoff.StatusReturnedToBot, resolved: handoff.StatusResolved, expiring: handoff.StatusExpired} {
		if got, _ := d.status(t, id); got != want {
			t.Errorf("%s is %s, want %s", id, got, want)
		}
	}
	var payload string
	if err := d.db.QueryRow(ctx, `SELECT payload::text FROM webhook_outbox WHERE handoff_id = $1 AND event = 'returned_to_bot'`, returned).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"reason": "wrong_escalation"`, `"note": "policy covers this"`} {
		if !strings.Contains(payload, want) {
			t.Errorf("returned_to_bot webhook %s lacks %s", payload, want)
		}
	}
	var events []string
	rows, _ := d.db.Query(ctx, `SELECT event FROM webhook_outbox WHERE handoff_id = $1 ORDER BY id`, expiring)
	for rows.Next() {
		var e string
		_ = rows.Scan(&e)
		events = append(events, e)
	}
	// The package is a warm one that rang nobody: its bot heard warm_timeout before it expired.
	if fmt.Sprint(events) != "[queued warm_timeout expired]" {
		t.Errorf("expired package webhooks %v, want [queued warm_timeout expired]", events)
	}
}

// tripCounter counts what a pool sends PostgreSQL and waits for: each statement outside a batch,
// and each batch, which pgx pipelines into one round trip.
type tripCounter struct{ n atomic.Int64 }

func (c *tripCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *tripCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *tripCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *tripCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *tripCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// instance returns Actions on a pool of their own over the desk's database, as another instance
// of the desk would have, counting its round trips.
func (d *testDesk) instance(t *testing.T) (*Service, *tripCounter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(d.db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	trips := &tripCounter{}
	cfg.ConnConfig.Tracer = trips
	// One connection, so that the statements a warm-up prepares are the ones measured.
	cfg.MaxConns = 1
	db, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return New(db, d.clock.Now, nil, nil, nil, ""), trips
}

func TestNextAcceptResolveTakeOneRoundTripEach(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	d.submit(t, "billing", nil)
	d.submit(t, "billing", nil)
	actions, trips := d.instance(t)
	for i := range 2 {
		before := trips.n.Load()
		id, err := actions.Next(ctx, alex, "billing")
		if err != nil {
			t.Fatal(err)
		}
		next := trips.n.Load()
		if err := actions.Accept(ctx, alex, id); err != nil {
			t.Fatal(err)
		}
		accept := trips.n.Load()
		if _, err := actions.Resolve(ctx, alex, id, "solved", "", handoff.HandBack{}); err != nil {
			t.Fatal(err)
		}
		resolve := trips.n.Load()
		// The first cycle prepares the statements on the connection.
		if i == 1 && (next-before != 1 || accept-next != 1 || resolve-accept != 1) {
			t.Errorf("round trips: next %d, accept %d, resolve %d; want 1 each", next-before, accept-next, resolve-accept)
		}
	}
}

// records describes what the desk wrote about a package, leaving out what differs between any two
// packages (ids, times): its events, its webhooks and its eval records, in order.
func (d *testDesk) records(t *testing.T, id string) string {
	t.Helper()
	var got string
	err := d.db.QueryRow(context.Background(), `
		SELECT concat_ws(E'\n',
			(SELECT string_agg(e.kind || ' by ' || coalesce(e.actor_user::text, 'bot') || ' in ' || e.queue_id || ' '
				|| (e.detail - 'reserved_until')::text, ', ' ORDER BY e.seq) FROM events e WHERE e.handoff_id = h.id),
			(SELECT string_agg(o.event || ' to ' || o.api_key_id || ' ' || (o.payload - 'event_id' - 'handoff_id' - 'occurred_at' #- '{hand_back,thread}')::text, ', ' ORDER BY o.id)
				FROM webhook_outbox o WHERE o.handoff_id = h.handoff_id),
			(SELECT string_agg('eval ' || v.kind || ' by ' || v.editor_id || ' in ' || v.queue_id || ' ' || concat_ws(' ', v.code, v.note,
				'escalation_needed=' || v.escalation_needed), ', ' ORDER BY v.id) FROM evals v WHERE v.handoff_id = h.id))
		FROM handoffs h WHERE h.handoff_id = $1`, id).Scan(&got)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestFastAndSlowPathsRecordTheSame(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	work := func(next, accept, resolve *Service) string {
		t.Helper()
		d.submit(t, "billing", nil)
		id, err := next.Next(ctx, alex, "billing")
		if err != nil {
			t.Fatal(err)
		}
		if err := accept.Accept(ctx, alex, id); err != nil {
			t.Fatal(err)
		}
		if _, err := resolve.Resolve(ctx, alex, id, "refunded", "goodwill", handoff.HandBack{}); err != nil {
			t.Fatal(err)
		}
		return d.records(t, id)
	}
	a, _ := d.instance(t)
	b, _ := d.instance(t)
	c, _ := d.instance(t)
	fast := work(a, a, a)
	// Instances that did not reserve or accept the package know nothing of it: the slow path.
	slow := work(a, b, c)
	if fast != slow {
		t.Errorf("the fast path recorded\n%s\nthe slow path\n%s", fast, slow)
	}
	for _, want := range []string{`"reserved"`, `"accepted"`, `"resolved"`, `"outcome": "refunded"`, `"note": "goodwill"`, `"assignee": "alex"`, `"queue": "billing"`,
		fmt.Sprintf("eval resolve by %d", alex.ID)} {
		if !strings.Contains(fast, want) {
			t.Errorf("records lack %s:\n%s", want, fast)
		}
	}
}

func TestStaleHoldRecordsNothingAndTakesTheSlowPath(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")
	sam := d.agent(t, "sam", auth.RoleSupervisor, 3)
	mine, _ := d.instance(t)
	other, _ := d.instance(t)

	// Alex's reservation runs out and Bea takes the package on another instance: Alex's late
	// accept is refused with who has it, and writes nothing.
	taken := d.submit(t, "billing", nil)
	if _, err := mine.Next(ctx, alex, "billing"); err != nil {
		t.Fatal(err)
	}
	d.clock.Advance(queue.DefaultReservationTimeout + time.Second)
	if _, err := other.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Accept(ctx, bea, taken); err != nil {
		t.Fatal(err)
	}
	before := d.records(t, taken)
	err := mine.Accept(ctx, alex, taken)
	if desk.ErrorCode(err) != desk.Conflict || !strings.Contains(err.Error(), "already accepted by bea") {
		t.Fatalf("late accept: %v, want a conflict naming bea", err)
	}
	if after := d.records(t, taken); after != before {
		t.Errorf("a refused accept wrote records:\n%s\nthen\n%s", before, after)
	}

	// A supervisor hands Alex's reservation back to the queue on another instance: Alex may
	// still accept it, once.
	back := d.submit(t, "billing", nil)
	if _, err := mine.Next(ctx, alex, "billing"); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Reject(ctx, sam, back, "reassigning", ""); err != nil {
		t.Fatal(err)
	}
	if err := mine.Accept(ctx, alex, back); err != nil {
		t.Fatalf("accepting the package handed back: %v", err)
	}
	if got := d.records(t, back); strings.Count(got, "accepted by") != 1 || strings.Count(got, "accepted to") != 1 {
		t.Errorf("want one accepted audit row and webhook:\n%s", got)
	}
	if s, assignee := d.status(t, back); s != handoff.StatusAccepted || assignee == nil || *assignee != alex.ID {
		t.Errorf("%s is %s by %v, want accepted by alex", back, s, assignee)
	}
}

// TestTripsTravelTogetherAndFailAlone puts three agents' actions in one group: a stale hold
// among them fails alone and takes the slow path, while the others commit.
func TestTripsTravelTogetherAndFailAlone(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")
	cid := d.agent(t, "cid", auth.RoleAgent, 3, "billing")
	dan := d.agent(t, "dan", auth.RoleAgent, 3, "billing")
	mine, _ := d.instance(t)
	other, _ := d.instance(t)
	eve := d.agent(t, "eve", auth.RoleAgent, 3, "billing")
	for range 4 {
		d.submit(t, "billing", nil)
	}
	beas, err := mine.Next(ctx, bea, "billing")
	if err != nil {
		t.Fatal(err)
	}
	// Bea's reservation runs out and Cid takes the package elsewhere: Bea's hold is stale.
	d.clock.Advance(queue.DefaultReservationTimeout + time.Second)
	if _, err := other.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if err := other.Accept(ctx, cid, beas); err != nil {
		t.Fatal(err)
	}

	// A group is on its way, waiting on Eve's row: the three actions wait for the next group, then
	// travel together.
	tx, err := d.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, eve.ID); err != nil {
		t.Fatal(err)
	}
	var alexErr, beaErr, danErr, eveErr error
	var alexs, dans string
	var wg sync.WaitGroup
	wg.Go(func() { _, eveErr = mine.Next(ctx, eve, "billing") })
	for mine.trips.Waiting() != 0 || !d.waitsOnALock(t) {
		time.Sleep(time.Millisecond)
	}
	wg.Go(func() { alexs, alexErr = mine.Next(ctx, alex, "billing") })
	wg.Go(func() { beaErr = mine.Accept(ctx, bea, beas) })
	wg.Go(func() { dans, danErr = mine.Next(ctx, dan, "billing") })
	for mine.trips.Waiting() != 3 {
		time.Sleep(time.Millisecond)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if alexErr != nil || danErr != nil || eveErr != nil {
		t.Fatalf("the actions travelling with a stale hold: alex %v, dan %v, eve %v", alexErr, danErr, eveErr)
	}
	if desk.ErrorCode(beaErr) != desk.Conflict || !strings.Contains(beaErr.Error(), "already accepted by cid") {
		t.Fatalf("accept on a stale hold: %v, want a conflict naming cid", beaErr)
	}
	if got := d.records(t, beas); strings.Count(got, "accepted by") != 1 {
		t.Errorf("the stale accept wrote records:\n%s", got)
	}
	for _, id := range []string{alexs, dans} {
		if s, _ := d.status(t, id); s != handoff.StatusReserved {
			t.Errorf("%s is %s, want reserved", id, s)
		}
	}
}

// waitsOnALock reports whether a statement of the desk's database waits for a lock.
func (d *testDesk) waitsOnALock(t *testing.T) bool {
	t.Helper()
	var waiting int
	if err := d.db.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).
		Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	return waiting > 0
}

// Two tabs of one agent accept two packages from the list at once: at capacity 1, one wins. The
// second tab's capacity check waits for the first tab's claim to commit and must count it.
func TestCapacityHoldsForTwoTabsAcceptingAtOnce(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	one, two := d.submit(t, "billing", nil), d.submit(t, "billing", nil)
	alex := d.agent(t, "alex", auth.RoleAgent, 1, "billing")

	// Hold Alex's row so that both tabs reach their capacity check and wait there.
	tx, err := d.db.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE id = $1 FOR UPDATE`, alex.ID); err != nil {
		t.Fatal(err)
	}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, id := range []string{one, two} {
		wg.Go(func() { errs[i] = d.actions.Accept(ctx, alex, id) })
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var waiting int
		if err := d.db.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).
			Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tabs wait on Alex's row, want 2", waiting)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	if (errs[0] == nil) == (errs[1] == nil) {
		t.Fatalf("accepts = %v, %v; want exactly one to succeed", errs[0], errs[1])
	}
	for _, err := range errs {
		if err != nil {
			wantCode(t, "the second tab at capacity 1", err, desk.Conflict)
		}
	}
}

// SQL asks closed_at IS NULL for "open": the table's check must hold closed_at to exactly the
// statuses Go calls open, or a query would count a closed package or miss an open one.
func TestOpenInSQLIsOpenInGo(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	id := d.submit(t, "billing", nil)
	for _, s := range handoff.Statuses() {
		for _, closed := range []bool{false, true} {
			_, err := d.db.Exec(context.Background(), `
				UPDATE handoffs SET status = $2, closed_at = CASE WHEN $3 THEN now() END WHERE handoff_id = $1`, id, s, closed)
			if allowed := closed != s.Open(); (err == nil) != allowed {
				t.Errorf("status %s with closed_at set %v: %v, want allowed %v", s, closed, err, allowed)
			}
		}
	}
}
