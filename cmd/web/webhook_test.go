package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

		req, err := http.NewRequest(http.MethodPost, base+"/api/v1/handoffs", bytes.NewReader(harbor))
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
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /api/v1/handoffs = %d, want 201", resp.StatusCode)
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
