package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
)

var metricsLine = regexp.MustCompile(`msg="serving metrics" addr=(\S+)`)

// METRICS_ADDR serves /metrics on a listener of its own; the public port has none.
func TestServeMetricsOnlyOnMetricsAddr(t *testing.T) {
	t.Parallel()
	base := env(t)
	getenv := func(k string) string {
		if k == "METRICS_ADDR" {
			return "127.0.0.1:0"
		}
		return base(k)
	}
	out := &syncBuffer{}
	public, _ := startServeTo(t, getenv, out)
	m := metricsLine.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("serve with METRICS_ADDR did not say where metrics are served:\n%s", out)
	}
	resp, err := http.Get("http://" + m[1] + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "handoffdesk_db_pool_max_connections") {
		t.Errorf("GET /metrics on METRICS_ADDR: %d, want 200 with the desk's metrics\n%.500s", resp.StatusCode, body)
	}
	resp, err = http.Get(public + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /metrics on the public port: %d, want 404", resp.StatusCode)
	}
}
