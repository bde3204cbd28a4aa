package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/logtest"
	"github.com/handoffdesk/desk/internal/webhook"
	"github.com/handoffdesk/desk/internal/webhook/webhooktest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// within fails unless got is want give or take tolerance; the database keeps microseconds.
func within(t *testing.T, what string, got, want time.Time, tolerance time.Duration) {
	t.Helper()
	if d := got.Sub(want); d < -tolerance || d > tolerance {
		t.Errorf("%s = %s, want %s ± %s", what, got, want, tolerance)
	}
}

// verifies is docs/bots.md's recipe for bot authors (the deprecated headers): HMAC-SHA256 under the webhook secret of the
// X-Handoff-Timestamp header, a dot and the raw body, compared in constant time with each v1 entry
// of X-Handoff-Webhook-Signature.
func verifies(secret, timestamp string, body []byte, header string) bool {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp + "." + string(body)))
	want := []byte(hex.EncodeToString(mac.Sum(nil)))
	for entry := range strings.SplitSeq(header, ",") {
		if sig, ok := strings.CutPrefix(strings.TrimSpace(entry), "v1="); ok && hmac.Equal([]byte(sig), want) {
			return true
		}
	}
	return false
}

// verifiesStandard is docs/bots.md's Standard Webhooks recipe without a library: HMAC-SHA256 under
// the base64 key after "whsec_" of the Webhook-Id, the Webhook-Timestamp and the body, compared in
// constant time with each v1 entry of Webhook-Signature; now is the bot's clock.
func verifiesStandard(secret string, h http.Header, body []byte, now time.Time) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	ts, tsErr := strconv.ParseInt(h.Get("Webhook-Timestamp"), 10, 64)
	if err != nil || tsErr != nil || now.Sub(time.Unix(ts, 0)).Abs() > 5*time.Minute {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.Get("Webhook-Id") + "." + h.Get("Webhook-Timestamp") + "."))
	mac.Write(body)
	want := []byte(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	for entry := range strings.FieldsSeq(h.Get("Webhook-Signature")) {
		if sig, ok := strings.CutPrefix(entry, "v1,"); ok && hmac.Equal([]byte(sig), want) {
			return true
		}
	}
	return false
}

// legacySignature is X-Handoff-Signature as bots verified it before v1: the body alone.
func legacySignature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func TestSignatureCoversTheTimestamp(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusOK))
	f.enqueue(t, "h1", "accepted")
	deliverDue(t, f.deliverer(t, webhook.Options{}))
	got := f.bot.receipts()
	if len(got) != 1 {
		t.Fatalf("bot received %d requests, want 1", len(got))
	}
	h, body := got[0].header, got[0].body
	timestamp, signature := h.Get("X-Handoff-Timestamp"), h.Get("X-Handoff-Webhook-Signature")
	if !verifies(f.key.WebhookSecret, timestamp, body, signature) {
		t.Fatalf("signature %q does not verify for timestamp %s", signature, timestamp)
	}
	ts, err := strconv.ParseInt(timestamp, 10, 64)
	if err != nil {
		t.Fatalf("X-Handoff-Timestamp %q: %v", timestamp, err)
	}
	for name, tc := range map[string]struct {
		secret, timestamp string
		body              []byte
	}{
		"replayed an hour later": {f.key.WebhookSecret, strconv.FormatInt(ts+3600, 10), body},
		"timestamp a second off": {f.key.WebhookSecret, strconv.FormatInt(ts-1, 10), body},
		"tampered body":          {f.key.WebhookSecret, timestamp, append(append([]byte(nil), body...), ' ')},
		"another key's secret":   {"whsec_other", timestamp, body},
	} {
		if verifies(tc.secret, tc.timestamp, tc.body, signature) {
			t.Errorf("%s: the signature still verifies", name)
		}
	}
}

func TestDeliverySignedWithHeaders(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusOK))
	cet := time.FixedZone("CET", 3600)
	enqueue(t, f.db, webhook.Event{
		HandoffID: "h1", APIKeyID: f.key.ID, Event: "resolved", Status: "resolved", Queue: "q1",
		Outcome: "refunded", Assignee: "Ada", OccurredAt: time.Date(2026, 3, 1, 13, 0, 0, 0, cet),
	})

	d := f.deliverer(t, webhook.Options{})
	if n := deliverDue(t, d); n != 1 {
		t.Fatalf("claimed %d rows, want 1", n)
	}
	got := f.bot.receipts()
	if len(got) != 1 {
		t.Fatalf("bot received %d requests, want 1", len(got))
	}
	h, body := got[0].header, got[0].body
	if !verifies(f.key.WebhookSecret, h.Get("X-Handoff-Timestamp"), body, h.Get("X-Handoff-Webhook-Signature")) {
		t.Errorf("X-Handoff-Webhook-Signature %q does not verify with the key's secret by the README's recipe", h.Get("X-Handoff-Webhook-Signature"))
	}
	if h.Get("X-Handoff-Signature") != legacySignature(f.key.WebhookSecret, body) {
		t.Errorf("X-Handoff-Signature %q is not the body's signature that bots verified before v1", h.Get("X-Handoff-Signature"))
	}
	var p map[string]string
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatalf("body %s: %v", body, err)
	}
	want := map[string]string{
		"event_id": p["event_id"], "event": "resolved", "handoff_id": "h1", "status": "resolved", "queue": "q1",
		"occurred_at": "2026-03-01T12:00:00Z", "outcome": "refunded", "assignee": "Ada",
	}
	if len(p) != len(want) {
		t.Errorf("body %s: want exactly the keys of %v (empty ones omitted)", body, want)
	}
	for k, v := range want {
		if p[k] != v {
			t.Errorf("body %s = %q, want %q", k, p[k], v)
		}
	}
	for name, want := range map[string]string{
		"Content-Type":        "application/json",
		"User-Agent":          "HandoffDesk-Webhook/1",
		"X-Handoff-Event-Id":  p["event_id"],
		"X-Handoff-Event":     "resolved",
		"X-Handoff-Timestamp": strconv.FormatInt(f.clock.Now().Unix(), 10),
	} {
		if h.Get(name) != want || want == "" {
			t.Errorf("header %s = %q, want %q", name, h.Get(name), want)
		}
	}

	row := f.only(t, "h1")
	if row.State != webhook.StateDelivered || row.Attempts != 1 || row.LastStatus != 200 || row.EventID != p["event_id"] {
		t.Errorf("row = %+v, want delivered on attempt 1 with status 200", row)
	}
	if row.DeliveredAt == nil {
		t.Fatal("delivered_at not set")
	}
	within(t, "delivered_at", *row.DeliveredAt, f.clock.Now(), time.Millisecond)
	if n := deliverDue(t, d); n != 0 {
		t.Errorf("a delivered row was claimed again (%d)", n)
	}
}

func TestFailureIsRetriedAfterBackoff(t *testing.T) {
	t.Parallel()
	f := setup(t, func(n int, _ *http.Request) int {
		if n == 1 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	f.enqueue(t, "h1", "accepted")
	const base = 10 * time.Second
	d := f.deliverer(t, webhook.Options{BackoffBase: base})
	failedAt := f.clock.Now()

	deliverDue(t, d)
	row := f.only(t, "h1")
	if row.State != webhook.StatePending || row.Attempts != 1 || row.LastStatus != 500 {
		t.Fatalf("after a 500: row = %+v, want pending after attempt 1 with status 500", row)
	}
	// ±20% jitter around the base.
	within(t, "next_attempt_at", row.NextAttemptAt, failedAt.Add(base), base/5)

	f.clock.Advance(base * 7 / 10)
	if n := deliverDue(t, d); n != 0 {
		t.Fatalf("claimed %d rows before the backoff ran out", n)
	}
	f.clock.Advance(base * 6 / 10)
	if n := deliverDue(t, d); n != 1 {
		t.Fatalf("claimed %d rows after the backoff, want 1", n)
	}
	row = f.only(t, "h1")
	if row.State != webhook.StateDelivered || row.Attempts != 2 || row.LastStatus != 200 || row.LastError != "" {
		t.Errorf("after a 200: row = %+v, want delivered on attempt 2", row)
	}
	got := f.bot.receipts()
	if len(got) != 2 || got[0].header.Get("X-Handoff-Event-Id") != got[1].header.Get("X-Handoff-Event-Id") {
		t.Errorf("bot received %d requests, want the same event twice", len(got))
	}
}

func TestDeadAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusServiceUnavailable))
	f.enqueue(t, "h1", "accepted")
	d := f.deliverer(t, webhook.Options{MaxAttempts: 3, BackoffBase: time.Second})

	for range 3 {
		if n := deliverDue(t, d); n != 1 {
			t.Fatalf("claimed %d rows, want 1", n)
		}
		f.clock.Advance(time.Minute)
	}
	row := f.only(t, "h1")
	if row.State != webhook.StateDead || row.Attempts != 3 || row.LastStatus != 503 {
		t.Errorf("row = %+v, want dead after 3 attempts", row)
	}
	f.clock.Advance(2 * time.Hour)
	if n := deliverDue(t, d); n != 0 || len(f.bot.receipts()) != 3 {
		t.Errorf("a dead row was claimed again (%d) or sent more than 3 times (%d)", n, len(f.bot.receipts()))
	}
}

func TestGoneIsDeadAtOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusGone))
	f.enqueue(t, "h1", "accepted")
	d := f.deliverer(t, webhook.Options{})

	deliverDue(t, d)
	row := f.only(t, "h1")
	if row.State != webhook.StateDead || row.Attempts != 1 || row.LastStatus != 410 {
		t.Errorf("row = %+v, want dead after attempt 1 with status 410", row)
	}
	f.clock.Advance(2 * time.Hour)
	if n := deliverDue(t, d); n != 0 {
		t.Errorf("a dead row was claimed again (%d)", n)
	}
}

func TestRedirectIsAFailureNotFollowed(t *testing.T) {
	t.Parallel()
	f := setup(t, func(_ int, r *http.Request) int {
		if r.URL.Path == "/followed" {
			return http.StatusOK
		}
		return http.StatusFound
	})
	f.enqueue(t, "h1", "accepted")

	deliverDue(t, f.deliverer(t, webhook.Options{}))
	if got := len(f.bot.receipts()); got != 1 {
		t.Errorf("bot received %d requests, want 1 (redirect not followed)", got)
	}
	if row := f.only(t, "h1"); row.State != webhook.StatePending || row.LastStatus != 302 {
		t.Errorf("row = %+v, want pending with status 302", row)
	}
}

func TestNetworkErrorIsRecorded(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusOK))
	closed := f.apiKey(t, "gone-bot", "http://127.0.0.1:1/hook") // nothing listens on port 1
	enqueue(t, f.db, newEvent(closed.ID, "h1", "accepted"))

	deliverDue(t, f.deliverer(t, webhook.Options{}))
	row := f.only(t, "h1")
	if row.State != webhook.StatePending || row.LastStatus != 0 || row.LastError == "" {
		t.Errorf("row = %+v, want pending with the connection error", row)
	}
}

func TestKeyWithoutWebhookURLIsNoEndpoint(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusOK))
	silent := f.apiKey(t, "silent-bot", "")
	enqueue(t, f.db, newEvent(silent.ID, "h1", "accepted"))
	if row := f.only(t, "h1"); row.State != webhook.StateNoEndpoint {
		t.Errorf("row = %+v, want no_endpoint as written", row)
	}
	f.clock.Advance(time.Hour)
	if n := deliverDue(t, f.deliverer(t, webhook.Options{})); n != 0 || len(f.bot.receipts()) != 0 {
		t.Errorf("claimed %d rows and sent %d requests, want none", n, len(f.bot.receipts()))
	}
}

func TestWebhookURLRemovedBeforeDeliveryIsNoEndpoint(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusOK))
	key := f.apiKey(t, "other-bot", f.bot.server.URL+"/hook")
	enqueue(t, f.db, newEvent(key.ID, "h1", "accepted"))
	if _, err := f.db.Exec(t.Context(), `UPDATE api_keys SET webhook_url = NULL WHERE id = $1`, key.ID); err != nil {
		t.Fatal(err)
	}
	d := f.deliverer(t, webhook.Options{})

	if n := deliverDue(t, d); n != 1 {
		t.Fatalf("claimed %d rows, want 1", n)
	}
	if row := f.only(t, "h1"); row.State != webhook.StateNoEndpoint {
		t.Errorf("row = %+v, want no_endpoint", row)
	}
	f.clock.Advance(time.Hour)
	if n := deliverDue(t, d); n != 0 || len(f.bot.receipts()) != 0 {
		t.Errorf("claimed %d rows and sent %d requests, want none", n, len(f.bot.receipts()))
	}
}

func TestConcurrentDeliverersSendEachEventOnce(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusOK))
	const events = 200
	tx, err := f.db.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range events {
		enqueue(t, tx, newEvent(f.key.ID, "h"+strconv.Itoa(i), "queued"))
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for range 2 {
		d := f.deliverer(t, webhook.Options{})
		wg.Go(func() {
			for {
				n, err := d.DeliverDue(t.Context())
				if err != nil {
					errs <- err
					return
				}
				if n == 0 {
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	perEvent := map[string]int{}
	for _, r := range f.bot.receipts() {
		perEvent[r.header.Get("X-Handoff-Event-Id")]++
	}
	if len(perEvent) != events {
		t.Errorf("bot received %d distinct events, want %d", len(perEvent), events)
	}
	for id, n := range perEvent {
		if n != 1 {
			t.Errorf("event %s received %d times, want once", id, n)
		}
	}
	delivered, err := webhook.Deliveries(t.Context(), f.db, webhook.DeliveryFilter{State: webhook.StateDelivered, Limit: webhook.MaxDeliveryLimit})
	if err != nil {
		t.Fatal(err)
	}
	if len(delivered) != events {
		t.Errorf("%d rows delivered, want %d", len(delivered), events)
	}
}

func TestClaimAbandonedMidDeliveryIsRetriedAfterLease(t *testing.T) {
	t.Parallel()
	started := make(chan struct{})
	f := setup(t, func(n int, r *http.Request) int {
		if n == 1 {
			close(started)
			<-r.Context().Done() // hang until the deliverer goes away
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	f.enqueue(t, "h1", "accepted")
	const lease = 30 * time.Second
	claimedAt := f.clock.Now()

	// The first deliverer stops while its request is in flight: it claimed the row and will
	// never record what happened.
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := f.deliverer(t, webhook.Options{Lease: lease}).DeliverDue(ctx)
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the bot never received the first request")
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a pass stopped by its context: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the pass did not stop with its context")
	}
	row := f.only(t, "h1")
	if row.State != webhook.StatePending || row.Attempts != 1 || row.LastStatus != 0 {
		t.Fatalf("abandoned row = %+v, want pending, attempt 1, nothing recorded", row)
	}
	within(t, "lease end", row.NextAttemptAt, claimedAt.Add(lease), time.Millisecond)

	other := f.deliverer(t, webhook.Options{Lease: lease})
	f.clock.Advance(lease - time.Second)
	if n := deliverDue(t, other); n != 0 {
		t.Fatal("another deliverer claimed the row a second before the lease ran out")
	}
	f.clock.Advance(2 * time.Second)
	if n := deliverDue(t, other); n != 1 {
		t.Fatalf("claimed %d rows after the lease, want 1", n)
	}
	if row := f.only(t, "h1"); row.State != webhook.StateDelivered || row.Attempts != 2 {
		t.Errorf("row = %+v, want delivered on attempt 2", row)
	}
	got := f.bot.receipts()
	if len(got) != 2 || got[0].header.Get("X-Handoff-Event-Id") != got[1].header.Get("X-Handoff-Event-Id") {
		t.Errorf("bot received %d requests, want the same event twice (at-least-once)", len(got))
	}
}

func TestRunDeliversOnWake(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusOK))
	// A poll too slow to finish within the test: only Wake can explain a delivery.
	d := f.deliverer(t, webhook.Options{PollInterval: time.Hour})
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	f.enqueue(t, "h1", "accepted")
	d.Wake()
	// Wait for the recorded result, not the bot's receipt: stopping between the two is a
	// shutdown mid-delivery, which leaves the row to its lease.
	deadline := time.Now().Add(5 * time.Second)
	row := f.only(t, "h1")
	for row.State != webhook.StateDelivered && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
		row = f.only(t, "h1")
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil after its context ends", err)
	}
	if row.State != webhook.StateDelivered {
		t.Errorf("row = %+v, want delivered after Wake", row)
	}
}

func TestDeliveriesFilters(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusGone))
	other := f.apiKey(t, "other-bot", "")
	f.enqueue(t, "h1", "queued")
	f.enqueue(t, "h1", "accepted")
	deliverDue(t, f.deliverer(t, webhook.Options{})) // both dead
	f.enqueue(t, "h2", "queued")
	enqueue(t, f.db, newEvent(other.ID, "h3", "queued"))

	for name, tc := range map[string]struct {
		filter webhook.DeliveryFilter
		want   []string // handoff id/event, newest first
	}{
		"all":        {webhook.DeliveryFilter{}, []string{"h3/queued", "h2/queued", "h1/accepted", "h1/queued"}},
		"by key":     {webhook.DeliveryFilter{APIKeyID: other.ID}, []string{"h3/queued"}},
		"by state":   {webhook.DeliveryFilter{State: webhook.StateDead}, []string{"h1/accepted", "h1/queued"}},
		"by handoff": {webhook.DeliveryFilter{HandoffID: "h2"}, []string{"h2/queued"}},
		"limited":    {webhook.DeliveryFilter{Limit: 1}, []string{"h3/queued"}},
		"combined":   {webhook.DeliveryFilter{APIKeyID: f.key.ID, State: webhook.StatePending}, []string{"h2/queued"}},
	} {
		rows, err := webhook.Deliveries(t.Context(), f.db, tc.filter)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var got []string
		for _, r := range rows {
			got = append(got, r.HandoffID+"/"+r.Event)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", name, got, tc.want)
		}
	}

	for name, filter := range map[string]webhook.DeliveryFilter{
		"unknown state": {State: "lost"},
		"huge limit":    {Limit: webhook.MaxDeliveryLimit + 1},
	} {
		if _, err := webhook.Deliveries(t.Context(), f.db, filter); desk.ErrorCode(err) != desk.Invalid {
			t.Errorf("%s: err = %v, want invalid", name, err)
		}
	}
}

func TestLateResultDoesNotOverwriteANewerClaim(t *testing.T) {
	t.Parallel()
	started, release := make(chan struct{}), make(chan struct{})
	f := setup(t, func(n int, _ *http.Request) int {
		if n == 1 {
			close(started)
			<-release
			return http.StatusInternalServerError
		}
		return http.StatusServiceUnavailable
	})
	f.enqueue(t, "h1", "accepted")
	const lease, base = 30 * time.Second, 10 * time.Second
	opts := webhook.Options{Lease: lease, BackoffBase: base}

	// The first deliverer's request outlives its lease...
	done := make(chan error, 1)
	go func() {
		_, err := f.deliverer(t, opts).DeliverDue(t.Context())
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("the bot never received the first request")
	}
	// ...so a second one claims the row again and records its own failure.
	f.clock.Advance(lease + time.Second)
	if n := deliverDue(t, f.deliverer(t, opts)); n != 1 {
		t.Fatalf("claimed %d rows after the lease, want 1", n)
	}
	retryAt := f.clock.Now().Add(2 * base)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	row := f.only(t, "h1")
	if row.State != webhook.StatePending || row.Attempts != 2 || row.LastStatus != 503 {
		t.Errorf("row = %+v, want the second claim's 503 on attempt 2, not the late 500", row)
	}
	within(t, "next_attempt_at", row.NextAttemptAt, retryAt, 2*base/5)
}

// A database out of reach is an outage the deliverer rides out, pass after pass: warnings, not
// ERROR lines, so that a restart of PostgreSQL does not page anyone.
func TestDeliveryWarnsWhileTheDatabaseIsOutOfReach(t *testing.T) {
	t.Parallel()
	away, err := pgxpool.New(t.Context(), "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	defer away.Close()
	logs, logger := logtest.New()
	d := webhook.NewDeliverer(away, logger, webhook.Options{PollInterval: 10 * time.Millisecond})
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	rec := logs.Wait(t, "a failed pass", func(r slog.Record) bool { return strings.HasPrefix(r.Message, "webhook delivery pass") })
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run = %v, want nil after its context ends", err)
	}
	if rec.Level != slog.LevelWarn {
		t.Fatalf("a pass while the database is out of reach logged %s %q, want a warning", rec.Level, rec.Message)
	}
}

// Every delivery carries the Standard Webhooks headers, which the reference library verifies with
// the key's secret as shown; a key whose secret predates them (not base64 after "whsec_") signs
// with the secret's own bytes, which the library takes as a raw secret.
func TestDeliverySignedPerStandardWebhooks(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusOK))
	f.enqueue(t, "h-new", "accepted")
	deliverDue(t, f.deliverer(t, webhook.Options{}))
	const before = "whsec_c2VjcmV0IGlzc3VlZCBiZWZvcmUgdGhlIHN0ZCEhISE" // 43 characters of unpadded URL-safe base64, as issued then
	if _, err := f.db.Exec(t.Context(), `UPDATE api_keys SET webhook_secret = $1 WHERE id = $2`, before, f.key.ID); err != nil {
		t.Fatal(err)
	}
	f.enqueue(t, "h-old", "accepted")
	deliverDue(t, f.deliverer(t, webhook.Options{}))
	got := f.bot.receipts()
	if len(got) != 2 {
		t.Fatalf("bot received %d requests, want 2", len(got))
	}
	for _, r := range got {
		var p map[string]any
		if err := json.Unmarshal(r.body, &p); err != nil {
			t.Fatal(err)
		}
		if id := r.header.Get("Webhook-Id"); id != p["event_id"] || id != r.header.Get("X-Handoff-Event-Id") {
			t.Errorf("Webhook-Id %q, want the event id %v", id, p["event_id"])
		}
		if ts := r.header.Get("Webhook-Timestamp"); ts == "" || ts != r.header.Get("X-Handoff-Timestamp") {
			t.Errorf("Webhook-Timestamp %q, want the Unix seconds of X-Handoff-Timestamp %q", ts, r.header.Get("X-Handoff-Timestamp"))
		}
	}
	checks := []webhooktest.Check{
		{Secret: f.key.WebhookSecret, Header: got[0].header, Body: got[0].body},
		{Secret: before, Raw: true, Header: got[1].header, Body: got[1].body},
	}
	for i, result := range webhooktest.StandardVerify(t, checks) {
		if result != "ok" {
			t.Errorf("delivery %d (secret %s…): the reference library says %q", i, checks[i].Secret[:10], result)
		}
	}
}
