package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// States of an outbox row.
const (
	StatePending    = "pending"
	StateDelivered  = "delivered"
	StateDead       = "dead"        // the bot refused for good (410) or never answered 2xx in time
	StateNoEndpoint = "no_endpoint" // the key has no webhook URL; nothing was sent
)

// Defaults for the zero fields of Options. A pass must fit in the lease even when every request
// times out, or another instance claims the same rows again and the bot gets duplicates:
// DefaultBatchSize / DefaultMaxInFlight × DefaultTimeout = 20s < DefaultLease.
const (
	DefaultTimeout      = 10 * time.Second
	DefaultBatchSize    = 16
	DefaultMaxInFlight  = 8
	DefaultPollInterval = time.Second
	DefaultLease        = 30 * time.Second
	DefaultMaxAttempts  = 12
	DefaultBackoffBase  = 5 * time.Second
)

const (
	maxBackoff      = time.Hour
	backoffJitter   = 0.2
	maxResponseRead = 4 << 10
	// Recording a result outlives the deliverer's context, so that a delivery that completed
	// during shutdown is not sent a second time; this bounds how long shutdown waits for it.
	recordTimeout = 5 * time.Second
	userAgent     = "HandoffDesk-Webhook/1"
)

// Options tunes a Deliverer; zero fields take the defaults above.
type Options struct {
	// AllowPrivate lets webhooks go to loopback, private and other addresses that are not public
	// (WEBHOOK_ALLOW_PRIVATE=1): for local development and tests.
	AllowPrivate bool
	BatchSize    int // rows claimed per pass
	MaxInFlight  int // concurrent requests to one endpoint within a pass
	PollInterval time.Duration
	Lease        time.Duration // how long a claimed row is hidden from other deliverers
	MaxAttempts  int           // failures after which a row is dead
	BackoffBase  time.Duration // the wait after the first failure; it doubles with each one
	// Now, when set, replaces the database's clock (and the wall clock of X-Handoff-Timestamp),
	// so that tests can step past backoffs and leases. Unset, every instance reads the one
	// database clock, and their own clocks' skew cannot break leases.
	Now func() time.Time
}

// Deliverer sends pending outbox rows to the bots' webhook URLs.
type Deliverer struct {
	db     *pgxpool.Pool
	logger *slog.Logger
	opts   Options
	client *http.Client
	wake   chan struct{}
}

// NewDeliverer returns a Deliverer over db; call Run to start it.
func NewDeliverer(db *pgxpool.Pool, logger *slog.Logger, opts Options) *Deliverer {
	defaultTo(&opts.BatchSize, DefaultBatchSize)
	defaultTo(&opts.MaxInFlight, DefaultMaxInFlight)
	defaultTo(&opts.PollInterval, DefaultPollInterval)
	defaultTo(&opts.Lease, DefaultLease)
	defaultTo(&opts.MaxAttempts, DefaultMaxAttempts)
	defaultTo(&opts.BackoffBase, DefaultBackoffBase)
	return &Deliverer{db: db, logger: logger, opts: opts, wake: make(chan struct{}, 1),
		client: newClient(DefaultTimeout, opts.MaxInFlight, opts.AllowPrivate)}
}

func defaultTo[T int | time.Duration](field *T, value T) {
	if *field <= 0 {
		*field = value
	}
}

// Wake asks Run for a pass now instead of at the next poll; call it after committing a Queue.
// It never blocks: a wake already pending covers this one too.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx is done, then returns nil. A failing pass is logged and retried at the
// next poll rather than ending Run: the usual cause is the database restarting, which the next
// poll outlives.
func (d *Deliverer) Run(ctx context.Context) error {
	for {
		claimed, err := d.DeliverDue(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			d.logger.Error("webhook delivery pass", "err", err)
		}
		if err == nil && claimed == d.opts.BatchSize {
			continue // a full batch: more rows are probably due
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		case <-time.After(d.opts.PollInterval):
		}
	}
}

// claimed is an outbox row leased to this deliverer, with where and how to send it.
type claimed struct {
	id         int64
	eventID    string
	event      string
	body       []byte
	attempts   int // including this one
	webhookURL string
	secret     string
}

// DeliverDue runs one pass: it claims the rows that are due, sends them and records the results.
// It returns how many rows it claimed. A failed request is not an error, it is recorded on the
// row; errors are the database's.
func (d *Deliverer) DeliverDue(ctx context.Context) (int, error) {
	rows, err := d.claim(ctx)
	if err != nil {
		return 0, err
	}
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		errs     []error
		inFlight = map[string]chan struct{}{} // per webhook URL
	)
	for _, row := range rows {
		if row.webhookURL == "" {
			continue // settled as no_endpoint by the claim
		}
		slots, ok := inFlight[row.webhookURL]
		if !ok {
			slots = make(chan struct{}, d.opts.MaxInFlight)
			inFlight[row.webhookURL] = slots
		}
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if err := d.deliver(ctx, row); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return len(rows), errors.Join(errs...)
}

// clock is the time the SQL statements take as now: NULL means the database's own now().
func (d *Deliverer) clock() *time.Time {
	if d.opts.Now == nil {
		return nil
	}
	now := d.opts.Now()
	return &now
}

func (d *Deliverer) wallClock() time.Time {
	if d.opts.Now == nil {
		return time.Now()
	}
	return d.opts.Now()
}

// claim leases the due rows in one statement: SKIP LOCKED lets concurrent deliverers take
// disjoint rows, and moving next_attempt_at forward by the lease hides the rows from them after
// this commits, until the lease runs out. A deliverer that dies mid-pass thus delays its rows by
// at most the lease. Counting the attempt here, not after the request, keeps a row that crashes
// its deliverer every time from being retried forever. Rows of keys without a webhook URL are
// settled here too: they need no request, and a commit each would cost as much as the intake's.
func (d *Deliverer) claim(ctx context.Context) ([]claimed, error) {
	rows, err := d.db.Query(ctx, `
		WITH due AS (
			SELECT id FROM webhook_outbox
			WHERE state = 'pending' AND next_attempt_at <= coalesce($1::timestamptz, now())
			ORDER BY next_attempt_at, id
			LIMIT $2
			FOR UPDATE SKIP LOCKED
		)
		UPDATE webhook_outbox o
		SET attempts = o.attempts + 1,
			next_attempt_at = coalesce($1::timestamptz, now()) + $3::interval,
			state = CASE WHEN k.webhook_url IS NULL THEN 'no_endpoint' ELSE o.state END
		FROM due, api_keys k
		WHERE o.id = due.id AND k.id = o.api_key_id
		RETURNING o.id, o.event_id, o.event, o.payload, o.attempts, k.webhook_url, k.webhook_secret`,
		d.clock(), d.opts.BatchSize, d.opts.Lease)
	if err != nil {
		return nil, fmt.Errorf("claim webhooks: %w", err)
	}
	claims, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
		var c claimed
		var webhookURL *string
		err := row.Scan(&c.id, &c.eventID, &c.event, &c.body, &c.attempts, &webhookURL, &c.secret)
		if webhookURL != nil {
			c.webhookURL = *webhookURL
		}
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("claim webhooks: %w", err)
	}
	return claims, nil
}

// result is what a delivery attempt leaves on its row.
type result struct {
	state      string
	lastStatus *int
	lastError  *string
	retryIn    time.Duration // when state is pending
}

func (d *Deliverer) deliver(ctx context.Context, row claimed) error {
	status, err := d.post(ctx, row)
	if err != nil && ctx.Err() != nil {
		// Shutting down: the failure is ours, not the endpoint's. The lease brings the row back.
		return nil
	}
	res := outcome(status, err, row.attempts, d.opts)
	if res.state != StateDelivered {
		d.logger.Warn("webhook delivery failed", "event_id", row.eventID, "event", row.event,
			"attempt", row.attempts, "status", status, "err", err, "state", res.state, "retry_in", res.retryIn)
	}
	return d.record(ctx, row, res)
}

// outcome decides what a response (status) or a failure to get one (err) means for the row.
func outcome(status int, err error, attempts int, opts Options) result {
	if err != nil {
		// The *url.Error around it repeats the method and URL, which the admin view shows anyway.
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			err = urlErr.Err
		}
		text := err.Error()
		return failure(result{lastError: &text}, attempts, opts)
	}
	switch {
	case status >= 200 && status < 300:
		return result{state: StateDelivered, lastStatus: &status}
	case status == http.StatusGone:
		// The bot says the endpoint is gone for good; retrying for hours would only add load.
		return result{state: StateDead, lastStatus: &status}
	default:
		return failure(result{lastStatus: &status}, attempts, opts)
	}
}

func failure(res result, attempts int, opts Options) result {
	if attempts >= opts.MaxAttempts {
		res.state = StateDead
		return res
	}
	res.state = StatePending
	res.retryIn = backoff(opts.BackoffBase, attempts, rand.Float64()) //nolint:gosec // G404: retry jitter only spreads retries; nothing depends on it being unpredictable.
	return res
}

// backoff is the wait after the given failed attempt (1-based): base doubled per earlier
// failure up to maxBackoff, then spread ±20% by jitter in [0, 1) so that rows failing together
// do not retry together, even at the cap (which the spread never exceeds).
func backoff(base time.Duration, attempt int, jitter float64) time.Duration {
	wait := min(base, maxBackoff)
	for range attempt - 1 {
		wait = min(2*wait, maxBackoff)
	}
	wait = time.Duration(float64(wait) * (1 - backoffJitter + 2*backoffJitter*jitter))
	return min(wait, maxBackoff)
}

// post sends the row and returns the response's status code.
func (d *Deliverer) post(ctx context.Context, row claimed) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, row.webhookURL, bytes.NewReader(row.body))
	if err != nil {
		return 0, err
	}
	timestamp := strconv.FormatInt(d.wallClock().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(timestampHeader, timestamp)
	req.Header.Set(signatureHeader, signature(row.secret, timestamp, row.body))
	req.Header.Set(legacySignatureHeader, legacySignature(row.secret, row.body))
	req.Header.Set("X-Handoff-Event-Id", row.eventID)
	req.Header.Set("X-Handoff-Event", row.event)
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }() // the status is the answer; a failed close only costs the connection
	// Reading a little lets the connection be reused for small answers; a bot that streams a
	// large body loses its connection rather than holding up the pass.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseRead))
	return resp.StatusCode, nil
}

// record stores the result on the row. It uses a context of its own, so that a delivery that
// completed while the deliverer was stopping is still recorded and not sent again.
//
// A failure is recorded only if the row still carries this claim's attempt count: if the lease
// ran out and another deliverer claimed the row again, that claim owns the schedule. Success is
// recorded regardless, as it is true whoever else is trying.
func (d *Deliverer) record(ctx context.Context, row claimed, res result) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	_, err := d.db.Exec(ctx, `
		UPDATE webhook_outbox
		SET state = $3,
			last_status = $4,
			last_error = $5,
			delivered_at = CASE WHEN $3 = 'delivered' THEN coalesce($7::timestamptz, now()) END,
			next_attempt_at = CASE WHEN $3 = 'pending' THEN coalesce($7::timestamptz, now()) + $6::interval
				ELSE next_attempt_at END
		WHERE id = $1 AND state = 'pending' AND ($3 = 'delivered' OR attempts = $2)`,
		row.id, row.attempts, res.state, res.lastStatus, res.lastError, res.retryIn, d.clock())
	if err != nil {
		return fmt.Errorf("record webhook %s as %s: %w", row.eventID, res.state, err)
	}
	return nil
}
