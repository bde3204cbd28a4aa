// Package desks serves desk instances for the load tools, beside the helpers of internal/loadtest,
// which the packages' own benchmarks use without the whole desk.
package desks

import (
	"context"
	"log/slog"

	"github.com/handoffdesk/desk/internal/instance"
	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// Serve serves a desk instance per name on dbURL, each on a loopback listener of its own with a
// pool of its own and webhooks allowed to loopback bots, stopped by c; it returns their base URLs
// once every one answers /readyz.
func Serve(ctx context.Context, c *loadtest.Cleanup, dbURL string, logger *slog.Logger, names ...string) ([]string, error) {
	var urls []string
	for _, name := range names {
		ln, base, err := loadtest.Listen()
		if err != nil {
			return nil, err
		}
		pool, err := postgres.Open(ctx, dbURL, postgres.DefaultAcquireTimeout)
		if err != nil {
			return nil, err
		}
		opts := instance.Options{Server: server.Config{Addr: ln.Addr().String(), BaseURL: base}, DatabaseURL: dbURL,
			Webhook: webhook.Options{AllowPrivate: true}}
		stop := loadtest.Serve(ctx, func(ctx context.Context) error {
			return instance.Run(ctx, opts, logger.With("instance", name), pool, ln)
		})
		c.Add(func() error { err := stop(); pool.Close(); return err })
		urls = append(urls, base)
	}
	return urls, loadtest.WaitReady(ctx, urls...)
}
