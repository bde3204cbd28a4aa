package webhook

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/handoffdesk/desk/internal/commit"
	"github.com/handoffdesk/desk/internal/metrics"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/tracing"
)

// States of an outbox row.
const (
	StatePending    = "pending"
	StateDelivered  = "delivered"
	StateDead       = "dead"        // the bot refused for good (410) or never answered 2xx in time
	StateNoEndpoint = "no_endpoint" // the key has no webhook URL; nothing was sent
)

// Defaults for the zero fields of Options.
const (
	DefaultTimeout          = 10 * time.Second
	DefaultMaxInFlight      = 8
	DefaultPollInterval     = time.Second
	DefaultLease            = 30 * time.Second
	DefaultMaxAttempts      = 12
	DefaultBackoffBase      = 5 * time.Second
	DefaultBreakerThreshold = 5
	DefaultBreakerCooldown  = time.Minute
)

const (
	maxBackoff      = time.Hour
	backoffJitter   = 0.2
	maxResponseRead = 4 << 10
	// Recording a result outlives the deliverer's context, so that a delivery that completed
	// during shutdown is not sent a second time; this bounds how long shutdown waits for it.
	recordTimeout = 5 * time.Second
	// recordGroup caps the results written by one statement.
	recordGroup = 256
	userAgent   = "HandoffDesk-Webhook/1"
)

// Options tunes a Deliverer; zero fields take the defaults above.
type Options struct {
	// AllowPrivate lets webhooks go to loopback, private and other addresses that are not public
	// (WEBHOOK_ALLOW_PRIVATE=1): for local development and tests.
	AllowPrivate bool
	// Metrics counts the deliveries' outcomes (nil: nowhere).
	Metrics *metrics.Metrics
	// Tracing makes a span of each request, linked to the change that caused it and to its
	// package, whose context goes to the bot as traceparent (nil: no spans, no traceparent).
	Tracing *tracing.Tracing
	Timeout time.Duration // the longest one request may take
	// MaxInFlight is how many requests at once one endpoint (a key's webhook URL) gets from this
	// deliverer. More of its rows may be claimed, waiting for a slot, so that a fast endpoint's
	// next request need not wait for a claim's round trip: as many as its pace lets finish well
	// within their lease, at most 16 × MaxInFlight.
	MaxInFlight  int
	PollInterval time.Duration
	// Lease is how long a claimed row is hidden from other deliverers. It is never shorter than
	// a request to wait for a slot (Timeout), its own (Timeout) and the time to record the
	// result: a row whose lease ran out mid-request could be sent by two deliverers at once.
	Lease       time.Duration
	MaxAttempts int           // failures after which a row is dead
	BackoffBase time.Duration // the wait after the first failure; it doubles with each one
	// BreakerThreshold consecutive failed deliveries to an endpoint open its breaker: for
	// BreakerCooldown none of its rows is claimed, and the rows wait without using attempts.
	// Then one row probes the endpoint: success closes the breaker, failure opens it again.
	BreakerThreshold int
	BreakerCooldown  time.Duration
	// Now, when set, replaces the database's clock (and the wall clock of X-Handoff-Timestamp and
	// the breakers), so that tests can step past backoffs, leases and cool-downs. Unset, every
	// instance reads the one database clock, and their own clocks' skew cannot break leases.
	Now func() time.Time
}

// Deliverer sends pending outbox rows to the bots' webhook URLs. Each endpoint (an API key's
// webhook URL) has requests of its own, at most MaxInFlight at once, and a breaker of its own, so
// a slow or failing endpoint delays nobody else's webhooks: its rows are claimed only as its
// slots come free, and no pass waits for any request.
type Deliverer struct {
	db      *pgxpool.Pool
	logger  *slog.Logger
	opts    Options
	client  *http.Client
	wake    chan struct{}
	results *commit.Convoy[*recording]
	// aheadWait is how long a row claimed ahead of its endpoint's slots may expect to wait for
	// one: half of what its lease leaves after its own request and its record.
	aheadWait time.Duration

	// passing lets one pass claim at a time, so that each sees the slots the last one took.
	passing sync.Mutex

	mu        sync.Mutex
	endpoints map[int64]*endpoint // by API key id, every endpoint this deliverer has sent to

	// replies hears where reply webhooks stand once their results are recorded (OnReplies).
	replies func(ctx context.Context, settled []Settled)
}

// Settled is where a reply's webhook stands after an attempt: delivered, pending (to be retried)
// or dead.
type Settled struct {
	HandoffID string
	State     string
}

// OnReplies has f hear, after each recorded group of results, where the reply webhooks among them
// stand: the package page shows each reply's delivery, and "sent to the customer" only once the
// bot took it. Set before Run.
func (d *Deliverer) OnReplies(f func(ctx context.Context, settled []Settled)) { d.replies = f }

// NewDeliverer returns a Deliverer over db; call Run to start it.
func NewDeliverer(db *pgxpool.Pool, logger *slog.Logger, opts Options) *Deliverer {
	defaultTo(&opts.Timeout, DefaultTimeout)
	defaultTo(&opts.MaxInFlight, DefaultMaxInFlight)
	defaultTo(&opts.PollInterval, DefaultPollInterval)
	defaultTo(&opts.Lease, DefaultLease)
	opts.Lease = max(opts.Lease, 2*opts.Timeout+recordTimeout)
	defaultTo(&opts.MaxAttempts, DefaultMaxAttempts)
	defaultTo(&opts.BackoffBase, DefaultBackoffBase)
	defaultTo(&opts.BreakerThreshold, DefaultBreakerThreshold)
	defaultTo(&opts.BreakerCooldown, DefaultBreakerCooldown)
	if opts.Metrics == nil {
		opts.Metrics = metrics.New(nil)
	}
	opts.Metrics.Outcomes(StateDelivered, StatePending, StateDead)
	if opts.Tracing == nil {
		opts.Tracing = tracing.Off()
	}
	d := &Deliverer{
		db: db, logger: logger, opts: opts,
		client:    newClient(opts.Timeout, opts.MaxInFlight, opts.AllowPrivate),
		wake:      make(chan struct{}, 1),
		aheadWait: (opts.Lease - opts.Timeout - recordTimeout) / 2,
		endpoints: map[int64]*endpoint{},
	}
	d.results = commit.NewConvoy(commit.FirstOf[*recording](recordGroup), d.recordGroup)
	return d
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

// Run delivers until ctx is done, then returns nil once the requests in flight have ended. A pass
// starts requests and does not wait for them: the next pass comes when rows are committed
// (Wake), when an endpoint that may have more rows due frees a slot, or at the next poll. A
// failing pass is logged and retried rather than ending Run: the usual cause is the database
// restarting, which the next poll outlives.
func (d *Deliverer) Run(ctx context.Context) error {
	var sending sync.WaitGroup
	defer sending.Wait()
	for {
		_, err := d.pass(ctx, &sending, func(err error) { d.logFailure("webhook delivery", err) })
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			d.logFailure("webhook delivery pass", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.wake:
		case <-time.After(d.opts.PollInterval):
		}
	}
}

// logFailure logs a failure of the deliverer's own database work: a warning while the database is
// out of reach, which the next pass rides out, and an error otherwise.
func (d *Deliverer) logFailure(msg string, err error) {
	if postgres.OutOfReach(err) {
		d.logger.Warn(msg+": the database cannot answer now; retrying", "err", err)
		return
	}
	d.logger.Error(msg, "err", err)
}

// DeliverDue runs one pass and waits for it: it claims the rows that are due and that their
// endpoints have room for, sends them and records the results. It returns how many rows it
// claimed. A failed request is not an error, it is recorded on the row; errors are the
// database's.
func (d *Deliverer) DeliverDue(ctx context.Context) (int, error) {
	var (
		sending sync.WaitGroup
		mu      sync.Mutex
		errs    []error
	)
	n, err := d.pass(ctx, &sending, func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	})
	sending.Wait()
	return n, errors.Join(append(errs, err)...)
}

// claimed is an outbox row leased to this deliverer, with where and how to send it.
type claimed struct {
	id         int64
	apiKeyID   int64
	eventID    string
	event      string
	body       []byte
	attempts   int // including this one
	webhookURL string
	secret     string
	// previous is the secret the key's last rotation replaced, while its overlap lasts: the
	// delivery is signed with both, so that the bot may still hold either.
	previous  string
	claimedAt time.Time // by the clock its lease was counted from
	handoffID string
	// trace and packageTrace are the stored contexts of the change's span and the package's.
	trace, packageTrace *string
}

// pass claims the due rows that their endpoints have room for and starts each on sending; failed
// hears of the database errors met while recording their results.
func (d *Deliverer) pass(ctx context.Context, sending *sync.WaitGroup, failed func(error)) (int, error) {
	d.passing.Lock()
	defer d.passing.Unlock()
	claimedAt := d.wallClock()
	keys, quotas := d.quotas(claimedAt)
	rows, err := d.claim(ctx, keys, quotas)
	if err != nil {
		return 0, err
	}
	endpoints := d.took(rows, keys, quotas)
	for _, row := range rows {
		row.claimedAt = claimedAt
		if row.webhookURL == "" {
			continue // settled as no_endpoint by the claim
		}
		e := endpoints[row.apiKeyID]
		sending.Go(func() {
			if err := d.deliver(ctx, e, row); err != nil {
				failed(err)
			}
		})
	}
	return len(rows), nil
}

// quotas lists the endpoints that may not be given the quota of an endpoint not yet seen, with how
// many rows they may be given.
func (d *Deliverer) quotas(now time.Time) (keys []int64, quotas []int32) {
	first := d.firstQuota()
	d.mu.Lock()
	defer d.mu.Unlock()
	for key, e := range d.endpoints {
		if q := e.quota(now, d.opts.MaxInFlight, d.aheadWait); q != first {
			keys, quotas = append(keys, key), append(quotas, int32(q)) //nolint:gosec // G115: q is at most 17 × MaxInFlight, a small count of rows.
		}
	}
	return keys, quotas
}

// firstQuota is the quota of an endpoint not yet seen: its slots, and as many rows waiting.
func (d *Deliverer) firstQuota() int {
	return (&endpoint{}).quota(time.Time{}, d.opts.MaxInFlight, d.aheadWait)
}

// took counts the claimed rows against their endpoints, and returns the endpoints they go to.
func (d *Deliverer) took(rows []claimed, keys []int64, quotas []int32) map[int64]*endpoint {
	perKey := map[int64]int{}
	for _, row := range rows {
		if row.webhookURL != "" {
			perKey[row.apiKeyID]++
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.endpoints {
		e.more = false
	}
	endpoints := make(map[int64]*endpoint, len(perKey))
	for key, n := range perKey {
		quota := d.firstQuota()
		if i := slices.Index(keys, key); i >= 0 {
			quota = int(quotas[i])
		}
		e := d.endpoints[key]
		if e == nil {
			e = &endpoint{slots: make(chan struct{}, d.opts.MaxInFlight)}
			d.endpoints[key] = e
		}
		e.claimed += n
		e.more = n >= quota
		endpoints[key] = e
	}
	return endpoints
}

// done counts a claimed row as sent or given back, and wakes Run if its endpoint may have more
// rows due.
func (d *Deliverer) done(key int64) {
	d.mu.Lock()
	e := d.endpoints[key]
	e.claimed--
	more := e.more
	d.mu.Unlock()
	if more {
		d.Wake()
	}
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

// claim leases due rows in one statement, endpoint by endpoint: each API key's oldest due rows, as
// many as its quota (firstQuota unless keys and quotas say otherwise), so one endpoint's backlog is
// never read to reach another's rows. SKIP LOCKED lets concurrent deliverers take disjoint rows,
// and moving next_attempt_at forward by the lease hides the rows from them after this commits,
// until the lease runs out. A deliverer that dies mid-pass thus delays its rows by at most the
// lease. Every key is visited, an index probe each: a desk has tens of bots, and a key without due
// rows costs one probe. Counting the attempt here, not after the request, keeps a row that crashes
// its deliverer every time from being retried forever. Rows of keys without a webhook URL are
// settled here too: they need no request, and a commit each would cost as much as the intake's. The
// claimed ids are handed to the UPDATE as an array, which it looks up by primary key: joined as a
// set, whose size the planner cannot know from the LIMITs, they made it hash the whole outbox,
// delivered rows and all, on every claim.
func (d *Deliverer) claim(ctx context.Context, keys []int64, quotas []int32) ([]claimed, error) {
	var claims []claimed
	err := d.lightly(ctx, func(rows pgx.Rows) (err error) {
		claims, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (claimed, error) {
			var c claimed
			var webhookURL, previous *string
			err := row.Scan(&c.id, &c.apiKeyID, &c.eventID, &c.event, &c.body, &c.attempts, &webhookURL, &c.secret, &previous,
				&c.handoffID, &c.trace, &c.packageTrace)
			if webhookURL != nil {
				c.webhookURL = *webhookURL
			}
			if previous != nil {
				c.previous = *previous
			}
			return c, err
		})
		return err
	}, `
		WITH due AS (
			SELECT o.id
			FROM api_keys k
			CROSS JOIN LATERAL (
				SELECT o.id FROM webhook_outbox o
				WHERE o.api_key_id = k.id AND o.state = 'pending'
					AND o.next_attempt_at <= coalesce($1::timestamptz, now())
				ORDER BY o.next_attempt_at, o.id
				LIMIT coalesce((SELECT q.quota FROM unnest($2::bigint[], $3::int[]) AS q(api_key_id, quota)
					WHERE q.api_key_id = k.id), $4)
				FOR UPDATE SKIP LOCKED
			) o
		)
		UPDATE webhook_outbox o
		SET attempts = o.attempts + 1,
			next_attempt_at = coalesce($1::timestamptz, now()) + $5::interval,
			state = CASE WHEN k.webhook_url IS NULL THEN 'no_endpoint' ELSE o.state END
		FROM api_keys k
		WHERE o.id = ANY(ARRAY(SELECT id FROM due)) AND k.id = o.api_key_id
		RETURNING o.id, o.api_key_id, o.event_id, o.event, o.payload, o.attempts, k.webhook_url, k.webhook_secret,
			CASE WHEN k.webhook_secret_previous_until > coalesce($1::timestamptz, now()) THEN k.webhook_secret_previous END,
			o.handoff_id, o.trace_parent, o.package_trace`,
		d.clock(), keys, quotas, d.firstQuota(), d.opts.Lease)
	if err != nil {
		return nil, fmt.Errorf("claim webhooks: %w", err)
	}
	return claims, nil
}

// lightly runs one statement of the deliverer's own bookkeeping (a claim, results, a hold) in a
// transaction that commits without waiting for its WAL to reach the disk (synchronous_commit off),
// in one round trip: a delivery would otherwise wait for two disk flushes of its own. Other
// sessions see the commit at once, so a claim is still exclusive. A PostgreSQL crash can forget
// the last moments of bookkeeping; their rows are then sent again, which at-least-once allows,
// and no row is lost: the change that wrote it committed durably. read, if given, reads the
// statement's rows.
func (d *Deliverer) lightly(ctx context.Context, read func(pgx.Rows) error, sql string, args ...any) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL synchronous_commit = off")
	q := b.Queue(sql, args...)
	if read != nil {
		q.Query(read)
	}
	b.Queue("COMMIT")
	return d.db.SendBatch(ctx, b).Close()
}

// result is what a delivery attempt leaves on its row.
type result struct {
	state      string
	lastStatus *int
	lastError  *string
	retryIn    time.Duration // when state is pending
	failed     bool          // the endpoint did not take it: counts towards its breaker
}

// deliver sends a claimed row once a slot of its endpoint is free, and records the result. The
// slot is free again once the request is over, while the result is still on its way to the
// database. A row goes back unsent, with its attempt, if its deliverer is stopping, if its
// endpoint's breaker opened while it waited for the slot, or if it waited so long that its lease
// could run out before its request: another deliverer could then send it at the same time.
func (d *Deliverer) deliver(ctx context.Context, e *endpoint, row claimed) error {
	select {
	case e.slots <- struct{}{}:
	case <-ctx.Done():
		d.done(row.apiKeyID)
		return d.giveBack(ctx, row, 0)
	}
	hold := d.paused(row.apiKeyID)
	late := d.wallClock().After(row.claimedAt.Add(d.opts.Lease - d.opts.Timeout - recordTimeout))
	if hold > 0 || late {
		<-e.slots
		d.done(row.apiKeyID)
		return d.giveBack(ctx, row, hold)
	}
	start := time.Now()
	status, err := d.traced(ctx, row)
	took := time.Since(start)
	if err != nil && ctx.Err() != nil {
		// Stopping mid-request: the failure is ours, not the endpoint's, and the bot may have
		// the request. The row is left to its lease, as if this instance had died.
		<-e.slots
		d.done(row.apiKeyID)
		return nil
	}
	res := outcome(status, err, row.attempts, d.opts)
	d.opts.Metrics.Delivery(res.state)
	hold, opened := d.settle(row.apiKeyID, res.failed, took)
	<-e.slots
	d.done(row.apiKeyID)
	if res.state == StatePending {
		// A retry due while the breaker is open would only wait for it.
		res.retryIn = max(res.retryIn, hold)
	}
	if res.state != StateDelivered {
		d.logger.Warn("webhook delivery failed", "event_id", row.eventID, "event", row.event,
			"attempt", row.attempts, "status", status, "err", err, "state", res.state, "retry_in", res.retryIn)
	}
	var holdErr error
	if opened {
		d.logger.Warn("webhook endpoint failing: its deliveries pause", "api_key_id", row.apiKeyID,
			"consecutive_failures", d.opts.BreakerThreshold, "for", hold)
		holdErr = d.holdRows(ctx, row.apiKeyID, hold)
	}
	return errors.Join(holdErr, d.record(row, res))
}

// paused is how long the endpoint's breaker still holds its rows: zero when it is closed, or when
// its cool-down is over and this row may probe it.
func (d *Deliverer) paused(key int64) time.Duration {
	now := d.wallClock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if e := d.endpoints[key]; e.isOpen() && now.Before(e.openUntil) {
		return e.openUntil.Sub(now)
	}
	return 0
}

// giveBack returns a claimed row that was never sent, with the attempt its claim counted, due
// again after wait: another deliverer may take it at once when this one is stopping.
func (d *Deliverer) giveBack(ctx context.Context, row claimed, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	err := d.lightly(ctx, nil, `
		UPDATE webhook_outbox SET attempts = attempts - 1, next_attempt_at = coalesce($3::timestamptz, now()) + $4::interval
		WHERE id = $1 AND state = 'pending' AND attempts = $2`,
		row.id, row.attempts, d.clock(), wait)
	if err != nil {
		return fmt.Errorf("give back webhook %s: %w", row.eventID, err)
	}
	return nil
}

// settle counts a request's result towards the endpoint's breaker, and its duration towards the
// endpoint's pace. It returns how long the endpoint's rows must wait for the breaker (zero when it
// is closed), and whether this result opened it.
func (d *Deliverer) settle(key int64, failed bool, took time.Duration) (hold time.Duration, opened bool) {
	now := d.wallClock()
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.endpoints[key]
	e.timed(took)
	opened = e.settle(failed, now, d.opts.BreakerThreshold, d.opts.BreakerCooldown)
	if e.isOpen() {
		hold = max(e.openUntil.Sub(now), 0)
	}
	return hold, opened
}

// holdRows moves the endpoint's pending rows past its breaker's cool-down without counting an
// attempt, so that every instance leaves them alone until the probe has spoken: an instance whose
// own breaker is closed would otherwise go on sending them into the failing endpoint.
func (d *Deliverer) holdRows(ctx context.Context, key int64, hold time.Duration) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), recordTimeout)
	defer cancel()
	err := d.lightly(ctx, nil, `
		UPDATE webhook_outbox SET next_attempt_at = coalesce($2::timestamptz, now()) + $3::interval
		WHERE api_key_id = $1 AND state = 'pending' AND next_attempt_at < coalesce($2::timestamptz, now()) + $3::interval`,
		key, d.clock(), hold)
	if err != nil {
		return fmt.Errorf("hold the webhooks of key %d: %w", key, err)
	}
	return nil
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
	res.failed = true
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

// traced posts the row inside the span of its delivery: the root of a trace of its own, since a
// delivery is made by whichever instance claims it, maybe hours after the change, linked to the
// change's span and to the package's. Its context is the traceparent the bot receives.
func (d *Deliverer) traced(ctx context.Context, row claimed) (int, error) {
	if !d.opts.Tracing.On() {
		return d.post(ctx, row)
	}
	ctx, span := d.opts.Tracing.Start(ctx, "webhook.deliver", trace.WithNewRoot(), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(append(tracing.Link(row.trace, tracing.ToCause), tracing.Link(row.packageTrace, tracing.ToPackage)...)...),
		trace.WithAttributes(append(clientAttributes(row.webhookURL),
			tracing.HandoffID.String(row.handoffID), attribute.String("webhook.event", row.event),
			attribute.String("webhook.event_id", row.eventID), attribute.Int("webhook.attempt", row.attempts))...))
	status, err := d.post(ctx, row)
	if status != 0 {
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
	}
	switch {
	case err != nil:
		span.SetAttributes(errorType(err))
	case status < 200 || status >= 300:
		// Any answer but 2xx fails the delivery (a redirect is not followed), so it is the error.
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, http.StatusText(status))
	}
	tracing.End(span, err)
	return status, err
}

// clientAttributes are OpenTelemetry's HTTP client attributes of a delivery to target. The URL
// goes without its query and fragment, where a bot may keep a token, and without credentials.
func clientAttributes(target string) []attribute.KeyValue {
	u, err := url.Parse(target)
	if err != nil {
		return []attribute.KeyValue{semconv.HTTPRequestMethodPost}
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		port = 80
		if u.Scheme == "https" {
			port = 443
		}
	}
	full := url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path, RawPath: u.RawPath}
	return []attribute.KeyValue{semconv.HTTPRequestMethodPost, semconv.ServerAddress(u.Hostname()), semconv.ServerPort(port),
		semconv.URLFull(full.String())}
}

// errorType names a delivery that failed before an answer, as the conventions ask: a timeout, or
// the type of the error under the client's *url.Error (which every failure of Do is).
func errorType(err error) attribute.KeyValue {
	var timeout interface{ Timeout() bool }
	if errors.As(err, &timeout) && timeout.Timeout() {
		return semconv.ErrorTypeKey.String("timeout")
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return semconv.ErrorType(err)
}

// post sends the row and returns the response's status code, with the traceparent of ctx's span.
func (d *Deliverer) post(ctx context.Context, row claimed) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, row.webhookURL, bytes.NewReader(row.body))
	if err != nil {
		return 0, err
	}
	if !d.opts.AllowPrivate {
		if err := refuseHTTP(req.URL); err != nil {
			return 0, err
		}
	}
	timestamp := strconv.FormatInt(d.wallClock().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set(standardIDHeader, row.eventID)
	req.Header.Set(standardTimestampHeader, timestamp)
	req.Header.Set(timestampHeader, timestamp)
	standard := standardSignature(row.secret, row.eventID, timestamp, row.body)
	signatures, legacy := signature(row.secret, timestamp, row.body), legacySignature(row.secret, row.body)
	if row.previous != "" {
		standard += " " + standardSignature(row.previous, row.eventID, timestamp, row.body)
		signatures += ", " + signature(row.previous, timestamp, row.body)
		legacy += ", " + legacySignature(row.previous, row.body)
	}
	req.Header.Set(standardSignatureHeader, standard)
	req.Header.Set(signatureHeader, signatures)
	req.Header.Set(legacySignatureHeader, legacy)
	req.Header.Set("X-Handoff-Event-Id", row.eventID)
	req.Header.Set("X-Handoff-Event", row.event)
	tracing.Inject(ctx, req.Header)
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }() // the status is the answer; a failed close only costs the connection
	// Reading a little lets the connection be reused for small answers; a bot that streams a
	// large body loses its connection rather than holding up its slot.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxResponseRead))
	return resp.StatusCode, nil
}

// recording is one result on its way to its row, with the answer of the statement that wrote it.
type recording struct {
	row  claimed
	res  result
	done chan error
}

// record stores the result on the row. Results that arrive while another group of them is being
// written travel together in the next statement, so that a busy deliverer pays one commit for
// many rows. The write has a context of its own, so that a delivery that completed while the
// deliverer was stopping is still recorded and not sent again.
func (d *Deliverer) record(row claimed, res result) error {
	r := &recording{row: row, res: res, done: make(chan error, 1)}
	d.results.Join(r)
	return <-r.done
}

// recordGroup writes a group of results in one statement. A failure is recorded only if the row
// still carries this claim's attempt count: if the lease ran out and another deliverer claimed the
// row again, that claim owns the schedule. Success is recorded regardless, as it is true whoever
// else is trying. The rows are updated in id order, so that two deliverers' groups cannot
// deadlock.
func (d *Deliverer) recordGroup(group []*recording) {
	slices.SortFunc(group, func(a, b *recording) int { return cmp.Compare(a.row.id, b.row.id) })
	var (
		ids, retryIn []int64
		attempts     []int32
		states       []string
		statuses     []*int32
		lastErrors   []*string
	)
	for _, r := range group {
		var status *int32
		if r.res.lastStatus != nil {
			s := int32(*r.res.lastStatus) //nolint:gosec // G115: an HTTP status code.
			status = &s
		}
		ids = append(ids, r.row.id)
		attempts = append(attempts, int32(r.row.attempts)) //nolint:gosec // G115: at most MaxAttempts.
		states = append(states, r.res.state)
		statuses = append(statuses, status)
		lastErrors = append(lastErrors, r.res.lastError)
		retryIn = append(retryIn, r.res.retryIn.Microseconds())
	}
	ctx, cancel := context.WithTimeout(context.Background(), recordTimeout)
	defer cancel()
	err := d.lightly(ctx, nil, `
		UPDATE webhook_outbox o
		SET state = r.state,
			last_status = r.last_status,
			last_error = r.last_error,
			delivered_at = CASE WHEN r.state = 'delivered' THEN coalesce($7::timestamptz, now()) END,
			next_attempt_at = CASE WHEN r.state = 'pending'
				THEN coalesce($7::timestamptz, now()) + r.retry_us * interval '1 microsecond'
				ELSE o.next_attempt_at END
		FROM unnest($1::bigint[], $2::int[], $3::text[], $4::int[], $5::text[], $6::bigint[])
			AS r(id, attempts, state, last_status, last_error, retry_us)
		WHERE o.id = r.id AND o.state = 'pending' AND (r.state = 'delivered' OR o.attempts = r.attempts)`,
		ids, attempts, states, statuses, lastErrors, retryIn, d.clock())
	if err != nil {
		err = fmt.Errorf("record %d webhook results: %w", len(group), err)
	}
	for _, r := range group {
		r.done <- err
	}
	if err == nil && d.replies != nil {
		var settled []Settled
		for _, r := range group {
			if r.row.event == "reply" {
				settled = append(settled, Settled{HandoffID: r.row.handoffID, State: r.res.state})
			}
		}
		if len(settled) > 0 {
			d.replies(ctx, settled)
		}
	}
}
