// Package postgres opens the desk's one store and keeps its schema current.
package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/multitracer"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/handoffdesk/desk/internal/tracing"
	"github.com/handoffdesk/desk/migrations"
)

// DefaultURL is the local PostgreSQL that `make run` prepares when DATABASE_URL is unset.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/handoffdesk?sslmode=disable"

// DefaultAcquireTimeout bounds the wait for a pooled connection when DATABASE_ACQUIRE_TIMEOUT is
// unset: far beyond any wait of a healthy desk, well within a request's deadline.
const DefaultAcquireTimeout = 10 * time.Second

// DefaultIdleInTransactionTimeout is the idle_in_transaction_session_timeout of the desk's pooled
// connections unless the database URL sets one. The desk's transactions take milliseconds and
// never wait on a client, so one idle this long is stuck; until it ends it holds back the live
// updates of every browser (see events.Read), and vacuum.
const DefaultIdleInTransactionTimeout = "1min"

// Open connects a pool and checks that the server answers, so that a wrong URL fails at start
// rather than on the first request. No one waits longer than acquireTimeout for a connection
// (0: DefaultAcquireTimeout): with every connection busy, a request fails as unavailable, and a
// bot retries later, rather than waiting for as long as its client does. A transaction left idle
// is ended after DefaultIdleInTransactionTimeout, or what the URL's
// idle_in_transaction_session_timeout says (0 turns it off).
func Open(ctx context.Context, url string, acquireTimeout time.Duration, opts ...Option) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("database url: %w", err)
	}
	if acquireTimeout <= 0 {
		acquireTimeout = DefaultAcquireTimeout
	}
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = DefaultIdleInTransactionTimeout
	}
	cfg.ConnConfig.Tracer = acquireDeadline(acquireTimeout)
	for _, opt := range opts {
		opt(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("database %s@%s:%d/%s: %w", cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, err)
	}
	return pool, nil
}

// Option changes how Open configures the pool.
type Option func(*pgxpool.Config)

// Traced makes a span of every statement, batch and connection acquire that runs inside a sampled
// span, through otelpgx; statements of untraced work (the hub's reads, the deliverer's polls) make
// none. A batch is one span, its round trip: otelpgx would add one per statement in it, timed only
// by when its result was read, and the desk's hot paths are batches of five to ten statements,
// whose spans made most of tracing's cost on an intake. With tracing off Traced changes nothing, so
// the pool's hooks cost nothing.
func Traced(t *tracing.Tracing) Option {
	return func(cfg *pgxpool.Config) {
		if !t.On() {
			return
		}
		spans := otelpgx.NewTracer(otelpgx.WithTracerProvider(t.Provider()), otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()),
			otelpgx.WithDisableConnectionDetailsInAttributes())
		cfg.ConnConfig.Tracer = multitracer.New(cfg.ConnConfig.Tracer, roundTrips{spans})
	}
}

// roundTrips is otelpgx with a batch's statements left to the batch's span.
type roundTrips struct{ *otelpgx.Tracer }

func (roundTrips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}

// acquireDeadline bounds every wait for a pooled connection. pgxpool has no setting of its own for
// it; an acquire tracer is the one hook whose context the wait itself runs under.
type acquireDeadline time.Duration

type cancelKey struct{}

func (d acquireDeadline) TraceAcquireStart(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireStartData) context.Context {
	ctx, cancel := context.WithTimeout(ctx, time.Duration(d))
	return context.WithValue(ctx, cancelKey{}, cancel)
}

func (acquireDeadline) TraceAcquireEnd(ctx context.Context, _ *pgxpool.Pool, _ pgxpool.TraceAcquireEndData) {
	if cancel, ok := ctx.Value(cancelKey{}).(context.CancelFunc); ok {
		cancel()
	}
}

// TraceQueryStart and TraceQueryEnd make acquireDeadline a pgx tracer, the only kind a pool's
// connection configuration takes; queries are not traced.
func (acquireDeadline) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}

func (acquireDeadline) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

// lockTimeout is the lock_timeout of every migration: a statement that cannot have its lock
// within it fails, and the runner tries again later, rather than waiting in the lock queue while
// every write to that table waits behind it. A desk's writes hold their locks for milliseconds, so
// a lock not free within a second is held by something long (a report, a stuck transaction).
const lockTimeout = time.Second

// retry is how often, and after how long, Migrate tries again a migration that could not have its
// lock. Each wait doubles, up to maxWait: about a minute and a half of attempts in all.
type retry struct {
	attempts int
	wait     time.Duration
	maxWait  time.Duration
}

var defaultRetry = retry{attempts: 8, wait: time.Second, maxWait: 30 * time.Second}

// Migrate applies pending migrations: the deploy step, `web migrate`. A session-level advisory
// lock lets several runners start at once without racing each other. Every migration runs with
// lockTimeout; one that fails for a lock (or a deadlock) is tried again with backoff, a bounded
// number of times, and the applied ones stay applied. A migration that runs outside a
// transaction may have done part of its work when it failed; such files are written to be run
// again from the start (migrations/lint_test.go checks the rules).
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	return migrate(ctx, pool, logger, defaultRetry)
}

func migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger, r retry) error {
	// Connections of their own, not the pool's: lock_timeout is set as each one opens, so it
	// holds for every statement goose runs on it, in a transaction or not, and a file's RESET
	// returns to it.
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["lock_timeout"] = strconv.FormatInt(lockTimeout.Milliseconds(), 10)
	db := stdlib.OpenDB(*cfg)
	defer func() { _ = db.Close() }()
	provider, err := newProvider(db)
	if err != nil {
		return err
	}
	wait := r.wait
	for attempt := 1; ; attempt++ {
		results, err := provider.Up(ctx)
		var partial *goose.PartialError
		if errors.As(err, &partial) {
			results = partial.Applied
		}
		for _, res := range results {
			logger.Info("migration applied", "source", res.Source.Path, "duration", res.Duration)
		}
		if err == nil {
			return nil
		}
		if !lockFailure(err) {
			return fmt.Errorf("migrate: %w", err)
		}
		source, waited := failed(partial)
		if attempt == r.attempts {
			return fmt.Errorf("migrate: %s could not take its lock in %d attempts; find what holds it long in pg_stat_activity: %w", source, attempt, err)
		}
		logger.Warn("migration could not take its lock; trying again", "source", source, "waited", waited,
			"lock_timeout", lockTimeout, "attempt", attempt, "of", r.attempts, "retry_in", wait, "err", err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("migrate: %w", ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, r.maxWait)
	}
}

// lockFailure reports whether err is a migration giving up a lock it could not have in time
// (lock_not_available) or one chosen as a deadlock's victim: both pass when the other
// transaction ends, so the migration is worth another attempt.
func lockFailure(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "55P03" || pgErr.Code == "40P01")
}

// failed names the migration that failed and how long it ran.
func failed(partial *goose.PartialError) (source string, ran time.Duration) {
	if partial == nil {
		return "", 0
	}
	return partial.Failed.Source.Path, partial.Failed.Duration
}

// Pending reports whether the database lacks migrations this binary carries; /readyz uses it,
// through the pool or on a connection of its own.
func Pending(ctx context.Context, db *sql.DB) (bool, error) {
	provider, err := newProvider(db)
	if err != nil {
		return false, err
	}
	return provider.HasPending(ctx)
}

// CheckSchema returns an error, one line that says what to do, when the database lacks
// migrations this binary carries. Only `web migrate` changes the schema; everything else runs on
// a schema that is current, or newer, as an instance of the previous release does during a
// rolling deploy (docs/operations.md).
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	db := stdlib.OpenDBFromPool(pool)
	defer func() { _ = db.Close() }() // hands its connections back to the pool, which stays open
	provider, err := newProvider(db)
	if err != nil {
		return err
	}
	pending, err := provider.HasPending(ctx)
	if err != nil {
		return fmt.Errorf("database schema: %w", err)
	}
	if !pending {
		return nil
	}
	current, target, err := provider.GetVersions(ctx)
	if err != nil {
		return fmt.Errorf("database schema: %w", err)
	}
	return fmt.Errorf("the database schema is at migration %d and this binary needs %d: run `web migrate` first (docs/operations.md)", current, target)
}

func newProvider(db *sql.DB) (*goose.Provider, error) {
	locker, err := lock.NewPostgresSessionLocker()
	if err != nil {
		return nil, err
	}
	return goose.NewProvider(goose.DialectPostgres, db, migrations.FS, goose.WithSessionLocker(locker))
}
