package webhook_test

import (
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/handoffdesk/desk/internal/tracing"
	"github.com/handoffdesk/desk/internal/webhook"
)

// A delivery's span is an HTTP client span, so it carries the attributes every tracing backend
// reads from one (OpenTelemetry's HTTP client conventions): the method, the server's address and
// port, the URL without its query (where a bot may keep a token), the status code, and on failure
// what went wrong.
func TestDeliverySpanCarriesHTTPClientAttributes(t *testing.T) {
	t.Parallel()
	f := setup(t, func(n int, r *http.Request) int {
		if n == 1 {
			return http.StatusOK
		}
		return http.StatusServiceUnavailable
	})
	spans := tracetest.NewSpanRecorder()
	d := f.deliverer(t, webhook.Options{Tracing: tracing.With(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))})
	bot, err := url.Parse(f.bot.server.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(bot.Port())
	if err != nil {
		t.Fatal(err)
	}
	withToken := f.apiKey(t, "token-in-query", f.bot.server.URL+"/hook?token=s3cret")
	// A port that nobody listens on: the delivery fails before any answer.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := ln.Addr().(*net.TCPAddr)
	ln.Close()
	nobody := f.apiKey(t, "nobody-listens", "http://"+closedAddr.String()+"/hook")

	enqueue(t, f.db, newEvent(withToken.ID, "h1", "accepted"))
	deliverDue(t, d) // 200
	enqueue(t, f.db, newEvent(withToken.ID, "h2", "accepted"))
	deliverDue(t, d) // 503
	enqueue(t, f.db, newEvent(nobody.ID, "h3", "accepted"))
	deliverDue(t, d) // refused

	byHandoff := map[string]map[attribute.Key]attribute.Value{}
	for _, s := range spans.Ended() {
		if s.Name() != "webhook.deliver" {
			continue
		}
		attrs := map[attribute.Key]attribute.Value{}
		for _, kv := range s.Attributes() {
			attrs[kv.Key] = kv.Value
		}
		byHandoff[attrs[tracing.HandoffID].AsString()] = attrs
	}
	want := map[string]map[attribute.Key]any{
		"h1": {"http.request.method": "POST", "server.address": "127.0.0.1", "server.port": int64(port),
			"url.full": "http://127.0.0.1:" + bot.Port() + "/hook", "http.response.status_code": int64(200), "error.type": nil},
		"h2": {"http.request.method": "POST", "server.address": "127.0.0.1", "server.port": int64(port),
			"url.full": "http://127.0.0.1:" + bot.Port() + "/hook", "http.response.status_code": int64(503), "error.type": "503"},
		"h3": {"http.request.method": "POST", "server.address": "127.0.0.1", "server.port": int64(closedAddr.Port),
			"url.full": "http://" + closedAddr.String() + "/hook", "http.response.status_code": nil, "error.type": "*net.OpError"},
	}
	for handoff, attrs := range want {
		got, ok := byHandoff[handoff]
		if !ok {
			t.Errorf("no webhook.deliver span for %s (spans of %v)", handoff, byHandoff)
			continue
		}
		for key, value := range attrs {
			v, present := got[key]
			switch {
			case value == nil && present:
				t.Errorf("%s: %s = %v, want none", handoff, key, v.AsInterface())
			case value != nil && v.AsInterface() != value:
				t.Errorf("%s: %s = %#v, want %#v", handoff, key, v.AsInterface(), value)
			}
		}
	}
}
