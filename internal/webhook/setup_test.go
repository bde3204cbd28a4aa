package webhook_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/clocktest"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/webhook"
)

// fixture is a fresh database with one API key whose webhooks go to a test bot on 127.0.0.1.
type fixture struct {
	db      *pgxpool.Pool
	queueID int64
	key     auth.IssuedAPIKey
	bot     *bot
	clock   *clocktest.Clock
}

// setup starts a bot answering each request with respond(n, r), n counting from 1.
func setup(t *testing.T, respond func(n int, r *http.Request) int) *fixture {
	t.Helper()
	ctx := t.Context()
	db := pgtest.New(t)
	b := newBot(t, respond)

	q, err := queue.NewService(db).Create(ctx, queue.New{Name: "q1"})
	if err != nil {
		t.Fatal(err)
	}
	// A minute ahead of the database clock, so that rows it stamps now() are already due.
	f := &fixture{db: db, queueID: q.ID, bot: b, clock: clocktest.New(time.Now().Add(time.Minute).UTC())}
	f.key = f.apiKey(t, "bot", b.server.URL+"/hook")
	return f
}

// apiKey creates a key whose webhooks go to webhookURL. The test bots listen on 127.0.0.1, which
// only WEBHOOK_ALLOW_PRIVATE lets a key point at.
func (f *fixture) apiKey(t *testing.T, name, webhookURL string) auth.IssuedAPIKey {
	t.Helper()
	key, err := auth.NewService(f.db).CreateAPIKey(t.Context(), auth.NewAPIKey{
		Name: name, QueueIDs: []int64{f.queueID}, WebhookURL: webhookURL, AllowPrivateWebhook: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// deliverer returns a deliverer on the fixture's clock that may send to the test bots on
// 127.0.0.1 (WEBHOOK_ALLOW_PRIVATE).
func (f *fixture) deliverer(t *testing.T, opts webhook.Options) *webhook.Deliverer {
	opts.AllowPrivate = true
	return f.strictDeliverer(t, opts)
}

// strictDeliverer is a deliverer as opts say, on the fixture's clock unless they name another.
func (f *fixture) strictDeliverer(t *testing.T, opts webhook.Options) *webhook.Deliverer {
	if opts.Now == nil {
		opts.Now = f.clock.Now
	}
	logger := slog.New(slog.DiscardHandler)
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return webhook.NewDeliverer(f.db, logger, opts)
}

func (f *fixture) enqueue(t *testing.T, handoffID, event string) {
	t.Helper()
	enqueue(t, f.db, newEvent(f.key.ID, handoffID, event))
}

// enqueue writes e to the outbox through db, a pool or the caller's transaction.
func enqueue(t *testing.T, db interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}, e webhook.Event) {
	t.Helper()
	b := &pgx.Batch{}
	if err := webhook.Queue(b, e); err != nil {
		t.Fatal(err)
	}
	if err := db.SendBatch(t.Context(), b).Close(); err != nil {
		t.Fatal(err)
	}
}

func newEvent(keyID int64, handoffID, event string) webhook.Event {
	return webhook.Event{
		HandoffID: handoffID, APIKeyID: keyID, Event: event, Status: event, Queue: "q1",
		OccurredAt: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC),
	}
}

// only returns the one outbox row of a handoff.
func (f *fixture) only(t *testing.T, handoffID string) webhook.Delivery {
	t.Helper()
	rows, err := webhook.Deliveries(t.Context(), f.db, webhook.DeliveryFilter{HandoffID: handoffID})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("handoff %s has %d outbox rows, want 1", handoffID, len(rows))
	}
	return rows[0]
}

// deliverDue runs one pass and fails the test on a database error.
func deliverDue(t *testing.T, d *webhook.Deliverer) int {
	t.Helper()
	n, err := d.DeliverDue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

type receipt struct {
	header http.Header
	body   []byte
}

// newBot starts a bot on 127.0.0.1 answering each request with respond(n, r), n counting from 1.
func newBot(t *testing.T, respond func(n int, r *http.Request) int) *bot {
	b := &bot{respond: respond}
	b.server = httptest.NewServer(b)
	t.Cleanup(b.server.Close)
	return b
}

// bot is the receiving end of the webhooks, recording every request.
type bot struct {
	server   *httptest.Server
	respond  func(n int, r *http.Request) int
	mu       sync.Mutex
	received []receipt
}

func (b *bot) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	b.mu.Lock()
	b.received = append(b.received, receipt{header: r.Header.Clone(), body: body})
	n := len(b.received)
	b.mu.Unlock()
	status := b.respond(n, r)
	if status >= 300 && status < 400 {
		// Somewhere that would answer 200, had the deliverer followed it.
		w.Header().Set("Location", "/followed")
	}
	w.WriteHeader(status)
}

func (b *bot) receipts() []receipt {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]receipt(nil), b.received...)
}

func always(status int) func(int, *http.Request) int {
	return func(int, *http.Request) int { return status }
}
