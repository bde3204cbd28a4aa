package actions

import (
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/tracing"
)

// tracedInstance is instance with tracing on.
func (d *testDesk) tracedInstance(t *testing.T, traces *tracing.Tracing) (*Service, *tripCounter) {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(d.db.Config().ConnString())
	if err != nil {
		t.Fatal(err)
	}
	trips := &tripCounter{}
	cfg.ConnConfig.Tracer = trips
	cfg.MaxConns = 1
	db, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return New(db, d.clock.Now, nil, nil, traces, ""), trips
}

// Tracing costs the fast path no round trip: the hold carries the package's stored context, which
// Next read in its own statement. Each action's span links to the package's span all the same, and
// the webhooks of the changes remember both spans.
func TestTracedActionsKeepOneRoundTripEach(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	traces := tracing.With(provider)
	d := newDesk(t, "billing")
	d.intake = intake.New(d.db, d.clock.Now, nil, traces)
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	d.submit(t, "billing", nil)
	d.submit(t, "billing", nil)
	actions, trips := d.tracedInstance(t, traces)
	ctx := context.Background()
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
		if i == 1 && (next-before != 1 || accept-next != 1 || resolve-accept != 1) {
			t.Errorf("round trips traced: next %d, accept %d, resolve %d; want 1 each", next-before, accept-next, resolve-accept)
		}

		var stored *string
		if err := d.db.QueryRow(ctx, `SELECT trace_parent FROM handoffs WHERE handoff_id = $1`, id).Scan(&stored); err != nil {
			t.Fatal(err)
		}
		pkg := tracing.Parse(stored)
		if !pkg.IsValid() {
			t.Fatalf("package %s stores no trace context, want one", id)
		}
		acted := map[string]sdktrace.ReadOnlySpan{}
		for _, s := range spans.Ended() {
			for _, kv := range s.Attributes() {
				if kv.Key == tracing.HandoffID && kv.Value.AsString() == id {
					acted[s.Name()] = s
				}
			}
		}
		for _, name := range []string{"handoff.next", "handoff.accept", "handoff.resolve"} {
			s, ok := acted[name]
			if !ok {
				t.Fatalf("no %s span for %s", name, id)
			}
			if !slices.ContainsFunc(s.Links(), func(l sdktrace.Link) bool { return l.SpanContext.Equal(pkg) }) {
				t.Errorf("%s of %s links to %+v, want the package's span %s", name, id, s.Links(), pkg.SpanID())
			}
		}
		var cause, packageTrace *string
		if err := d.db.QueryRow(ctx, `SELECT trace_parent, package_trace FROM webhook_outbox WHERE handoff_id = $1 AND event = 'resolved'`, id).
			Scan(&cause, &packageTrace); err != nil {
			t.Fatal(err)
		}
		if got := tracing.Parse(cause); got.SpanID() != acted["handoff.resolve"].SpanContext().SpanID() {
			t.Errorf("the resolved webhook of %s remembers %s as its cause, want the resolve's span %s", id, got.SpanID(), acted["handoff.resolve"].SpanContext().SpanID())
		}
		if got := tracing.Parse(packageTrace); !got.Equal(pkg) {
			t.Errorf("the resolved webhook of %s remembers package span %s, want %s", id, got.SpanID(), pkg.SpanID())
		}
	}
}

// Every webhook a traced change causes remembers the package's span and the span of the change,
// whichever path and action made it: the locking path's accept, a reject, a transfer, a return to
// the bot.
func TestEveryTracedWebhookRemembersItsPackage(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	traces := tracing.With(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	d := newDesk(t, "billing", "billing-refunds")
	d.intake = intake.New(d.db, d.clock.Now, nil, traces)
	actions := New(d.db, d.clock.Now, nil, nil, traces, "")
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing", "billing-refunds")
	ctx := context.Background()
	id := d.submit(t, "billing", nil)
	steps := []func() error{
		func() error { return actions.Accept(ctx, alex, id) },
		func() error { _, err := actions.Reject(ctx, alex, id, "not mine", ""); return err },
		func() error { _, err := actions.Transfer(ctx, alex, id, "billing-refunds", "refund"); return err },
		func() error { return actions.Accept(ctx, alex, id) },
		func() error {
			_, err := actions.ReturnToBot(ctx, alex, id, "out_of_scope", "", handoff.HandBack{})
			return err
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	var stored *string
	if err := d.db.QueryRow(ctx, `SELECT trace_parent FROM handoffs WHERE handoff_id = $1`, id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	rows, err := d.db.Query(ctx, `SELECT event, trace_parent, package_trace FROM webhook_outbox WHERE handoff_id = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for rows.Next() {
		var event string
		var cause, pkg *string
		if err := rows.Scan(&event, &cause, &pkg); err != nil {
			t.Fatal(err)
		}
		events = append(events, event)
		if !tracing.Parse(pkg).Equal(tracing.Parse(stored)) {
			t.Errorf("the %s webhook remembers package span %s, want %s", event, tracing.Parse(pkg).SpanID(), tracing.Parse(stored).SpanID())
		}
		if !tracing.Parse(cause).IsValid() {
			t.Errorf("the %s webhook remembers no cause", event)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	// The package is warm and nobody is online: its warm phase ended as it came in.
	if want := []string{"queued", "warm_timeout", "accepted", "rejected", "transferred", "accepted", "returned_to_bot"}; !slices.Equal(events, want) {
		t.Errorf("webhooks %v, want %v", events, want)
	}
}
