package loadtest

import (
	"context"
	"log/slog"

	"github.com/handoffdesk/desk/internal/instance"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// ServeInstances serves a desk instance per name on dbURL, each on a loopback listener of its own
// with a pool of its own and webhooks allowed to loopback bots, stopped by c; it returns their base
// URLs once every one answers /readyz.
func (c *Cleanup) ServeInstances(ctx context.Context, dbURL string, logger *slog.Logger, names ...string) ([]string, error) {
	var urls []string
	for _, name := range names {
		ln, base, err := Listen()
		if err != nil {
			return nil, err
		}
		pool, err := postgres.Open(ctx, dbURL, postgres.DefaultAcquireTimeout)
		if err != nil {
			return nil, err
		}
		opts := instance.Options{Server: server.Config{Addr: ln.Addr().String(), BaseURL: base}, DatabaseURL: dbURL,
			Webhook: webhook.Options{AllowPrivate: true}}
		stop := Serve(ctx, func(ctx context.Context) error {
			return instance.Run(ctx, opts, logger.With("instance", name), pool, ln)
		})
		c.Add(func() error { err := stop(); pool.Close(); return err })
		urls = append(urls, base)
	}
	return urls, WaitReady(ctx, urls...)
}
