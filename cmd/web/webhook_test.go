package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/webhook/webhooktest"
)

var keyLine = regexp.MustCompile(`key:\s+(hdk_\S+)`)

func TestAllowPrivateWebhooksSetting(t *testing.T) {
	t.Parallel()
	const local, plain = "https://localhost:9000/hooks", "http://bot.example.com/hooks"
	strict := env(t)
	if _, err := runCommand(t, strict, "queue", "add", "--name", "billing_t2"); err != nil {
		t.Fatal(err)
	}
	_, err := runCommand(t, strict, "apikey", "add", "--name", "local", "--queues", "billing_t2", "--webhook-url", local)
	if err == nil || !strings.Contains(err.Error(), "localhost resolves to 127.0.0.1, a loopback address") ||
		!strings.Contains(err.Error(), "WEBHOOK_ALLOW_PRIVATE=1") {
		t.Errorf("apikey add with a loopback webhook url: %v, want a refusal naming the address and WEBHOOK_ALLOW_PRIVATE=1", err)
	}
	_, err = runCommand(t, strict, "apikey", "add", "--name", "plain", "--queues", "billing_t2", "--webhook-url", plain)
	if err == nil || !strings.Contains(err.Error(), "https only") || !strings.Contains(err.Error(), "WEBHOOK_ALLOW_PRIVATE=1") {
		t.Errorf("apikey add with a plain http webhook url: %v, want a refusal naming https and WEBHOOK_ALLOW_PRIVATE=1", err)
	}

	allowed := env(t, "WEBHOOK_ALLOW_PRIVATE", "1")
	if _, err := runCommand(t, allowed, "queue", "add", "--name", "billing_t2"); err != nil {
		t.Fatal(err)
	}
	for name, url := range map[string]string{"local": local, "plain": plain} {
		if out, err := runCommand(t, allowed, "apikey", "add", "--name", name, "--queues", "billing_t2", "--webhook-url", url); err != nil || !keyLine.MatchString(out) {
			t.Errorf("apikey add %s with WEBHOOK_ALLOW_PRIVATE=1: %v\n%s", url, err, out)
		}
	}

	// The setting is read before the database is opened: an unreachable one is never asked.
	bad := func(k string) string {
		return map[string]string{"WEBHOOK_ALLOW_PRIVATE": "sometimes", "ADDR": "127.0.0.1:0",
			"DATABASE_URL": "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=2"}[k]
	}
	for _, args := range [][]string{{"apikey", "add", "--name", "k", "--queues", "billing_t2"}, {"serve"}} {
		if _, err := runCommand(t, bad, args...); err == nil || !strings.HasPrefix(err.Error(), `WEBHOOK_ALLOW_PRIVATE: want 1 or 0, not "sometimes"`) {
			t.Errorf("web %s with WEBHOOK_ALLOW_PRIVATE=sometimes: %v, want an error naming the setting", strings.Join(args, " "), err)
		}
	}
}

// `web serve` hands WEBHOOK_ALLOW_PRIVATE to its deliverer: a bot on 127.0.0.1 hears of a new
// package only when the setting allows it.
func TestServeDeliversToPrivateWebhooksOnlyWhenAllowed(t *testing.T) {
	t.Parallel()
	harbor, err := os.ReadFile("../../internal/handoff/testdata/harbor-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, allow := range []string{"", "1"} {
		received := make(chan string, 10)
		bot := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			received <- r.Header.Get("X-Handoff-Event")
		}))
		t.Cleanup(bot.Close)
		getenv := env(t, "WEBHOOK_ALLOW_PRIVATE", allow)
		if _, err := runCommand(t, getenv, "seed-demo"); err != nil {
			t.Fatal(err)
		}
		// The key is made while private targets are allowed, as if its name had resolved to a
		// public address then: the dial is what must refuse it.
		allowing := func(k string) string {
			if k == "WEBHOOK_ALLOW_PRIVATE" {
				return "1"
			}
			return getenv(k)
		}
		// Without the setting, plain http is refused before any dial, so the URL says https
		// there: it is the dial to 127.0.0.1 that must be refused.
		hookURL := bot.URL + "/hooks"
		if allow == "" {
			hookURL = strings.Replace(hookURL, "http://", "https://", 1)
		}
		out, err := runCommand(t, allowing, "apikey", "add", "--name", "local-bot", "--queues", "billing_t2", "--webhook-url", hookURL)
		if err != nil {
			t.Fatal(err)
		}
		key := keyLine.FindStringSubmatch(out)[1]
		base, _ := startServe(t, getenv)

		if status := submit(t, base, key, harbor); status != http.StatusCreated {
			t.Fatalf("POST /api/v1/handoffs = %d, want 201", status)
		}

		if allow == "1" {
			// The package is warm and nobody is online, so the bot also hears warm_timeout; the
			// deliverer sends a key's webhooks side by side, in either order.
			var heard []string
			deadline := time.After(30 * time.Second)
			for !slices.Contains(heard, "queued") {
				select {
				case event := <-received:
					heard = append(heard, event)
				case <-deadline:
					t.Fatalf("with WEBHOOK_ALLOW_PRIVATE=1 the bot on 127.0.0.1 heard %v, never queued", heard)
				}
			}
			continue
		}
		lastError := waitForDeliveryError(t, getenv("DATABASE_URL"))
		if !strings.Contains(lastError, "a loopback address") {
			t.Errorf("without WEBHOOK_ALLOW_PRIVATE the delivery failed with %q, want the loopback refusal", lastError)
		}
		if len(received) != 0 {
			t.Errorf("without WEBHOOK_ALLOW_PRIVATE the bot on 127.0.0.1 received %d requests, want none", len(received))
		}
	}
}

// waitForDeliveryError waits for the first failed delivery in the database and returns its error.
func waitForDeliveryError(t *testing.T, databaseURL string) string {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), databaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var lastError string
		err := conn.QueryRow(t.Context(), `SELECT coalesce(max(last_error), '') FROM webhook_outbox`).Scan(&lastError)
		if err != nil {
			t.Fatal(err)
		}
		if lastError != "" {
			return lastError
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no delivery failed")
	return ""
}

// A bot that verifies webhooks with the Standard Webhooks reference library, holding the secret
// `web apikey add` and `web apikey rotate` print, accepts every delivery of a served desk: before a
// rotation, during its overlap with either secret, and after it with the new one only.
func TestServeSignsWebhooksAsStandardWebhooksLibrariesVerify(t *testing.T) {
	t.Parallel()
	bot := webhooktest.NewReceiver(t)
	getenv := env(t, "WEBHOOK_ALLOW_PRIVATE", "1")
	if _, err := runCommand(t, getenv, "queue", "add", "--name", "billing_t2"); err != nil {
		t.Fatal(err)
	}
	out, err := runCommand(t, getenv, "apikey", "add", "--name", "bot", "--queues", "billing_t2", "--webhook-url", bot.URL)
	if err != nil {
		t.Fatal(err)
	}
	key, first := keyLine.FindStringSubmatch(out)[1], secretLine.FindStringSubmatch(out)[1]
	base, _ := startServe(t, getenv)
	harbor, err := os.ReadFile("../../internal/handoff/testdata/harbor-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	// delivered sends a cold package of its own and returns the webhook that says it is queued.
	delivered := func(id string) webhooktest.Check {
		t.Helper()
		var pkg map[string]any
		if err := json.Unmarshal(harbor, &pkg); err != nil {
			t.Fatal(err)
		}
		pkg["handoff_id"], pkg["transfer_mode"] = id, "cold"
		pkg["contact"].(map[string]any)["id"] = "cust_" + id
		body, _ := json.Marshal(pkg)
		if status := submit(t, base, key, body); status != http.StatusCreated {
			t.Fatalf("POST /api/v1/handoffs %s = %d, want 201", id, status)
		}
		return bot.Await(t, id, "queued")
	}

	before := delivered("ho_before")
	out, err = runCommand(t, getenv, "apikey", "rotate", "--name", "bot", "--overlap", "2h")
	if err != nil || secretLine.FindStringSubmatch(out) == nil {
		t.Fatalf("apikey rotate: %v, printed %q", err, out)
	}
	second := secretLine.FindStringSubmatch(out)[1]
	during := delivered("ho_during")
	// The overlap ends: its passing by the clock is the webhook package's test; here the desk must
	// see it end without a restart.
	db, err := pgx.Connect(t.Context(), getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	if _, err := db.Exec(t.Context(), `UPDATE api_keys SET webhook_secret_previous_until = now() WHERE name = 'bot'`); err != nil {
		t.Fatal(err)
	}
	after := delivered("ho_after")

	tampered := before
	tampered.Body = append(bytes.Clone(before.Body[:len(before.Body)-1]), []byte(` }`)...)
	checks := []struct {
		what   string
		secret string
		d      webhooktest.Check
		ok     bool
	}{
		{"before the rotation, the first secret", first, before, true},
		{"before the rotation, a tampered body", first, tampered, false},
		{"during the overlap, the first secret", first, during, true},
		{"during the overlap, the new secret", second, during, true},
		{"after the overlap, the new secret", second, after, true},
		{"after the overlap, the first secret", first, after, false},
	}
	var in []webhooktest.Check
	for _, c := range checks {
		c.d.Secret = c.secret
		in = append(in, c.d)
	}
	for i, got := range webhooktest.StandardVerify(t, in) {
		if c := checks[i]; (got == "ok") != c.ok {
			t.Errorf("%s: the library says %q, want it to accept: %v\n%v", c.what, got, c.ok, c.d.Header)
		}
	}
	// The desk's own headers go on during their deprecation period.
	for _, d := range []webhooktest.Check{before, during, after} {
		for _, h := range []string{"X-Handoff-Timestamp", "X-Handoff-Webhook-Signature", "X-Handoff-Signature"} {
			if d.Header.Get(h) == "" {
				t.Errorf("a delivery lacks %s, deprecated but still sent", h)
			}
		}
	}
}

// submit posts a package to a served desk's bot API with key and returns the answer's status.
func submit(t *testing.T, base, key string, pkg []byte) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/handoffs", bytes.NewReader(pkg))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
