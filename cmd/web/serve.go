package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/instance"
	"github.com/handoffdesk/desk/internal/server"
)

// defaultDrainPeriod is how long a stopping server keeps serving with /readyz at 503 when
// DRAIN_PERIOD is unset: a few of a load balancer's health checks.
const defaultDrainPeriod = 5 * time.Second

func serve(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	addr := getenv("ADDR")
	if addr == "" {
		addr = ":8080"
	}
	if err := parseFlags("serve", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&addr, "addr", addr, "listen address")
	}); err != nil {
		return err
	}
	requestTimeout, err := duration(getenv, "REQUEST_TIMEOUT", server.DefaultRequestTimeout)
	if err != nil {
		return err
	}
	if requestTimeout == 0 {
		return errors.New("REQUEST_TIMEOUT: want a duration above zero, such as 30s")
	}
	drainPeriod, err := duration(getenv, "DRAIN_PERIOD", defaultDrainPeriod)
	if err != nil {
		return err
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		cfg := server.Config{
			Addr:           ln.Addr().String(),
			BaseURL:        getenv("BASE_URL"),
			FrameAncestors: strings.Fields(strings.ReplaceAll(getenv("FRAME_ANCESTORS"), ",", " ")),
			RequestTimeout: requestTimeout,
			DrainPeriod:    drainPeriod,
		}
		if cfg.BaseURL == "" {
			cfg.BaseURL = "http://localhost:" + portOf(ln.Addr())
		}
		logger.Info("listening", "addr", ln.Addr().String(), "url", cfg.BaseURL, "login", cfg.BaseURL+"/login")
		return instance.Run(ctx, instance.Options{Server: cfg, DatabaseURL: databaseURL(getenv)}, logger, db, ln)
	})
}

func portOf(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return fmt.Sprint(tcp.Port)
	}
	return "8080"
}
