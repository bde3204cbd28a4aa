package server_test

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Characters of an HTTP token (RFC 9110 §5.6.2), of which Go's server takes any method, and those
// a path may hold as they are (RFC 3986's unreserved).
const (
	methodChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789!#$%&'*+-.^_`|~"
	pathChars   = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~"
)

// random is n characters of chars, from r.
func random(r *rand.Rand, chars string, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	return string(b)
}

// rawRequests sends each request line, as written, over one TCP connection kept alive, with no
// client in between to refuse or tidy a made-up method, and reads each answer.
func rawRequests(t *testing.T, base string, lines []string) {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	reader := bufio.NewReader(conn)
	for _, line := range lines {
		if _, err := fmt.Fprintf(conn, "%s HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n", line, u.Host); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(reader, nil)
		if err != nil {
			t.Fatalf("%.60s…: %v", line, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// scrapeText is the metrics listener's answer as Prometheus reads it, and its series.
func (a *testApp) scrapeText(t *testing.T) (string, int) {
	t.Helper()
	resp, err := http.Get(a.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	if err != nil {
		t.Fatal(err)
	}
	series := 0
	for _, f := range families {
		series += len(f.GetMetric())
	}
	return string(raw), series
}

// Anyone who reaches the public port, logged in or not, picks the request's method and path. A
// made-up method must not become a label value of its own (the probe of issue 21 made a 306 MB
// scrape with 300 of them), nor a path that no route takes: the first odd request adds its
// series once, and a thousand more add nothing.
func TestMadeUpMethodsAndPathsDoNotGrowTheScrape(t *testing.T) {
	t.Parallel()
	app := setup(t)
	r := rand.New(rand.NewPCG(21, 1)) //nolint:gosec // G404: made-up methods, repeatable from the seed; nothing secret
	odd := func() string {
		return random(r, methodChars, 100+r.IntN(1900)) + " /" + random(r, pathChars, 1+r.IntN(200))
	}
	oddLines := func(n int) []string {
		lines := make([]string, n)
		for i := range lines {
			lines[i] = odd()
		}
		return lines
	}
	rawRequests(t, app.URL, append([]string{"GET /healthz", "GET /no-such-page", "get /", "DELETE /login"}, oddLines(98)...))
	// The runtime's own series (go_*) change width as the process collects garbage, whatever the
	// requests: a collection before each scrape puts them in the same state.
	runtime.GC()
	before, seriesBefore := app.scrapeText(t)

	lines := oddLines(1000)
	for i := 0; i < len(lines); i += 250 {
		rawRequests(t, app.URL, lines[i:i+250])
	}
	runtime.GC()
	after, seriesAfter := app.scrapeText(t)

	if seriesAfter != seriesBefore {
		t.Errorf("the scrape had %d series before a thousand made-up methods and paths, %d after", seriesBefore, seriesAfter)
	}
	if grew := float64(len(after)-len(before)) / float64(len(before)); grew > 0.01 || grew < -0.01 {
		t.Errorf("the scrape was %d bytes before a thousand made-up methods and paths, %d after (%+.1f%%), want within 1%%",
			len(before), len(after), 100*grew)
	}
	t.Logf("scrape: %d bytes and %d series before, %d bytes and %d series after", len(before), seriesBefore, len(after), seriesAfter)

	// Every method label is one of the standard methods or "other", every route one the desk
	// registered or "unmatched".
	families := app.scrape(t)
	standard := map[string]bool{"GET": true, "HEAD": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true,
		"OPTIONS": true, "CONNECT": true, "TRACE": true, "other": true}
	var strays []string
	for _, m := range families["handoffdesk_http_request_duration_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "method" && !standard[l.GetValue()] ||
				l.GetName() == "route" && l.GetValue() != "unmatched" && !strings.HasPrefix(l.GetValue(), "/") {
				strays = append(strays, fmt.Sprintf("%s=%.40q", l.GetName(), l.GetValue()))
			}
		}
	}
	if len(strays) > 0 {
		t.Errorf("%d label values are neither a standard method, a route template, other nor unmatched; the first: %s",
			len(strays), strays[0])
	}
	// "get" is not GET (methods are case-sensitive), and a method a route does not take is answered
	// by the desk's not-found route, as a path no route takes is.
	for _, c := range []struct {
		labels map[string]string
		want   float64
	}{
		{map[string]string{"method": "other", "route": "unmatched", "code": "404"}, 1099},
		{map[string]string{"method": "GET", "route": "unmatched", "code": "404"}, 1},
		{map[string]string{"method": "DELETE", "route": "unmatched", "code": "404"}, 1},
		{map[string]string{"method": "GET", "route": "/healthz", "code": "200"}, 1},
	} {
		if v := value(families, "handoffdesk_http_request_duration_seconds", c.labels); v != c.want {
			t.Errorf("requests%v = %v, want %v", c.labels, v, c.want)
		}
	}
}
