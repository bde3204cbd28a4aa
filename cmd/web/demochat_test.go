package main

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// `make run`'s demo chat: seed-demo points the demo bot key's webhooks at the chat (on a database
// seeded before, too) and prints the signing secret; serve -demo-chat serves the chat, whose bot
// hands off with that key and hears the desk's webhooks, signed with that secret.
func TestServeServesTheDemoChatWithTheSeededKey(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	chatAddr := ln.Addr().String()
	ln.Close()
	getenv := env(t, "WEBHOOK_ALLOW_PRIVATE", "1")
	if out, err := runCommand(t, getenv, "seed-demo"); err != nil || !strings.Contains(out, "http://127.0.0.1:8082/webhook") {
		t.Fatalf("seed-demo: %v\n%s", err, out)
	}
	out, err := runCommand(t, getenv, "seed-demo", "-demo-chat", chatAddr)
	if err != nil || !strings.Contains(out, "http://"+chatAddr+"/webhook, signed with "+demoWebhookSecret) {
		t.Fatalf("seed-demo again, for a chat on %s: %v\n%s", chatAddr, err, out)
	}
	// The seeded history's webhooks are the demo's past: settled without a request, none left
	// for the chat to hear about packages it never held.
	conn, err := pgx.Connect(t.Context(), getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	var pending, settled int
	err = conn.QueryRow(t.Context(), `SELECT count(*) FILTER (WHERE state = 'pending'), count(*) FILTER (WHERE state = 'no_endpoint') FROM webhook_outbox`).
		Scan(&pending, &settled)
	conn.Close(context.Background())
	if err != nil || pending != 0 || settled == 0 {
		t.Errorf("after seed-demo: %d webhooks pending, %d settled without an endpoint (%v); want none pending", pending, settled, err)
	}
	if _, err := runCommand(t, getenv, "seed-demo", "-demo-chat", "192.0.2.7:8082"); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("seed-demo for a chat elsewhere: %v", err)
	}
	logs := &syncBuffer{}
	base, _ := startServeTo(t, getenv, logs, "-demo-chat", chatAddr)
	if !strings.Contains(logs.String(), "url=http://"+chatAddr) {
		t.Errorf("serve does not print the demo chat's address:\n%s", logs)
	}

	jar, _ := cookiejar.New(nil)
	customer := &http.Client{Jar: jar}
	chatURL := "http://" + chatAddr
	resp, err := customer.Get(chatURL + "/")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "sign in as agent@example.com, password "+demoPassword) {
		t.Errorf("the chat page does not say how to sign in at the desk:\n%s", page)
	}
	u, _ := url.Parse(chatURL)
	var chatID string
	for _, c := range jar.Cookies(u) {
		if c.Name == "demo_chat" {
			chatID = c.Value
		}
	}
	if resp.StatusCode != http.StatusOK || chatID == "" {
		t.Fatalf("the chat page: %d, chat %q", resp.StatusCode, chatID)
	}
	resp, err = customer.Post(chatURL+"/say", "application/json", strings.NewReader(`{"text":"Can I talk to a human?"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("say: %d", resp.StatusCode)
	}
	waitForChatLine := func(who, text string) {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		var lines []map[string]any
		for time.Now().Before(deadline) {
			resp, err := customer.Get(chatURL + "/lines")
			if err != nil {
				t.Fatal(err)
			}
			var body struct{ Lines []map[string]any }
			err = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			lines = body.Lines
			for _, l := range lines {
				if l["who"] == who && strings.Contains(l["text"].(string), text) {
					return
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("no %s line saying %q: %v", who, text, lines)
	}
	waitForChatLine("bot", "passing you to a person")

	agent := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	agent.Jar, _ = cookiejar.New(nil)
	for _, step := range []struct{ path string }{{"/login"}, {"/handoffs/demo_" + chatID + "_1/accept"}} {
		resp, err := agent.PostForm(base+step.path, url.Values{"email": {"agent@example.com"}, "password": {demoPassword}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("POST %s: %d", step.path, resp.StatusCode)
		}
	}
	// The accept reaches the chat only as a webhook signed with the seeded secret.
	waitForChatLine("notice", "Alex Agent from the support team joined")
}
