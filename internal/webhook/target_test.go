package webhook_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/webhook"
)

func TestKeyCreationRefusesPrivateWebhookTargets(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusOK))
	people := auth.NewService(f.db)
	create := func(i int, url string, allowPrivate bool) error {
		_, err := people.CreateAPIKey(t.Context(), auth.NewAPIKey{
			Name: "key" + strconv.Itoa(i), QueueIDs: []int64{f.queueID}, WebhookURL: url, AllowPrivateWebhook: allowPrivate,
		})
		return err
	}
	refused := map[string]string{
		"https://localhost:8080/hooks":              "localhost resolves to", // a name, judged by its address
		"https://127.0.0.1:8080/hooks":              "127.0.0.1 is a loopback address",
		"https://[::1]/hooks":                       "a loopback address",
		"https://[::ffff:127.0.0.1]/hooks":          "a loopback address",
		"https://10.1.2.3/hooks":                    "a private address",
		"https://172.16.0.1/hooks":                  "a private address",
		"https://192.168.1.10/hooks":                "a private address",
		"https://[fd12:3456::1]/hooks":              "a private address", // unique-local
		"https://169.254.169.254/latest/meta-data/": "a link-local address",
		"https://[fe80::1]/hooks":                   "a link-local address",
		"https://100.64.0.1/hooks":                  "a carrier-grade NAT address",
		"https://224.0.0.1/hooks":                   "a multicast address",
		"https://[ff02::1]/hooks":                   "a multicast address",
		"https://0.0.0.0/hooks":                     "an unspecified address",
		"https://[::]/hooks":                        "an unspecified address",
		"https://198.18.0.1/hooks":                  "a reserved address",      // benchmarking
		"http://bot.example.com/hooks":              "webhooks use https only", // plain http, wherever it goes
	}
	i := 0
	for url, want := range refused {
		i++
		err := create(i, url, false)
		if desk.ErrorCode(err) != desk.Invalid || !strings.Contains(err.Error(), want) ||
			!strings.Contains(err.Error(), "WEBHOOK_ALLOW_PRIVATE=1") || !strings.Contains(err.Error(), url) {
			t.Errorf("%s: err = %v, want invalid, naming the url, %q and WEBHOOK_ALLOW_PRIVATE=1", url, err, want)
		}
		i++
		if err := create(i, url, true); err != nil {
			t.Errorf("%s with private targets allowed: %v", url, err)
		}
	}
	for _, url := range []string{
		"https://93.184.215.14/hooks",
		"https://[2606:4700::6810:85e5]:8443/hooks",
		// A name that does not resolve now is accepted: the deliverer checks the address it dials.
		"https://bot.example.invalid/hooks",
	} {
		i++
		if err := create(i, url, false); err != nil {
			t.Errorf("%s: %v, want accepted", url, err)
		}
	}
	i++
	if err := create(i, "ftp://bot.example.com/hooks", true); desk.ErrorCode(err) != desk.Invalid {
		t.Errorf("ftp url: err = %v, want invalid", err)
	}
}

// A key whose URL passed the check at creation (its name resolved to a public address then, or
// private targets were allowed then) is still refused at delivery, by the address dialed; and a
// plain http URL stored while allowed is refused before any dial.
func TestDeliveryRefusesPrivateTargetsWhenDialing(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusOK))
	secure := strings.Replace(f.bot.server.URL, "http://", "https://", 1) + "/hook"
	byName := f.apiKey(t, "rebound", strings.Replace(secure, "127.0.0.1", "localhost", 1))
	literal := f.apiKey(t, "literal", secure)
	enqueue(t, f.db, newEvent(byName.ID, "h-name", "accepted"))
	enqueue(t, f.db, newEvent(literal.ID, "h-literal", "accepted"))
	f.enqueue(t, "h-plain", "accepted") // the fixture's key, at http://127.0.0.1:port/hook

	if n := deliverDue(t, f.strictDeliverer(t, webhook.Options{})); n != 3 {
		t.Fatalf("claimed %d rows, want 3", n)
	}
	if got := len(f.bot.receipts()); got != 0 {
		t.Errorf("the bot on 127.0.0.1 received %d requests, want none", got)
	}
	for id, want := range map[string]string{
		"h-name": "127.0.0.1: a loopback address", "h-literal": "127.0.0.1: a loopback address", "h-plain": "webhooks use https only",
	} {
		row := f.only(t, id)
		if row.State != webhook.StatePending || row.LastStatus != 0 ||
			!strings.Contains(row.LastError, want) || !strings.Contains(row.LastError, "WEBHOOK_ALLOW_PRIVATE=1") {
			t.Errorf("%s: row = %+v, want pending with the refusal %q", id, row, want)
		}
	}

	// The same rows go out once private targets are allowed: it was the address and the scheme
	// that were refused. The https rows then reach the plain bot, whose answer is no TLS.
	f.clock.Advance(time.Hour)
	deliverDue(t, f.deliverer(t, webhook.Options{}))
	if got := len(f.bot.receipts()); got != 1 {
		t.Errorf("with private targets allowed the bot received %d requests, want 1", got)
	}
	if row := f.only(t, "h-plain"); row.State != webhook.StateDelivered {
		t.Errorf("h-plain with private targets allowed: %+v, want delivered", row)
	}
	for _, id := range []string{"h-name", "h-literal"} {
		if row := f.only(t, id); strings.Contains(row.LastError, "refused") || row.LastError == "" {
			t.Errorf("%s with private targets allowed: last error %q, want the TLS failure of a connection made", id, row.LastError)
		}
	}
}

// A bot's answer is read no further than a few KiB, however much it sends: the status is the
// answer, and an endless body must not hold the delivery's slot until its time runs out.
func TestDeliveryReadsALimitedAnswer(t *testing.T) {
	t.Parallel()
	written := make(chan int64, 1)
	endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		chunk := make([]byte, 64<<10)
		var n int64
		defer func() { written <- n }()
		for n < 1<<30 {
			k, err := w.Write(chunk)
			n += int64(k)
			if err != nil {
				return
			}
		}
	}))
	t.Cleanup(endless.Close)
	f := setup(t, always(http.StatusOK))
	key := f.apiKey(t, "endless", endless.URL+"/hook")
	enqueue(t, f.db, newEvent(key.ID, "h1", "accepted"))

	deliverDue(t, f.deliverer(t, webhook.Options{Timeout: time.Minute}))
	if row := f.only(t, "h1"); row.State != webhook.StateDelivered || row.LastStatus != http.StatusOK {
		t.Errorf("row = %+v, want delivered with 200", row)
	}
	select {
	case n := <-written:
		// Loopback's socket buffers take some MiB before the writes fail; reading the body whole
		// would have taken the full GiB.
		if n >= 64<<20 {
			t.Errorf("the bot wrote %d bytes before the deliverer hung up, want under 64 MiB", n)
		}
	case <-time.After(30 * time.Second):
		t.Error("the bot was still writing 30 s after the delivery: the deliverer did not hang up")
	}
}

// A bot that does not answer within the deliverer's time is a failed attempt, retried later.
func TestDeliveryGivesUpOnASlowBot(t *testing.T) {
	t.Parallel()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // the server notices the client hang up only once the body is read
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}))
	t.Cleanup(slow.Close)
	f := setup(t, always(http.StatusOK))
	key := f.apiKey(t, "slow", slow.URL+"/hook")
	enqueue(t, f.db, newEvent(key.ID, "h1", "accepted"))

	deliverDue(t, f.deliverer(t, webhook.Options{Timeout: 300 * time.Millisecond}))
	if row := f.only(t, "h1"); row.State != webhook.StatePending || row.LastStatus != 0 ||
		!strings.Contains(row.LastError, "Client.Timeout exceeded") {
		t.Errorf("row = %+v, want pending with the client's timeout", row)
	}
}
