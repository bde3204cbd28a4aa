package tracing

import (
	"context"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestStoredContextReadsBack(t *testing.T) {
	provider := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(tracetest.NewSpanRecorder()))
	ctx, span := With(provider).Start(context.Background(), "x")
	defer span.End()
	stored := Stored(ctx)
	if stored == nil || len(*stored) != 55 {
		t.Fatalf("stored %v, want a traceparent", stored)
	}
	if got := Parse(stored); !got.IsValid() || got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() || !got.IsSampled() {
		t.Errorf("%s reads back as %+v, want the span's context", *stored, got)
	}
	for _, bad := range []string{"", "00-00000000000000000000000000000000-0000000000000000-01", "not a traceparent"} {
		if got := Parse(&bad); got.IsValid() {
			t.Errorf("%q reads back as %+v, want none", bad, got)
		}
	}
	if got := Stored(context.Background()); got != nil {
		t.Errorf("a context without a span stores %q, want nothing", *got)
	}
	ctx, off := Off().Start(context.Background(), "x")
	if got := Stored(ctx); got != nil || off.IsRecording() {
		t.Errorf("with tracing off a span stores %v and records %v, want neither", got, off.IsRecording())
	}
}

func TestOffUnlessAnEndpointIsSet(t *testing.T) {
	for _, c := range []struct {
		env map[string]string
		on  bool
	}{
		{map[string]string{}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318", "OTEL_SDK_DISABLED": "true"}, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
	} {
		traces, err := New(context.Background(), func(k string) string { return c.env[k] })
		if err != nil {
			t.Fatal(err)
		}
		if traces.On() != c.on {
			t.Errorf("with %v tracing is on: %v, want %v", c.env, traces.On(), c.on)
		}
		if err := traces.Shutdown(context.Background()); err != nil {
			t.Errorf("shutdown with %v: %v", c.env, err)
		}
	}
}
