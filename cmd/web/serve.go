package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

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
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		cfg := server.Config{
			Addr:           ln.Addr().String(),
			BaseURL:        getenv("BASE_URL"),
			FrameAncestors: strings.Fields(strings.ReplaceAll(getenv("FRAME_ANCESTORS"), ",", " ")),
		}
		if cfg.BaseURL == "" {
			cfg.BaseURL = "http://localhost:" + portOf(ln.Addr())
		}
		srv, err := server.New(cfg, logger, db, auth.NewService(db), queue.NewService(db), handoff.NewIntake(db, nil))
		if err != nil {
			ln.Close()
			return err
		}
		ctx, stop := context.WithCancel(ctx)
		defer stop()
		deliverer := webhook.NewDeliverer(db, logger, webhook.Options{})
		delivering := make(chan struct{})
		go func() {
			defer close(delivering)
			_ = deliverer.Run(ctx)
		}()
		logger.Info("listening", "addr", ln.Addr().String(), "url", cfg.BaseURL, "login", cfg.BaseURL+"/login")
		err = srv.Serve(ctx, ln)
		stop()
		<-delivering
		return err
	})
}

func portOf(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return fmt.Sprint(tcp.Port)
	}
	return "8080"
}
