package server_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/tracing"
	"github.com/handoffdesk/desk/internal/webhook"
)

func openTracedPool(t *testing.T, url string, traces *tracing.Tracing) *pgxpool.Pool {
	t.Helper()
	pool, err := postgres.Open(t.Context(), url, postgres.DefaultAcquireTimeout, postgres.Traced(traces))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// hookHeaders is a bot's webhook endpoint on 127.0.0.1 that hands each delivery's headers to the
// test.
func hookHeaders(t *testing.T) (string, <-chan http.Header) {
	t.Helper()
	got := make(chan http.Header, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got <- r.Header.Clone() }))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

// hooksFor waits for the deliveries of the named events, by event.
func hooksFor(t *testing.T, hooks <-chan http.Header, events ...string) map[string]http.Header {
	t.Helper()
	got := map[string]http.Header{}
	deadline := time.After(waitDeadline)
	for len(got) < len(events) {
		select {
		case h := <-hooks:
			if e := h.Get("X-Handoff-Event"); slices.Contains(events, e) {
				got[e] = h
			}
		case <-deadline:
			t.Fatalf("the bot's receiver got %d of the webhooks %v", len(got), events)
		}
	}
	return got
}

// waitSpan waits until the recorder holds an ended span that matches.
func waitSpan(t *testing.T, rec *tracetest.SpanRecorder, what string, match func(sdktrace.ReadOnlySpan) bool) sdktrace.ReadOnlySpan {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if i := slices.IndexFunc(rec.Ended(), match); i >= 0 {
			return rec.Ended()[i]
		}
	}
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	t.Fatalf("no span %s among %v", what, names)
	return nil
}

func named(name string) func(sdktrace.ReadOnlySpan) bool {
	return func(s sdktrace.ReadOnlySpan) bool { return s.Name() == name }
}

func attr(s sdktrace.ReadOnlySpan, key attribute.Key) string {
	for _, kv := range s.Attributes() {
		if kv.Key == key {
			return kv.Value.String()
		}
	}
	return ""
}

// linksTo says whether s links to sc, with the link marked as pointing at to.
func linksTo(s sdktrace.ReadOnlySpan, sc trace.SpanContext, to string) bool {
	for _, l := range s.Links() {
		if l.SpanContext.TraceID() == sc.TraceID() && l.SpanContext.SpanID() == sc.SpanID() &&
			slices.Contains(l.Attributes, tracing.LinkTo.String(to)) {
			return true
		}
	}
	return false
}

// setupTraced is setupHooks with every instance traced into provider, its pool too.
func setupTraced(t *testing.T, provider trace.TracerProvider, hooks webhook.Options) *testApp {
	t.Helper()
	dbURL := pgtest.URL(t)
	app := &testApp{DBURL: dbURL, hooks: hooks, traces: tracing.With(provider)}
	app.DB = openPool(t, dbURL)
	app.Auth, app.Queues = auth.NewService(app.DB), queue.NewService(app.DB)
	app.URL, _ = app.start(t)
	return app
}

// botRun is the span of a bot's run that sends a package: its traceparent, as the bot sends it.
var botRun = trace.NewSpanContext(trace.SpanContextConfig{
	TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
	SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
	TraceFlags: trace.FlagsSampled,
	Remote:     true,
})

const botTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

// A bot's run and the humans' work on its package join up through span links: the bot's POST
// with a traceparent makes the package's span, linked to the bot's span and stored with the
// package; the agent's accept (the locking path) and resolve (the fast path, from the hold) link to
// the stored context; and each webhook's delivery links to the action that caused it and to the
// package, and hands the bot its own span as traceparent.
func TestTracesJoinTheBotsRunToTheHumansWork(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewSpanRecorder()
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	t.Cleanup(func() { _ = provider.Shutdown(context.Background()) })
	app := setupTraced(t, provider, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	hookURL, hooks := hookHeaders(t)
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	q, err := app.Queues.ByName(t.Context(), "billing_t2")
	if err != nil {
		t.Fatal(err)
	}
	k, err := app.Auth.CreateAPIKey(t.Context(), auth.NewAPIKey{Name: "tier1", QueueIDs: []int64{q.ID}, WebhookURL: hookURL, AllowPrivateWebhook: true})
	if err != nil {
		t.Fatal(err)
	}

	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.api(t, http.MethodPost, "/api/v1/handoffs", k.Key, pkg, "traceparent", botTraceparent), http.StatusCreated)

	// The intake request takes part in the bot's trace, under the bot's span, named by its route.
	request := waitSpan(t, spans, "POST /api/v1/handoffs", named("POST /api/v1/handoffs"))
	if request.SpanContext().TraceID() != botRun.TraceID() || request.Parent().SpanID() != botRun.SpanID() {
		t.Errorf("the intake request's span is in trace %s under %s, want the bot's %s under %s",
			request.SpanContext().TraceID(), request.Parent().SpanID(), botRun.TraceID(), botRun.SpanID())
	}
	// The package's span roots a trace of its own, linked to the bot's run and to the request.
	pkgSpan := waitSpan(t, spans, "handoff.package", named("handoff.package"))
	if pkgSpan.Parent().IsValid() || pkgSpan.SpanContext().TraceID() == botRun.TraceID() {
		t.Errorf("the package's span has parent %v in trace %s, want the root of a trace of its own",
			pkgSpan.Parent().SpanID(), pkgSpan.SpanContext().TraceID())
	}
	if !linksTo(pkgSpan, botRun, tracing.ToBotRun) {
		t.Errorf("the package's span links to %+v, want the bot's run %s/%s", pkgSpan.Links(), botRun.TraceID(), botRun.SpanID())
	}
	if !linksTo(pkgSpan, request.SpanContext(), tracing.ToIntake) {
		t.Errorf("the package's span links to %+v, want the intake request too", pkgSpan.Links())
	}
	for key, want := range map[attribute.Key]string{
		tracing.HandoffID: id, tracing.SourceRunID: pkg["source_run_id"].(string), tracing.Queue: "billing_t2",
	} {
		if got := attr(pkgSpan, key); got != want {
			t.Errorf("the package's span has %s = %q, want %q", key, got, want)
		}
	}
	// The package stores its span's context, and the intake batch's statements are traced.
	var stored *string
	if err := app.DB.QueryRow(t.Context(), `SELECT trace_parent FROM handoffs WHERE handoff_id = $1`, id).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if got := tracing.Parse(stored); got.TraceID() != pkgSpan.SpanContext().TraceID() || got.SpanID() != pkgSpan.SpanContext().SpanID() {
		t.Errorf("the package stores %v, want its span %s/%s", stored, pkgSpan.SpanContext().TraceID(), pkgSpan.SpanContext().SpanID())
	}
	batch := waitSpan(t, spans, "intake.batch", named("intake.batch"))
	if !linksTo(batch, pkgSpan.SpanContext(), tracing.ToPackage) {
		t.Errorf("the intake batch links to %+v, want the package", batch.Links())
	}
	waitSpan(t, spans, "a statement of the intake batch", func(s sdktrace.ReadOnlySpan) bool {
		return s.Parent().SpanID() == batch.SpanContext().SpanID() && attr(s, "db.system.name") == "postgresql"
	})

	// A browser's traceparent is only linked: it cannot put the desk's requests in its trace, nor
	// decide their sampling.
	req, err := http.NewRequest(http.MethodGet, app.URL+"/login", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("traceparent", botTraceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	login := waitSpan(t, spans, "GET /login", named("GET /login"))
	if login.Parent().IsValid() || login.SpanContext().TraceID() == botRun.TraceID() || !slices.ContainsFunc(login.Links(),
		func(l sdktrace.Link) bool { return l.SpanContext.SpanID() == botRun.SpanID() }) {
		t.Errorf("a browser's request with a traceparent has parent %s in trace %s and links %+v, want a root linked to it",
			login.Parent().SpanID(), login.SpanContext().TraceID(), login.Links())
	}

	// The agent accepts from the list (the locking path), then resolves from the hold (the fast
	// path): each action's span, under its request's, links to the stored context.
	dana := app.client(t)
	app.login(t, dana, "dana@example.com")
	if status, _, body := postForm(t, dana, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d\n%s", status, body)
	}
	if status, _, body := postForm(t, dana, app.URL+"/handoffs/"+id+"/resolve", url.Values{"code": {"refunded"}}); status != http.StatusSeeOther {
		t.Fatalf("resolve: %d\n%s", status, body)
	}
	acts := map[string]sdktrace.ReadOnlySpan{}
	for _, act := range []string{"accept", "resolve"} {
		s := waitSpan(t, spans, "handoff."+act, named("handoff."+act))
		acts[act] = s
		if !linksTo(s, pkgSpan.SpanContext(), tracing.ToPackage) {
			t.Errorf("the %s span links to %+v, want the package's span", act, s.Links())
		}
		if got := attr(s, tracing.HandoffID); got != id {
			t.Errorf("the %s span has handoff.id %q, want %q", act, got, id)
		}
		route := "POST /handoffs/:id/" + act
		parent := waitSpan(t, spans, route, named(route))
		if s.Parent().SpanID() != parent.SpanContext().SpanID() {
			t.Errorf("the %s span's parent is %s, want its request's span %s", act, s.Parent().SpanID(), parent.SpanContext().SpanID())
		}
	}

	// Each webhook's delivery is a span of its own whose context the bot receives, linked to the
	// action that caused it and to the package.
	causes := map[string]trace.SpanContext{
		"queued": pkgSpan.SpanContext(), "accepted": acts["accept"].SpanContext(), "resolved": acts["resolve"].SpanContext(),
	}
	headers := hooksFor(t, hooks, "queued", "accepted", "resolved")
	for event, cause := range causes {
		header := headers[event]
		sent := tracing.Caller(header)
		if !sent.IsValid() {
			t.Fatalf("the %s webhook came with traceparent %q, want one", event, header.Get("traceparent"))
		}
		delivery := waitSpan(t, spans, "the delivery of "+event, func(s sdktrace.ReadOnlySpan) bool {
			return s.Name() == "webhook.deliver" && s.SpanContext().SpanID() == sent.SpanID()
		})
		if delivery.SpanKind() != trace.SpanKindClient || delivery.SpanContext().TraceID() != sent.TraceID() {
			t.Errorf("the %s delivery is a %v span in trace %s, want the client span of the traceparent's trace %s",
				event, delivery.SpanKind(), delivery.SpanContext().TraceID(), sent.TraceID())
		}
		if !linksTo(delivery, cause, tracing.ToCause) || !linksTo(delivery, pkgSpan.SpanContext(), tracing.ToPackage) {
			t.Errorf("the %s delivery links to %+v, want its cause %s and the package %s", event, delivery.Links(), cause.SpanID(),
				pkgSpan.SpanContext().SpanID())
		}
		if got := attr(delivery, "http.response.status_code"); got != "200" {
			t.Errorf("the %s delivery has status %q, want 200", event, got)
		}
	}
}

// With tracing off, as by default, nothing is stored and no traceparent goes to the bot, even
// when the bot sent one.
func TestTracingOffStoresAndSendsNothing(t *testing.T) {
	t.Parallel()
	app := setupHooks(t, server.Config{}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	hookURL, hooks := hookHeaders(t)
	q, err := app.Queues.Create(t.Context(), queue.New{Name: "billing_t2"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := app.Auth.CreateAPIKey(t.Context(), auth.NewAPIKey{Name: "tier1", QueueIDs: []int64{q.ID}, WebhookURL: hookURL, AllowPrivateWebhook: true})
	if err != nil {
		t.Fatal(err)
	}
	pkg := harbor(t, nil)
	expect(t, "submit", app.api(t, http.MethodPost, "/api/v1/handoffs", k.Key, pkg, "traceparent", botTraceparent), http.StatusCreated)
	if header := hooksFor(t, hooks, "queued")["queued"]; header.Get("traceparent") != "" {
		t.Errorf("the queued webhook came with traceparent %q, want none while tracing is off", header.Get("traceparent"))
	}
	var packages, hooksStored int
	if err := app.DB.QueryRow(t.Context(), `SELECT (SELECT count(trace_parent) FROM handoffs),
		(SELECT count(trace_parent) + count(package_trace) FROM webhook_outbox)`).Scan(&packages, &hooksStored); err != nil {
		t.Fatal(err)
	}
	if packages != 0 || hooksStored != 0 {
		t.Errorf("%d packages and %d webhook contexts stored, want none while tracing is off", packages, hooksStored)
	}
}
