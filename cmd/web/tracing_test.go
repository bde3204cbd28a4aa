package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	collector "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// With OTEL_EXPORTER_OTLP_ENDPOINT set, `web serve` sends its spans there over OTLP/HTTP, named by
// route and from the service handoffdesk; by the time serve returns, the buffered ones are flushed.
func TestServeExportsTracesToTheOTLPEndpoint(t *testing.T) {
	var (
		mu       sync.Mutex
		names    []string
		services []string
	)
	collectorSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collector.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, rs := range req.GetResourceSpans() {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.GetKey() == "service.name" {
					services = append(services, kv.GetValue().GetStringValue())
				}
			}
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					names = append(names, s.GetName())
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(collectorSrv.Close)
	// The SDK's exporter reads the process's environment, serve's getenv only whether to trace.
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", collectorSrv.URL)
	getenv := env(t, "OTEL_EXPORTER_OTLP_ENDPOINT", collectorSrv.URL)
	base, stop := startServe(t, getenv)
	resp, err := http.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(names, "GET /login") {
		t.Errorf("the collector got spans %v, want GET /login", names)
	}
	if len(services) == 0 || slices.ContainsFunc(services, func(s string) bool { return s != "handoffdesk" }) {
		t.Errorf("the spans came from services %v, want handoffdesk", services)
	}
}
