package webhook_test

import (
	"net/http"
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
		"http://localhost:8080/hooks":              "localhost resolves to", // a name, judged by its address
		"http://127.0.0.1:8080/hooks":              "127.0.0.1 is a loopback address",
		"https://[::1]/hooks":                      "a loopback address",
		"https://[::ffff:127.0.0.1]/hooks":         "a loopback address",
		"https://10.1.2.3/hooks":                   "a private address",
		"https://172.16.0.1/hooks":                 "a private address",
		"https://192.168.1.10/hooks":               "a private address",
		"https://[fd12:3456::1]/hooks":             "a private address", // unique-local
		"http://169.254.169.254/latest/meta-data/": "a link-local address",
		"https://[fe80::1]/hooks":                  "a link-local address",
		"https://100.64.0.1/hooks":                 "a carrier-grade NAT address",
		"https://224.0.0.1/hooks":                  "a multicast address",
		"https://[ff02::1]/hooks":                  "a multicast address",
		"https://0.0.0.0/hooks":                    "an unspecified address",
		"https://[::]/hooks":                       "an unspecified address",
		"https://198.18.0.1/hooks":                 "a reserved address", // benchmarking
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
// private targets were allowed then) is still refused at delivery, by the address dialed.
func TestDeliveryRefusesPrivateTargetsWhenDialing(t *testing.T) {
	t.Parallel()
	f := setup(t, always(http.StatusOK))
	byName := f.apiKey(t, "rebound", strings.Replace(f.bot.server.URL, "127.0.0.1", "localhost", 1)+"/hook")
	enqueue(t, f.db, newEvent(byName.ID, "h-name", "accepted"))
	f.enqueue(t, "h-literal", "accepted") // the fixture's key, at http://127.0.0.1:port/hook

	if n := deliverDue(t, f.strictDeliverer(t, webhook.Options{})); n != 2 {
		t.Fatalf("claimed %d rows, want 2", n)
	}
	if got := len(f.bot.receipts()); got != 0 {
		t.Errorf("the bot on 127.0.0.1 received %d requests, want none", got)
	}
	for _, id := range []string{"h-name", "h-literal"} {
		row := f.only(t, id)
		if row.State != webhook.StatePending || row.LastStatus != 0 ||
			!strings.Contains(row.LastError, "127.0.0.1: a loopback address") || !strings.Contains(row.LastError, "WEBHOOK_ALLOW_PRIVATE=1") {
			t.Errorf("%s: row = %+v, want pending with the refusal naming 127.0.0.1 as loopback", id, row)
		}
	}

	// The same rows go through once private targets are allowed: it was the address that was refused.
	f.clock.Advance(time.Hour)
	deliverDue(t, f.deliverer(t, webhook.Options{}))
	if got := len(f.bot.receipts()); got != 2 {
		t.Errorf("with private targets allowed the bot received %d requests, want 2", got)
	}
}
