package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/demochat"
	"github.com/handoffdesk/desk/internal/instance"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/tracing"
	"github.com/handoffdesk/desk/internal/webhook"
)

// defaultDrainPeriod is how long a stopping server keeps serving with /readyz at 503 when
// DRAIN_PERIOD is unset: a few of a load balancer's health checks.
const defaultDrainPeriod = 5 * time.Second

func serve(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	addr := getenv("ADDR")
	if addr == "" {
		addr = ":8080"
	}
	var demoCRMAddr, demoChatAddr string
	if err := parseFlags("serve", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&addr, "addr", addr, "listen address")
		fs.StringVar(&demoCRMAddr, "demo-crm", "", "also serve a demo CRM page that frames the sidebar, on this loopback address")
		fs.StringVar(&demoChatAddr, "demo-chat", "", "also serve a demo customer chat, whose bot uses seed-demo's key, on this loopback address")
	}); err != nil {
		return err
	}
	if demoChatAddr != "" {
		if err := loopback("-demo-chat", demoChatAddr, "127.0.0.1:8082"); err != nil {
			return err
		}
	}
	frameAncestors := strings.Fields(strings.ReplaceAll(getenv("FRAME_ANCESTORS"), ",", " "))
	var crmOrigin string
	if demoCRMAddr != "" {
		var err error
		if crmOrigin, err = demoCRMOrigin(demoCRMAddr, frameAncestors); err != nil {
			return err
		}
	}
	trustedProxies, err := parseTrustedProxies(getenv("TRUSTED_PROXIES"))
	if err != nil {
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
	allowPrivate, err := allowPrivateWebhooks(getenv)
	if err != nil {
		return err
	}
	oidc, err := oidcConfig(getenv)
	if err != nil {
		return err
	}
	hstsPreload, err := boolEnv(getenv, "HSTS_PRELOAD")
	if err != nil {
		return err
	}
	traces, err := tracing.New(ctx, getenv)
	if err != nil {
		return err
	}
	if traces.On() {
		logger.Info("tracing", "endpoint", getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	}
	defer func() {
		// The spans still buffered are worth a moment after the server stopped, not a hang.
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := traces.Shutdown(flushCtx); err != nil {
			logger.Warn("flushing traces", "err", err)
		}
	}()
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		cfg := server.Config{
			Addr:           ln.Addr().String(),
			BaseURL:        getenv("BASE_URL"),
			FrameAncestors: frameAncestors,
			TrustedProxies: trustedProxies,
			// A deployment without CRM links sets it to https, which is always allowed.
			CitationSchemes: strings.Fields(strings.ReplaceAll(cmp.Or(getenv("CITATION_SCHEMES"), "crm policy"), ",", " ")),
			RequestTimeout:  requestTimeout,
			DrainPeriod:     drainPeriod,
			OIDC:            oidc,
			HSTSPreload:     hstsPreload,
		}
		if cfg.BaseURL == "" {
			cfg.BaseURL = "http://localhost:" + portOf(ln.Addr())
		}
		opts := instance.Options{Server: cfg, DatabaseURL: databaseURL(getenv), Webhook: webhook.Options{AllowPrivate: allowPrivate},
			Tracing: traces}
		if addr := getenv("METRICS_ADDR"); addr != "" {
			opts.Metrics, err = net.Listen("tcp", addr)
			if err != nil {
				_ = ln.Close()
				return fmt.Errorf("METRICS_ADDR: %w", err)
			}
			logger.Info("serving metrics", "addr", opts.Metrics.Addr().String(), "url", "http://"+opts.Metrics.Addr().String()+"/metrics")
		}
		if crmOrigin != "" {
			crm, err := net.Listen("tcp", demoCRMAddr)
			if err != nil {
				_ = ln.Close()
				return fmt.Errorf("-demo-crm: %w", err)
			}
			go func() {
				if err := serveDemoCRM(ctx, crm, cfg.BaseURL); err != nil {
					logger.Warn("demo CRM", "err", err)
				}
			}()
			logger.Info("demo CRM framing the sidebar", "url", crmOrigin)
		}
		if demoChatAddr != "" {
			chat, err := net.Listen("tcp", demoChatAddr)
			if err != nil {
				_ = ln.Close()
				return fmt.Errorf("-demo-chat: %w", err)
			}
			bot := demochat.New(demochat.Config{DeskURL: cfg.BaseURL, BotKey: demoBotKey, WebhookSecret: demoWebhookSecret,
				Queue: demoChatQueue, SignIn: "sign in as " + demoUsers[0].user.Email + ", password " + demoPassword, Logger: logger})
			go func() {
				if err := demochat.Serve(ctx, chat, bot); err != nil {
					logger.Warn("demo chat", "err", err)
				}
			}()
			logger.Info("demo customer chat, its bot handing off to the desk", "url", "http://"+demoChatAddr)
		}
		logger.Info("listening", "addr", ln.Addr().String(), "url", cfg.BaseURL, "login", cfg.BaseURL+"/login")
		return instance.Run(ctx, opts, logger, db, ln)
	}, postgres.Traced(traces))
}

// parseTrustedProxies reads TRUSTED_PROXIES: IP addresses and CIDR ranges, space- or
// comma-separated.
func parseTrustedProxies(list string) ([]netip.Prefix, error) {
	var trusted []netip.Prefix
	for _, entry := range strings.Fields(strings.ReplaceAll(list, ",", " ")) {
		if p, err := netip.ParsePrefix(entry); err == nil {
			trusted = append(trusted, p.Masked())
		} else if ip, err := netip.ParseAddr(entry); err == nil && ip.Zone() == "" {
			trusted = append(trusted, netip.PrefixFrom(ip, ip.BitLen()))
		} else {
			return nil, fmt.Errorf("TRUSTED_PROXIES: %q is neither an IP address nor a CIDR range like 10.0.0.0/8", entry)
		}
	}
	return trusted, nil
}

func portOf(addr net.Addr) string {
	if tcp, ok := addr.(*net.TCPAddr); ok {
		return fmt.Sprint(tcp.Port)
	}
	return "8080"
}
