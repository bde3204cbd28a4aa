package server_test

import (
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/handoffdesk/desk/internal/auth"
)

// scrape reads the instance's /metrics as Prometheus would.
func (a *testApp) scrape(t *testing.T) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(a.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %d", resp.StatusCode)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// series finds the series of a family whose labels include want; nil if there is none.
func series(families map[string]*dto.MetricFamily, name string, want map[string]string) *dto.Metric {
	family := families[name]
	if family == nil {
		return nil
	}
	for _, m := range family.GetMetric() {
		matched := 0
		for _, l := range m.GetLabel() {
			if v, ok := want[l.GetName()]; ok && v == l.GetValue() {
				matched++
			}
		}
		if matched == len(want) {
			return m
		}
	}
	return nil
}

// value is a counter's or gauge's value, or a histogram's count; -1 when the series is missing.
func value(families map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m := series(families, name, labels)
	switch {
	case m == nil:
		return -1
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}

func TestMetricsCountAKnownSequence(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")

	pkg := harbor(t, nil)
	expect(t, "first submit", app.submit(t, key, pkg), http.StatusCreated)
	expect(t, "replay", app.submit(t, key, pkg), http.StatusOK)
	second := harbor(t, func(p map[string]any) { p["contact"].(map[string]any)["id"] = "cust_2" })
	expect(t, "second package", app.submit(t, key, second), http.StatusCreated)
	pkg["problem_statement"] = "Something else entirely."
	expect(t, "same id, other body", app.submit(t, key, pkg), http.StatusConflict)
	expect(t, "not JSON", app.api(t, http.MethodPost, "/api/v1/handoffs", key, []byte("x"), "Content-Type", "text/plain"), http.StatusUnsupportedMediaType)
	expect(t, "read one", app.api(t, http.MethodGet, "/api/v1/handoffs/"+pkg["handoff_id"].(string), key, nil), http.StatusOK)

	agent := app.client(t)
	app.login(t, agent, "dana@example.com")
	conn, _, err := app.dial(t, agent, "queues=billing_t2", "")
	if err != nil {
		t.Fatal(err)
	}
	if hello := readFrame(t, conn); hello.Type != "hello" {
		t.Fatalf("first frame %+v, want hello", hello)
	}

	got := app.scrape(t)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"handoffdesk_intake_total", map[string]string{"queue": "billing_t2", "result": "created"}, 2},
		{"handoffdesk_intake_total", map[string]string{"queue": "billing_t2", "result": "replayed"}, 1},
		{"handoffdesk_intake_total", map[string]string{"queue": "", "result": "conflict"}, 1},
		{"handoffdesk_intake_total", map[string]string{"queue": "", "result": "unsupported_media_type"}, 1},
		{"handoffdesk_http_request_duration_seconds", map[string]string{"method": "POST", "route": "/api/v1/handoffs", "code": "201"}, 2},
		{"handoffdesk_http_request_duration_seconds", map[string]string{"method": "POST", "route": "/api/v1/handoffs", "code": "200"}, 1},
		{"handoffdesk_http_request_duration_seconds", map[string]string{"method": "POST", "route": "/api/v1/handoffs", "code": "409"}, 1},
		{"handoffdesk_http_request_duration_seconds", map[string]string{"method": "POST", "route": "/api/v1/handoffs", "code": "415"}, 1},
		// The route's template, never the path with the package's id.
		{"handoffdesk_http_request_duration_seconds", map[string]string{"method": "GET", "route": "/api/v1/handoffs/:id", "code": "200"}, 1},
		{"handoffdesk_queue_depth", map[string]string{"queue": "billing_t2"}, 2},
		{"handoffdesk_webhook_outbox_backlog", nil, 0},
		{"handoffdesk_websocket_connections", nil, 1},
	} {
		if v := value(got, c.name, c.labels); v != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.want)
		}
	}
	// The hello is counted once written, which the browser may see first.
	for deadline := time.Now().Add(10 * time.Second); value(got, "handoffdesk_websocket_frames_sent_total", nil) < 1; got = app.scrape(t) {
		if time.Now().After(deadline) {
			t.Fatalf("websocket frames sent = %v 10 s after the hello, want at least 1", value(got, "handoffdesk_websocket_frames_sent_total", nil))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v := value(got, "handoffdesk_queue_oldest_waiting_seconds", map[string]string{"queue": "billing_t2"}); v < 0 {
		t.Errorf("oldest waiting in billing_t2 = %v, want an age", v)
	}
	if v := value(got, "handoffdesk_db_pool_max_connections", nil); v < 1 {
		t.Errorf("pool max connections = %v, want the pool's size", v)
	}
	if v := value(got, "handoffdesk_db_pool_acquires_total", nil); v < 1 {
		t.Errorf("pool acquires = %v after a dozen requests, want some", v)
	}
	for _, name := range []string{"handoffdesk_time_to_accept_seconds", "handoffdesk_time_to_resolution_seconds"} {
		if v := value(got, name, map[string]string{"queue": "billing_t2"}); v > 0 {
			t.Errorf("%s count = %v before anyone acted, want none", name, v)
		}
	}

	// The first package is picked from the list and accepted (the locking path), then resolved
	// from the hold (the fast path); the second is reserved with Next, then accepted from the hold.
	first := "/handoffs/" + pkg["handoff_id"].(string)
	for _, step := range []string{first + "/accept", "/queues/billing_t2/next", "/handoffs/" + second["handoff_id"].(string) + "/accept"} {
		if status, _, body := postForm(t, agent, app.URL+step, nil); status != http.StatusSeeOther {
			t.Fatalf("POST %s: %d\n%s", step, status, body)
		}
	}
	if status, _, body := postForm(t, agent, app.URL+first+"/resolve", url.Values{"code": {"refunded"}}); status != http.StatusSeeOther {
		t.Fatalf("resolve: %d\n%s", status, body)
	}
	// Observers see each batch before any socket does: a frame after the hello means the hub has
	// published, and measured, at least one event.
	if f := readFrame(t, conn); f.Type == "hello" {
		t.Fatalf("second frame %+v, want a batch", f)
	}
	got = app.scrape(t)
	if v := value(got, "handoffdesk_event_feed_lag_seconds", nil); v < 1 {
		t.Errorf("event feed lag observations = %v after a frame was sent, want at least 1", v)
	}
	for _, c := range []struct {
		name string
		want float64
	}{
		{"handoffdesk_time_to_accept_seconds", 2},
		{"handoffdesk_time_to_resolution_seconds", 1},
		{"handoffdesk_queue_depth", 0},
	} {
		if v := value(got, c.name, map[string]string{"queue": "billing_t2"}); v != c.want {
			t.Errorf("after two accepts and a resolve, %s{queue=billing_t2} = %v, want %v", c.name, v, c.want)
		}
	}
}

func TestPublicPortHasNoMetrics(t *testing.T) {
	t.Parallel()
	app := setup(t)
	resp, err := http.Get(app.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /metrics on the public port: %d, want 404", resp.StatusCode)
	}
	resp, err = http.Get(app.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /metrics on the metrics listener: %d, want 200", resp.StatusCode)
	}
}

// Intake counts a refusal as its answer says (a body that is not JSON is a bad request, a package
// that breaks the rules is invalid), never as internal; and every refusal, like every delivery
// outcome, reads 0 before it first happens, so that a panel or an alert sees 0, not nothing.
func TestIntakeCountsRefusalsAsAnswered(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")

	before := app.scrape(t)
	for _, result := range []string{"bad_request", "invalid", "conflict", "internal", "contact_hourly_limit", "busy", "database_unavailable"} {
		if v := value(before, "handoffdesk_intake_total", map[string]string{"queue": "", "result": result}); v != 0 {
			t.Errorf("before any package, intake{result=%s} = %v, want 0", result, v)
		}
	}
	for _, outcome := range []string{"delivered", "pending", "dead"} {
		if v := value(before, "handoffdesk_webhook_deliveries_total", map[string]string{"outcome": outcome}); v != 0 {
			t.Errorf("before any delivery, deliveries{outcome=%s} = %v, want 0", outcome, v)
		}
	}

	expect(t, "malformed JSON", app.api(t, http.MethodPost, "/api/v1/handoffs", key, []byte(`{"handoff_id": `)), http.StatusBadRequest)
	invalid := harbor(t, func(p map[string]any) { delete(p, "problem_statement") })
	expect(t, "no problem statement", app.submit(t, key, invalid), http.StatusUnprocessableEntity)
	unknown := harbor(t, func(p map[string]any) { p["colour"] = "blue" })
	expect(t, "an unknown field", app.submit(t, key, unknown), http.StatusUnprocessableEntity)

	got := app.scrape(t)
	for result, want := range map[string]float64{"bad_request": 1, "invalid": 2, "internal": 0} {
		if v := value(got, "handoffdesk_intake_total", map[string]string{"queue": "", "result": result}); v != want {
			t.Errorf("intake{result=%s} = %v, want %v", result, v, want)
		}
	}
}

// A real scrape, after a package, a websocket and a made-up method, passes Prometheus's own check
// of the exposition format and its naming rules (promtool check metrics). promtool is on PATH or
// named by PROMTOOL (make test runs scripts/promtool, which unpacks Debian's); without it the
// test fails saying how to get one, as the browser tests do without Chromium.
func TestScrapePassesPromtool(t *testing.T) {
	t.Parallel()
	promtool := os.Getenv("PROMTOOL")
	if promtool == "" {
		var err error
		if promtool, err = exec.LookPath("promtool"); err != nil {
			t.Fatal("no promtool: set PROMTOOL=$(scripts/promtool), or run make test")
		}
	}
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	expect(t, "submit", app.submit(t, key, harbor(t, nil)), http.StatusCreated)
	agent := app.client(t)
	app.login(t, agent, "dana@example.com")
	conn, _, err := app.dial(t, agent, "queues=billing_t2", "")
	if err != nil {
		t.Fatal(err)
	}
	readFrame(t, conn)
	rawRequests(t, app.URL, []string{"XYZZY /nowhere", "GET /healthz"})

	scrape, _ := app.scrapeText(t)
	check := exec.CommandContext(t.Context(), promtool, "check", "metrics") //nolint:gosec // G204: the promtool the person running the tests named
	check.Stdin = strings.NewReader(scrape)
	if out, err := check.CombinedOutput(); err != nil || len(out) > 0 {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}
}
