// Package tracing is the desk's OpenTelemetry tracing. Each instance builds one Tracing (New reads
// the standard OTEL_* variables) and hands it to the pieces that make spans; nothing is set on the
// library's global provider, so two instances in one process never share spans.
//
// Tracing is off unless OTEL_EXPORTER_OTLP_ENDPOINT is set: then every span comes from a no-op
// provider, no request is wrapped and no package stores a context. On, a bot's run and the humans'
// work on its package join up through span links to the package's span, whose context is stored
// with the package (docs/tracing.md).
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	sdkresource "go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// The attributes the desk's own spans carry.
const (
	HandoffID   = attribute.Key("handoff.id")
	SourceRunID = attribute.Key("handoff.source_run_id")
	Queue       = attribute.Key("handoff.queue")
	// LinkTo names what a link of the desk's points at: one of the To* values.
	LinkTo = attribute.Key("handoff.link")
)

// What a span's link points at (LinkTo).
const (
	ToBotRun  = "bot_run" // the bot's span that sent the package (its traceparent)
	ToIntake  = "intake"  // the request that brought the package in
	ToPackage = "package" // the package's span, stored with it
	ToCause   = "cause"   // the action whose change a webhook tells of
)

// serviceName is the service the spans come from unless OTEL_SERVICE_NAME says otherwise.
const serviceName = "handoffdesk"

// Tracing is one instance's tracer provider.
type Tracing struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
	on       bool
	shutdown func(context.Context) error
}

// Off is tracing that records nothing and costs nothing.
func Off() *Tracing {
	p := tracenoop.NewTracerProvider()
	return &Tracing{provider: p, tracer: p.Tracer(serviceName), shutdown: func(context.Context) error { return nil }}
}

// With traces through provider: for tests, which record spans in memory.
func With(provider trace.TracerProvider) *Tracing {
	return &Tracing{provider: provider, tracer: provider.Tracer(serviceName), on: true, shutdown: func(context.Context) error { return nil }}
}

// New is tracing as the environment asks: off unless OTEL_EXPORTER_OTLP_ENDPOINT is set (and
// OTEL_SDK_DISABLED is not true); on, spans go in batches to that OTLP/HTTP endpoint. The SDK's
// exporter, sampler and resource read the standard OTEL_* variables from the process's
// environment themselves, not through getenv. Shutdown flushes what is left.
func New(ctx context.Context, getenv func(string) string) (*Tracing, error) {
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" {
		return Off(), nil
	}
	if disabled, _ := strconv.ParseBool(getenv("OTEL_SDK_DISABLED")); disabled {
		return Off(), nil
	}
	exporter, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_ENDPOINT: the trace exporter: %w", err)
	}
	// The service is the desk unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES say otherwise:
	// detectors given later win.
	resource, err := sdkresource.New(ctx, sdkresource.WithAttributes(semconv.ServiceName(serviceName)),
		sdkresource.WithTelemetrySDK(), sdkresource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	provider := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter), sdktrace.WithResource(resource))
	t := With(provider)
	t.shutdown = provider.Shutdown
	return t, nil
}

// On says whether spans are recorded anywhere.
func (t *Tracing) On() bool { return t.on }

// Provider is the instance's tracer provider, for instrumentation libraries.
func (t *Tracing) Provider() trace.TracerProvider { return t.provider }

// Shutdown exports the spans still buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.shutdown(ctx) }

// Start starts a span of the desk's own.
func (t *Tracing) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, name, opts...)
}

// Act starts the span of a person's action on a package, such as "handoff.accept". Once the
// package's row is read, LinkPackage links the span to the package; End ends it. Every action on
// a package goes through these three, so that each one joins the package's trace the same way.
func (t *Tracing) Act(ctx context.Context, name, handoffID string) (context.Context, trace.Span) {
	return t.tracer.Start(ctx, name, trace.WithAttributes(HandoffID.String(handoffID)))
}

// LinkPackage links the span of ctx to the package's stored context (Stored), if it has one.
func LinkPackage(ctx context.Context, stored *string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	if sc := Parse(stored); sc.IsValid() {
		span.AddLink(trace.Link{SpanContext: sc, Attributes: []attribute.KeyValue{LinkTo.String(ToPackage)}})
	}
}

// End ends span, marking it failed when err is not nil.
func End(span trace.Span, err error) {
	if err != nil && span.IsRecording() {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// Link is a link to a stored context, marked with what it points at; none when stored is nil or
// not a context.
func Link(stored *string, to string) []trace.Link {
	sc := Parse(stored)
	if !sc.IsValid() {
		return nil
	}
	return []trace.Link{{SpanContext: sc, Attributes: []attribute.KeyValue{LinkTo.String(to)}}}
}

// Stored is the span context of ctx as the desk stores it (a W3C traceparent), or nil when ctx
// has none: with tracing off, nothing is stored. Trace state is not kept.
func Stored(ctx context.Context) *string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	flags := "00"
	if sc.IsSampled() {
		flags = "01"
	}
	s := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + flags
	return &s
}

// Parse reads a stored context back; an invalid one reads as none.
func Parse(stored *string) trace.SpanContext {
	if stored == nil {
		return trace.SpanContext{}
	}
	return trace.SpanContextFromContext(traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": *stored}))
}

// traceContext is the W3C propagation the desk reads and writes: traceparent only.
var traceContext = propagation.TraceContext{}

// Caller is the span context a request's traceparent names, if valid: a bot's run.
func Caller(h http.Header) trace.SpanContext {
	return trace.SpanContextFromContext(traceContext.Extract(context.Background(), propagation.HeaderCarrier(h)))
}

// Inject sets the traceparent of ctx's span on an outgoing request's header.
func Inject(ctx context.Context, h http.Header) {
	traceContext.Inject(ctx, propagation.HeaderCarrier(h))
}

// Handler wraps the desk's handler in a server span per request, when tracing is on. Only the bot
// API (/api/) continues an incoming traceparent: a bot's run is a trace the desk takes part in.
// Anyone else's traceparent, a browser's, only gets a link, so it cannot decide the sampling of
// the desk's requests. Websockets (which live for hours), health checks and static files make no
// spans. The span is named by method only until Route names its route.
func (t *Tracing) Handler(h http.Handler) http.Handler {
	if !t.on {
		return h
	}
	return otelhttp.NewHandler(h, "http",
		otelhttp.WithTracerProvider(t.provider),
		otelhttp.WithMeterProvider(metricnoop.NewMeterProvider()),
		otelhttp.WithPropagators(traceContext),
		otelhttp.WithPublicEndpointFn(func(r *http.Request) bool { return !strings.HasPrefix(r.URL.Path, "/api/") }),
		otelhttp.WithFilter(func(r *http.Request) bool {
			p := r.URL.Path
			return p != "/ws" && p != "/healthz" && p != "/readyz" && !strings.HasPrefix(p, "/static/")
		}),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return r.Method }))
}

// Route names the request's span by its route template (echo's c.Path()), never by its path,
// which carries package ids.
func Route(ctx context.Context, method, route string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || route == "" {
		return
	}
	span.SetName(method + " " + route)
	span.SetAttributes(semconv.HTTPRoute(route))
}
