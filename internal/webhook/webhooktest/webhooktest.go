// Package webhooktest checks webhook deliveries the way bots do, with code that is not the desk's:
// the Standard Webhooks reference library (npm standardwebhooks, pinned in package.json), run by
// node. A missing node or library fails the test: `npm install` at the repository's root.
package webhooktest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// LibraryVersion is the version of npm's standardwebhooks that package.json pins.
const LibraryVersion = "1.1.1"

// Check is one delivery as a bot received it, and the secret the bot holds.
type Check struct {
	Secret string
	// Raw hands the secret to the library as raw key bytes ({format: "raw"}), as a bot holding a
	// secret issued before the desk spoke Standard Webhooks does.
	Raw    bool
	Header http.Header
	Body   []byte
}

// StandardVerify verifies each delivery with the reference library's Webhook.verify and returns,
// per check in order, "ok" or the library's reason for refusing it.
func StandardVerify(t testing.TB, checks []Check) []string {
	t.Helper()
	type input struct {
		Secret  string            `json:"secret"`
		Raw     bool              `json:"raw"`
		Headers map[string]string `json:"headers"`
		Body    []byte            `json:"body"`
	}
	in := make([]input, len(checks))
	for i, c := range checks {
		headers := map[string]string{}
		for name, values := range c.Header {
			headers[strings.ToLower(name)] = strings.Join(values, ", ")
		}
		in[i] = input{Secret: c.Secret, Raw: c.Raw, Headers: headers, Body: c.Body}
	}
	raw, err := json.Marshal(in) //nolint:gosec // G117: the test's secrets go to the verifier on its stdin, which is the point.
	if err != nil {
		t.Fatal(err)
	}
	_, here, _, _ := runtime.Caller(0)
	cmd := exec.CommandContext(t.Context(), "node", filepath.Join(filepath.Dir(here), "verify.cjs")) //nolint:gosec // G204: node and this package's own script.
	cmd.Stdin = bytes.NewReader(raw)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node with npm's standardwebhooks (run `npm install` at the repository's root): %v\n%s", err, stderr.String())
	}
	var got struct {
		Version string   `json:"version"`
		Results []string `json:"results"`
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Results) != len(checks) {
		t.Fatalf("the verifier answered %q (%v), want %d results", out, err, len(checks))
	}
	if got.Version != LibraryVersion {
		t.Fatalf("npm's standardwebhooks is %s here, want %s as package.json pins: run `npm install`", got.Version, LibraryVersion)
	}
	return got.Results
}

// Receiver is a bot's webhook endpoint on 127.0.0.1 that keeps every delivery, answering 200.
type Receiver struct {
	URL      string
	received chan Check
}

// NewReceiver starts a receiver, stopped with the test.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{received: make(chan Check, 100)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		r.received <- Check{Header: req.Header.Clone(), Body: body}
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL + "/hooks"
	return r
}

// Await returns the next delivery of event about handoffID, passing over others, and fails the
// test if none comes within 30 seconds.
func (r *Receiver) Await(t testing.TB, handoffID, event string) Check {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case d := <-r.received:
			var got struct {
				HandoffID string `json:"handoff_id"`
				Event     string `json:"event"`
			}
			if json.Unmarshal(d.Body, &got) == nil && got.HandoffID == handoffID && got.Event == event {
				return d
			}
		case <-deadline:
			t.Fatalf("the bot never heard %s of %s", event, handoffID)
		}
	}
}
