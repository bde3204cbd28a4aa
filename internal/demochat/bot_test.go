package demochat

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"strings"
	"testing"
)

// The bot's rules, as the chat page's introduction tells a newcomer: two words hand off, a few
// topics it answers, and a draft for each later message.
func TestRules(t *testing.T) {
	for text, want := range map[string]string{
		"I want a REFUND!": "policy_boundary", "Refunds?": "policy_boundary", "can I talk to a human": "user_request",
		"what are your hours": "", "hello": "",
	} {
		if got := handoffTrigger(text); got != want {
			t.Errorf("handoffTrigger(%q) = %q, want %q", text, got, want)
		}
	}
	for text, want := range map[string]string{
		"When are you open?": "Monday to Friday", "opening hours": "Monday to Friday", "How much does the Pro plan cost": "Basic is $9",
		"Do you ship to Spain?": "Orders ship", "Hi": "I'm the demo bot", "this and that": "I can answer questions",
	} {
		if got := answer(text); !strings.Contains(got, want) {
			t.Errorf("answer(%q) = %q, want it to say %q", text, got, want)
		}
	}
	for text, want := range map[string]string{
		"Which card?": "card you paid with", "How long does it take?": "3 to 5 business days", "thanks!": "You're welcome",
		"It's order 1042": "found the order", "hmm": fallbackDraft,
	} {
		if got := draftFor(text); !strings.Contains(got, want) {
			t.Errorf("draftFor(%q) = %q, want it to say %q", text, got, want)
		}
	}
}

// What the chat cannot take is refused, saying what was wrong, before the bot sees it.
func TestSayRefusesWhatItCannotTake(t *testing.T) {
	srv := httptest.NewServer(New(Config{Queue: "billing_t2"}))
	defer srv.Close()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	post := func(contentType, payload string) (int, string) {
		t.Helper()
		resp, err := c.Post(srv.URL+"/say", contentType, strings.NewReader(payload))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if status, body := post("application/json", `{"text":"hi"}`); status != http.StatusBadRequest || !strings.Contains(body, "open the chat page first") {
		t.Errorf("without a chat: %d %s", status, body)
	}
	resp, err := c.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("the page's CSP is %q", csp)
	}
	for _, c := range []struct {
		contentType, body string
		status            int
		want              string
	}{
		{"application/x-www-form-urlencoded", "text=hi", http.StatusUnsupportedMediaType, "application/json"},
		{"application/json", `{"text":`, http.StatusBadRequest, "not JSON"},
		{"application/json", `{"text":"   "}`, http.StatusUnprocessableEntity, "text: the message is empty"},
		{"application/json", `{"text":"` + strings.Repeat("a", MaxText+1) + `"}`, http.StatusUnprocessableEntity, "at most 2000"},
	} {
		if status, body := post(c.contentType, c.body); status != c.status || !strings.Contains(body, c.want) {
			t.Errorf("%s %.40s: %d %s, want %d saying %q", c.contentType, c.body, status, body, c.status, c.want)
		}
	}
	// A webhook without a valid signature is refused.
	resp, err = http.Post(srv.URL+"/webhook", "application/json", strings.NewReader(`{"event":"reply"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unsigned webhook: %d", resp.StatusCode)
	}
}
