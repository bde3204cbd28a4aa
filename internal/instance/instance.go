// Package instance is one running desk: the HTTP server and the background work every instance
// does beside it (live fan-out, presence, the sweeper, webhook delivery). `web serve` runs one;
// tests run one or several against the same database.
package instance

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/dashboard"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/internal/metrics"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/sso"
	"github.com/handoffdesk/desk/internal/tracing"
	"github.com/handoffdesk/desk/internal/webhook"
)

// SweepInterval is how often reservation timeouts and TTLs are enforced.
const SweepInterval = 5 * time.Second

// purgeInterval is how often expired sessions, old login failures and single sign-ons past their
// time are deleted.
const purgeInterval = 10 * time.Minute

// Options are what a desk instance needs besides the server's configuration.
type Options struct {
	Server server.Config
	// DatabaseURL opens the one LISTEN connection, which lives outside the pool.
	DatabaseURL   string
	SweepInterval time.Duration
	Webhook       webhook.Options
	// Metrics is where /metrics is served (METRICS_ADDR); nil serves it nowhere. It is never the
	// public listener: the desk's own port answers 404 for /metrics.
	Metrics net.Listener
	// Tracing makes the instance's spans (nil: none; see docs/tracing.md). The database pool's
	// spans are the pool's own (postgres.Traced).
	Tracing *tracing.Tracing
}

// Run serves on ln until ctx is done, then stops the server gracefully and the workers after it.
func Run(ctx context.Context, opts Options, logger *slog.Logger, db *pgxpool.Pool, ln net.Listener) error {
	if opts.SweepInterval == 0 {
		opts.SweepInterval = SweepInterval
	}
	hub := live.NewHub(db, logger)
	notifier := live.NewNotifier(hub, func(ctx context.Context, payload string) error {
		_, err := db.Exec(ctx, `SELECT pg_notify($1, $2)`, live.Channel, payload)
		return err
	}, logger)
	counts := metrics.New(db)
	counts.ReadState(metrics.State{
		Queues:  queue.NewService(db).Health,
		Backlog: func(ctx context.Context) (int, error) { return webhook.Backlog(ctx, db) },
	})
	hooks := opts.Webhook
	hooks.Metrics = counts
	hooks.Tracing = opts.Tracing
	deliverer := webhook.NewDeliverer(db, logger, hooks)
	changed := func() {
		notifier.Changed()
		deliverer.Wake()
	}
	work := actions.New(db, time.Now, changed, counts, opts.Tracing, opts.Server.BaseURL)
	deliverer.OnReplies(func(ctx context.Context, settled []webhook.Settled) {
		if err := work.RepliesSettled(ctx, settled); err != nil && ctx.Err() == nil {
			logger.Warn("logging where reply webhooks stand", "err", err)
		}
	})
	presence := live.NewPresence(db, logger, notifier.Changed)
	presence.WhenGone(func(ctx context.Context, userIDs []int64) {
		for _, id := range userIDs {
			if err := work.Withdraw(ctx, id); err != nil && ctx.Err() == nil {
				logger.Warn("withdrawing the ring of an agent who went offline", "user", id, "err", err)
			}
		}
	})
	people := auth.NewService(db)
	// Each event's lag, from its change to its publishing here, is observed. Whoever's access
	// changed is checked against the database on their next request, on every instance, before any
	// socket of theirs hears of the change and the browser reloads; a key changed or revoked is
	// asked of the database on its next request.
	hub.Observe(func(b live.Batch) {
		for _, e := range b.Events {
			counts.Published(e.At)
			access.Forget(people, e.Kind, e.UserID)
		}
	})
	opts.Server.AllowPrivateWebhooks = opts.Webhook.AllowPrivate
	in := intake.New(db, time.Now, changed, opts.Tracing)
	in.OnRing(work.RingDue)
	srv, err := server.New(opts.Server, logger, db, people, queue.NewService(db),
		in, work, board.New(db), hub, presence, counts, opts.Tracing)
	if err != nil {
		// Unused, they only give their ports back; the server's error is the one to report.
		_ = ln.Close()
		if opts.Metrics != nil {
			_ = opts.Metrics.Close()
		}
		return err
	}

	workCtx, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	var workers sync.WaitGroup
	workers.Go(func() { hub.Run(workCtx) })
	workers.Go(func() { notifier.Run(workCtx) })
	workers.Go(func() { live.Listen(workCtx, opts.DatabaseURL, hub, notifier.Self, logger) })
	workers.Go(func() { presence.Run(workCtx) })
	workers.Go(func() { work.RunSweeper(workCtx, opts.SweepInterval, logger) })
	workers.Go(func() { _ = deliverer.Run(workCtx) })
	workers.Go(func() { purge(workCtx, db, people, logger) })
	workers.Go(func() { dashboard.RunRefresher(workCtx, db, dashboard.RefreshEvery, logger) })
	if opts.Metrics != nil {
		workers.Go(func() {
			if err := counts.Serve(workCtx, opts.Metrics); err != nil {
				logger.Error("metrics listener stopped", "err", err)
			}
		})
	}

	err = srv.Serve(ctx, ln)
	stopWork()
	workers.Wait()
	return err
}

func purge(ctx context.Context, db *pgxpool.Pool, people *auth.Service, logger *slog.Logger) {
	ticker := time.NewTicker(purgeInterval)
	defer ticker.Stop()
	for {
		if n, err := people.Purge(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("purging sessions", "err", err)
		} else if n > 0 {
			logger.Info("purged expired sessions and login failures", "rows", n)
		}
		if n, err := sso.Purge(ctx, db, time.Now()); err != nil && ctx.Err() == nil {
			logger.Warn("purging single sign-ons", "err", err)
		} else if n > 0 {
			logger.Info("purged expired single sign-ons", "rows", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}
