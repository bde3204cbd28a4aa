// Package metrics is the desk's Prometheus registry. Each instance builds one and hands it to the
// pieces that count; nothing registers with the client library's global registry, so two
// instances in one process (as tests run them) never share or collide on a counter.
package metrics

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Intake results besides the error codes of refused packages (desk.ErrorCode).
const (
	Created  = "created"
	Replayed = "replayed"
)

// Metrics holds one instance's registry and the series its request paths update.
type Metrics struct {
	registry *prometheus.Registry

	intake          *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	toAccept        *prometheus.HistogramVec
	toResolve       *prometheus.HistogramVec
	deliveries      *prometheus.CounterVec
	feedLag         prometheus.Histogram
	sockets         prometheus.Gauge
	framesSent      prometheus.Counter
}

// New builds an instance's registry. With db, the registry also reports the pool's statistics.
func New(db *pgxpool.Pool) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		intake: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "handoffdesk_intake_total",
			Help: "Packages submitted by bots with a valid key, by queue and result: created, replayed, or why the package was refused (docs/metrics.md lists every value). queue is the queue the package went to, empty for every refusal.",
		}, []string{"queue", "result"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "handoffdesk_http_request_duration_seconds",
			Help:    "Time to answer HTTP requests on the public port, by method, route template and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"method", "route", "code"}),
		toAccept: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "handoffdesk_time_to_accept_seconds",
			Help:    "From a package's intake to an agent's accept, by the queue it was accepted in.",
			Buckets: waitBuckets,
		}, []string{"queue"}),
		toResolve: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "handoffdesk_time_to_resolution_seconds",
			Help:    "From a package's intake to its resolution, by the queue it was resolved in.",
			Buckets: waitBuckets,
		}, []string{"queue"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "handoffdesk_webhook_deliveries_total",
			Help: "Webhook requests sent, by the state they left their row in: delivered, pending (failed, to be retried) or dead (failed for good).",
		}, []string{"outcome"}),
		feedLag: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "handoffdesk_event_feed_lag_seconds",
			Help:    "From a change (its event's time, by the clock of the instance that made it) to this instance's hub publishing it to its websockets.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}),
		sockets: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "handoffdesk_websocket_connections",
			Help: "Open browser websockets.",
		}),
		framesSent: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "handoffdesk_websocket_frames_sent_total",
			Help: "Frames written to browser websockets.",
		}),
	}
	m.registry.MustRegister(m.intake, m.requestDuration, m.toAccept, m.toResolve, m.deliveries, m.feedLag, m.sockets, m.framesSent,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if db != nil {
		m.registry.MustRegister(newPoolCollector(db))
	}
	return m
}

// ReadState has the registry report, as read when scraped, the queues' depth and oldest waiting
// age and the webhook backlog.
func (m *Metrics) ReadState(read State) { m.registry.MustRegister(newStateCollector(read)) }

// Registry is the instance's registry, for tests that read it directly.
func (m *Metrics) Registry() *prometheus.Registry { return m.registry }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{Registry: m.registry})
}

// Intake counts one submitted package.
func (m *Metrics) Intake(queue, result string) { m.intake.WithLabelValues(queue, result).Inc() }

// Refusals creates the intake series of each refusal (queue "") at 0, so that a panel or an
// alert on them reads 0 before the first refusal, not nothing. A queue's created and replayed
// series start with its first package.
func (m *Metrics) Refusals(results ...string) {
	for _, result := range results {
		m.intake.WithLabelValues("", result)
	}
}

// Request records one answered request. route is the route's template (echo's c.Path()), never
// the path itself, which carries package ids, or Unmatched; the method and the status code are
// folded to closed sets here (Method, statusLabel), since anyone who reaches the port picks them.
func (m *Metrics) Request(method, route string, status int, took time.Duration) {
	m.requestDuration.WithLabelValues(Method(method), route, statusLabel(status)).Observe(took.Seconds())
}

// Other and Unmatched stand for what a client may make up: Other for a method that is not one of
// HTTP's (and a status code outside 100–599, which no answer carries), Unmatched for a path that
// no route takes.
const (
	Other     = "other"
	Unmatched = "unmatched"
)

// Method is a request's method as a label: one of the methods RFC 9110 and RFC 5789 (PATCH)
// define, or Other. Methods are case-sensitive, so "get" is other.
func Method(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete,
		http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return method
	}
	return Other
}

// statusLabels holds the status codes' labels once, so that labelling a request allocates
// nothing: the code itself when net/http names it, or for 499 (nginx's "client closed request",
// which the server records for a client that left before its answer), else its class ("4xx").
var statusLabels = func() (labels [600]string) {
	for code := range labels {
		switch {
		case code < 100:
			labels[code] = Other
		case http.StatusText(code) != "" || code == 499:
			labels[code] = strconv.Itoa(code)
		default:
			labels[code] = strconv.Itoa(code/100) + "xx"
		}
	}
	return labels
}()

func statusLabel(status int) string {
	if status < 0 || status >= len(statusLabels) {
		return Other
	}
	return statusLabels[status]
}

// waitBuckets span a human's pace: from seconds to a day, with the seed's 28- and 47-minute
// medians between buckets of their own.
var waitBuckets = []float64{5, 15, 30, 60, 120, 300, 600, 900, 1200, 1800, 2700, 3600, 7200, 14400, 28800, 86400}

// Accepted observes one package's time from intake to accept.
func (m *Metrics) Accepted(queue string, took time.Duration) {
	m.toAccept.WithLabelValues(queue).Observe(took.Seconds())
}

// Resolved observes one package's time from intake to resolution.
func (m *Metrics) Resolved(queue string, took time.Duration) {
	m.toResolve.WithLabelValues(queue).Observe(took.Seconds())
}

// Delivery counts one webhook request by the state it left its outbox row in.
func (m *Metrics) Delivery(state string) { m.deliveries.WithLabelValues(state).Inc() }

// Outcomes creates the deliveries' series of each state at 0, as Refusals does for intake.
func (m *Metrics) Outcomes(states ...string) {
	for _, state := range states {
		m.deliveries.WithLabelValues(state)
	}
}

// Published observes the lag of one event the hub publishes, made at at.
func (m *Metrics) Published(at time.Time) { m.feedLag.Observe(time.Since(at).Seconds()) }

// SocketOpened and SocketClosed track open websockets.
func (m *Metrics) SocketOpened() { m.sockets.Inc() }

// SocketClosed is SocketOpened's other half.
func (m *Metrics) SocketClosed() { m.sockets.Dec() }

// FrameSent counts one frame written to a websocket.
func (m *Metrics) FrameSent() { m.framesSent.Inc() }

// Serve serves /metrics on a listener of its own until ctx is done, so that the desk's public
// port never exposes it.
func (m *Metrics) Serve(ctx context.Context, ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}
