package server_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// idleBadge finds the customer idle badge on a page: whether it is there, and whether it shows.
var idleBadge = regexp.MustCompile(`<span [^>]*data-idle-at="\d+"( hidden)? data-testid="customer-idle">\s*customer idle: no answer since <time datetime="([^"]+)"`)

// idleOn reads the badge of a page: there says the customer is quiet, shown that they are idle,
// since when they have not answered.
func idleOn(page string) (there, shown bool, since string) {
	m := idleBadge.FindStringSubmatch(page)
	if m == nil {
		return false, false, ""
	}
	return true, m[1] == "", m[2]
}

// The customer who goes quiet, on a running desk: My work and the package show them idle once
// they have left the agent's reply unanswered for the queue's customer_idle, and not while they
// wait for the desk; a message from them drops the badge; with customer_gone set, the sweeper
// resolves the package as customer_unreachable, the bot hears it and the agent's My work lets it
// go. The desk runs on the wall clock here, so the queue's times are seconds; the rules' edges
// are driven by the test clock in internal/actions.
func TestCustomerGoesIdleThenGone(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	ctx := t.Context()
	if _, err := d.DB.Exec(ctx, `UPDATE queues SET customer_idle = '2 seconds' WHERE name = 'billing_t2'`); err != nil {
		t.Fatal(err)
	}
	pkg := d.URL + "/handoffs/" + d.id
	mine := d.URL + "/mine"
	d.act(t, "accept", nil)
	expect(t, "the customer's message", d.post(t, map[string]any{"message_id": "m1", "role": "user", "text": "Where is my refund?"}),
		http.StatusCreated)
	time.Sleep(2 * time.Second) // longer than customer_idle: a customer waiting for the desk is still not idle
	for _, u := range []string{mine, pkg} {
		if there, _, _ := idleOn(mustGet(t, d.agent, u)); there {
			t.Fatalf("%s shows a customer who waits for the desk's answer as quiet", u)
		}
	}

	d.act(t, "reply", url.Values{"text": {"It goes back to the card you paid with."}})
	replied := d.thread(t, 1)
	if len(replied) != 1 {
		t.Fatalf("the thread after the reply: %+v", replied)
	}
	for _, u := range []string{mine, pkg} {
		waitFor(t, u+" to show the customer idle", func() bool {
			time.Sleep(100 * time.Millisecond)
			there, shown, since := idleOn(mustGet(t, d.agent, u))
			if there && since != replied[0].At.UTC().Format(time.RFC3339) {
				t.Fatalf("%s: the customer is quiet since %s, want since the reply at %s", u, since, replied[0].At)
			}
			return shown
		})
	}

	expect(t, "the customer answers", d.post(t, map[string]any{"message_id": "m2", "role": "user", "text": "Thanks, and when?"}),
		http.StatusCreated)
	for _, u := range []string{mine, pkg} {
		if there, _, _ := idleOn(mustGet(t, d.agent, u)); there {
			t.Errorf("%s still shows the customer quiet after they wrote", u)
		}
	}

	if _, err := d.DB.Exec(ctx, `UPDATE queues SET customer_gone = '3 seconds' WHERE name = 'billing_t2'`); err != nil {
		t.Fatal(err)
	}
	d.act(t, "reply", url.Values{"text": {"Within five days."}})
	hook := d.waitForHook(t, "resolved")
	if hook["outcome"] != "customer_unreachable" || !strings.Contains(hook["note"].(string), "customer gone (3s)") {
		t.Errorf("the resolved webhook: %v; want outcome customer_unreachable and the desk's note", hook)
	}
	waitFor(t, "My work to let the package go", func() bool {
		time.Sleep(100 * time.Millisecond)
		return !strings.Contains(mustGet(t, d.agent, mine), d.id)
	})
	page := mustGet(t, d.agent, pkg)
	if there, _, _ := idleOn(page); there || !strings.Contains(page, "Resolved: customer unreachable") {
		t.Errorf("the resolved package's page: a badge %v, want none and the timeline's resolution in words", there)
	}
}
