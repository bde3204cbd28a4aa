package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/sso"
)

// oidcConfig reads OIDC_ISSUER, OIDC_CLIENT_ID, OIDC_CLIENT_SECRET and OIDC_ALLOWED_DOMAINS.
func oidcConfig(getenv func(string) string) (sso.Config, error) {
	domains, err := sso.ParseDomains(getenv("OIDC_ALLOWED_DOMAINS"))
	if err != nil {
		return sso.Config{}, err
	}
	cfg := sso.Config{Issuer: getenv("OIDC_ISSUER"), ClientID: getenv("OIDC_CLIENT_ID"),
		ClientSecret: getenv("OIDC_CLIENT_SECRET"), AllowedDomains: domains}
	if len(domains) > 0 && !cfg.Enabled() {
		return sso.Config{}, fmt.Errorf("OIDC_ALLOWED_DOMAINS is set without OIDC_ISSUER")
	}
	return cfg, cfg.Check()
}

// apikeyRotate gives a key a new webhook signing secret, printed once; the old one goes on
// signing beside it for the overlap, so that the bot can be moved over without losing deliveries.
func apikeyRotate(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	var name string
	var overlap time.Duration
	err := parseFlags("apikey rotate", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&name, "name", "", "key name")
		fs.DurationVar(&overlap, "overlap", auth.DefaultSecretOverlap, "how long the old secret also signs (0: it stops now)")
	})
	if err != nil {
		return err
	}
	if err := required("apikey rotate", map[string]string{"name": name}); err != nil {
		return err
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		people := auth.NewService(db)
		key, err := people.APIKeyByName(ctx, name)
		if err != nil {
			return fmt.Errorf("apikey rotate: %w", err)
		}
		r, err := access.New(db, people).RotateWebhookSecret(ctx, key.ID, overlap, 0)
		if err != nil {
			return fmt.Errorf("apikey rotate: %w", err)
		}
		until := "the old secret no longer signs"
		if !r.PreviousUntil.IsZero() {
			until = "the old secret also signs until " + r.PreviousUntil.UTC().Format(time.RFC3339)
		}
		_, err = fmt.Fprintf(stdout, "API key %q has a new webhook secret (shown once, store it now); %s:\n  webhook secret: %s\n",
			r.Key.Name, until, r.Secret)
		return err
	})
}

// userSSOOnly turns a user's password login off, or on again with --off.
func userSSOOnly(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	var email string
	var off bool
	err := parseFlags("user sso-only", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "login email")
		fs.BoolVar(&off, "off", false, "let the user log in with a password again")
	})
	if err != nil {
		return err
	}
	if err := required("user sso-only", map[string]string{"email": email}); err != nil {
		return err
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		people := auth.NewService(db)
		u, err := enabledUser(ctx, people, email)
		if err == nil {
			err = access.New(db, people).SetSSOOnly(ctx, u.ID, !off, 0)
		}
		if err != nil {
			return fmt.Errorf("user sso-only: %w", err)
		}
		state := "signs in with single sign-on only"
		if off {
			state = "may log in with a password again"
		}
		_, err = fmt.Fprintf(stdout, "user %s %s\n", u.Email, state)
		return err
	})
}

// ssoUnlink ends a user's links to accounts at the identity provider: their next sign-in is
// matched by its verified email again.
func ssoUnlink(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	var email string
	err := parseFlags("sso unlink", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "login email")
	})
	if err != nil {
		return err
	}
	if err := required("sso unlink", map[string]string{"email": email}); err != nil {
		return err
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		people := auth.NewService(db)
		p, err := people.PersonByEmail(ctx, email)
		if err != nil {
			return fmt.Errorf("sso unlink: %w", err)
		}
		unlinked, err := access.New(db, people).UnlinkSSO(ctx, p.ID, 0)
		if err != nil {
			return fmt.Errorf("sso unlink: %w", err)
		}
		what := "was linked to no account at the identity provider"
		if unlinked {
			what = "is no longer linked to their account at the identity provider: their next sign-in is matched by its verified email"
		}
		_, err = fmt.Fprintf(stdout, "user %s %s\n", p.Email, what)
		return err
	})
}

// ssoUnknownEmails sets what signing in with a verified email that no user has does.
func ssoUnknownEmails(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	if len(args) != 1 || (args[0] != sso.RefuseUnknown && args[0] != sso.CreateUnknown) {
		return fmt.Errorf("sso unknown-emails: want refuse or create, not %q", strings.Join(args, " "))
	}
	policy := args[0]
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		if err := access.New(db, auth.NewService(db)).SetUnknownEmails(ctx, policy, 0); err != nil {
			return fmt.Errorf("sso unknown-emails: %w", err)
		}
		what := "are refused"
		if policy == sso.CreateUnknown {
			what = "become agents with no queues"
		}
		_, err := fmt.Fprintf(stdout, "single sign-on: verified emails that no user has %s\n", what)
		return err
	})
}
