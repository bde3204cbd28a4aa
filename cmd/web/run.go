package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/postgres"
)

const usage = `usage: web [command] [flags]

commands:
  serve        run the desk (the default) [--addr A] [--demo-crm 127.0.0.1:8081: also serve a demo CRM
               page that frames the sidebar, on an origin FRAME_ANCESTORS names] [--demo-chat 127.0.0.1:8082:
               also serve a demo customer chat whose bot hands off to the desk with seed-demo's key]
  migrate      apply database migrations and exit: the deploy step; every other command refuses
               a database that lacks a migration this binary carries
  user add     --email E --name N --role agent|supervisor|admin --password P [--queues a,b] [--capacity N] [--sso-only]
  user disable --email E         turn a login off: its sessions end, its open pages close, its packages go back
  user enable  --email E         turn a login back on
  user role    --email E --role agent|supervisor|admin
  queue add    --name N [--parent P] [--ttl 24h] [--reservation-timeout 2m] [--refund-threshold 50.00]
               [--currency USD] [--approval-timeout 4h] [--accept-window 20s] [--warm-wait 1m]
               [--missed-rings 2]
  queue remove-member --name N --email E
  apikey add   --name N --queues a,b [--webhook-url URL]
  apikey rotate --name N [--overlap 24h]   a new webhook signing secret; the old one signs too until the overlap ends
  user sso-only --email E [--off]          password login off for the user (--off: on again)
  sso unknown-emails refuse|create         what signing in with an email no user has does
  sso unlink   --email E          forget the user's link to their account at the identity provider
  seed-demo    create demo queues, users and a bot key, and print them [--demo-chat 127.0.0.1:8082: where
               the demo chat listens, which the bot key's webhooks go to]
  evals export [--format F] [--queue Q] [--source_agent A] [--kind K] [--since T] [--until T] [--redact] [--role R]
               the eval records as JSON lines on stdout, as GET /evals/export.jsonl gives them
  dashboard rebuild            compute the dashboard's rollup of every hour again (instances refresh it themselves)

environment: DATABASE_URL, DATABASE_ACQUIRE_TIMEOUT, ADDR, BASE_URL, FRAME_ANCESTORS, CITATION_SCHEMES,
             TRUSTED_PROXIES, REQUEST_TIMEOUT, DRAIN_PERIOD, WEBHOOK_ALLOW_PRIVATE, HSTS_PRELOAD, LOG_FORMAT (text|json),
             OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET, OIDC_ALLOWED_DOMAINS
`

// run is the whole program; main only wires it to the process. Tests call it directly.
func run(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) > 0 {
		args = args[1:]
	}
	command := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		command, args = args[0], args[1:]
	}
	if subs, ok := subcommands[command]; ok {
		if len(args) == 0 || !slices.Contains(subs, args[0]) {
			return fmt.Errorf("%s: want %s", command, spelled(command, subs))
		}
		command, args = command+" "+args[0], args[1:]
	}
	logger := newLogger(getenv("LOG_FORMAT"), stdout)
	switch command {
	case "serve":
		return serve(ctx, args, getenv, stdout, logger)
	case "migrate":
		if err := parseFlags("migrate", args, stdout); err != nil {
			return err
		}
		return migrate(ctx, getenv, logger)
	case "user add":
		return userAdd(ctx, args, getenv, stdout, logger)
	case "user disable":
		return userDisable(ctx, args, getenv, stdout, logger)
	case "user enable":
		return userEnable(ctx, args, getenv, stdout, logger)
	case "user role":
		return userRole(ctx, args, getenv, stdout, logger)
	case "queue add":
		return queueAdd(ctx, args, getenv, stdout, logger)
	case "queue remove-member":
		return queueRemoveMember(ctx, args, getenv, stdout, logger)
	case "apikey add":
		return apikeyAdd(ctx, args, getenv, stdout, logger)
	case "apikey rotate":
		return apikeyRotate(ctx, args, getenv, stdout, logger)
	case "user sso-only":
		return userSSOOnly(ctx, args, getenv, stdout, logger)
	case "sso unknown-emails":
		return ssoUnknownEmails(ctx, args, getenv, stdout, logger)
	case "sso unlink":
		return ssoUnlink(ctx, args, getenv, stdout, logger)
	case "seed-demo":
		return seedDemo(ctx, args, getenv, stdout, logger)
	case "evals export":
		return evalsExport(ctx, args, getenv, stdout)
	case "dashboard rebuild":
		return dashboardRebuild(ctx, args, getenv, stdout, logger)
	case "help", "-h", "--help":
		_, err := io.WriteString(stdout, usage)
		return err
	default:
		return fmt.Errorf("unknown command %q (want serve, migrate, user add|disable|role|sso-only, queue add|remove-member, apikey add|rotate, sso unknown-emails|unlink, seed-demo, evals export or dashboard rebuild)", command)
	}
}

// subcommands are the commands that take a second word.
var subcommands = map[string][]string{
	"user":      {"add", "disable", "enable", "role", "sso-only"},
	"queue":     {"add", "remove-member"},
	"apikey":    {"add", "rotate"},
	"evals":     {"export"},
	"sso":       {"unknown-emails", "unlink"},
	"dashboard": {"rebuild"},
}

// spelled lists a command's subcommands as a person reads them: "user add", "user disable" or
// "user role".
func spelled(command string, subs []string) string {
	quoted := make([]string, len(subs))
	for i, sub := range subs {
		quoted[i] = fmt.Sprintf("%q", command+" "+sub)
	}
	if len(quoted) == 1 {
		return quoted[0]
	}
	return strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}

func newLogger(format string, w io.Writer) *slog.Logger {
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, nil))
	}
	return slog.New(slog.NewTextHandler(w, nil))
}

// parseFlags parses a flag set quietly and turns its complaints into one-line errors.
func parseFlags(name string, args []string, stdout io.Writer, define ...func(*flag.FlagSet)) error {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	for _, d := range define {
		d(fs)
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			_, _ = io.WriteString(stdout, usage)
		}
		return fmt.Errorf("%s: %w", name, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%s: unexpected argument %q", name, fs.Arg(0))
	}
	return nil
}

func databaseURL(getenv func(string) string) string {
	if url := getenv("DATABASE_URL"); url != "" {
		return url
	}
	return postgres.DefaultURL
}

// duration reads a duration setting, such as "30s", or def when it is unset.
func duration(getenv func(string) string, name string, def time.Duration) (time.Duration, error) {
	v := getenv(name)
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s: want a duration such as 5s or 1m, not %q", name, v)
	}
	return d, nil
}

// boolEnv reads a boolean variable: unset is false.
func boolEnv(getenv func(string) string, name string) (bool, error) {
	v := getenv(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: want true or false, not %q", name, v)
	}
	return b, nil
}

// allowPrivateWebhooks reads WEBHOOK_ALLOW_PRIVATE, which lets webhook URLs point at loopback and
// private addresses: for local development and tests, in serve and in apikey add alike.
func allowPrivateWebhooks(getenv func(string) string) (bool, error) {
	v := getenv("WEBHOOK_ALLOW_PRIVATE")
	if v == "" {
		return false, nil
	}
	allow, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("WEBHOOK_ALLOW_PRIVATE: want 1 or 0, not %q", v)
	}
	return allow, nil
}

// withDB opens the database, checks that its schema is one this binary can run on, and runs f.
// Only migrate changes the schema: a migration is a deploy step of its own, run once and watched,
// never a side effect of starting an instance or adding a user (docs/operations.md).
func withDB(ctx context.Context, getenv func(string) string, logger *slog.Logger, f func(*pgxpool.Pool) error, opts ...postgres.Option) error {
	pool, err := openDB(ctx, getenv, opts...)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := postgres.CheckSchema(ctx, pool); err != nil {
		return err
	}
	return f(pool)
}

// migrate is `web migrate`: the database's schema brought up to this binary's.
func migrate(ctx context.Context, getenv func(string) string, logger *slog.Logger) error {
	pool, err := openDB(ctx, getenv)
	if err != nil {
		return err
	}
	defer pool.Close()
	return postgres.Migrate(ctx, pool, logger)
}

func openDB(ctx context.Context, getenv func(string) string, opts ...postgres.Option) (*pgxpool.Pool, error) {
	acquireTimeout, err := duration(getenv, "DATABASE_ACQUIRE_TIMEOUT", postgres.DefaultAcquireTimeout)
	if err != nil {
		return nil, err
	}
	if acquireTimeout == 0 {
		return nil, errors.New("DATABASE_ACQUIRE_TIMEOUT: want a duration above zero, such as 10s")
	}
	return postgres.Open(ctx, databaseURL(getenv), acquireTimeout, opts...)
}
