package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/queue"
)

func required(command string, flags map[string]string) error {
	for name, value := range flags {
		if strings.TrimSpace(value) == "" {
			return fmt.Errorf("%s: --%s is required", command, name)
		}
	}
	return nil
}

func userAdd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	var email, name, role, password, queues string
	var capacity int
	var ssoOnly bool
	err := parseFlags("user add", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "login email")
		fs.StringVar(&name, "name", "", "display name")
		fs.StringVar(&role, "role", "", "agent, supervisor or admin")
		fs.StringVar(&password, "password", "", "initial password")
		fs.StringVar(&queues, "queues", "", "comma-separated queues the user works")
		fs.IntVar(&capacity, "capacity", auth.DefaultCapacity, "packages held at once")
		fs.BoolVar(&ssoOnly, "sso-only", false, "signs in with single sign-on only (no password needed)")
	})
	if err != nil {
		return err
	}
	needed := map[string]string{"email": email, "name": name, "role": role}
	if !ssoOnly {
		needed["password"] = password
	}
	if err := required("user add", needed); err != nil {
		return err
	}
	parsedRole, err := auth.ParseRole(role)
	if err != nil {
		return fmt.Errorf("user add: %w", err)
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		// Unknown queues are refused before the user exists, so a typo leaves nothing half-made.
		ids, err := queue.NewService(db).IDsByName(ctx, queue.SplitNames(queues))
		if err != nil {
			return fmt.Errorf("user add: %w", err)
		}
		people := auth.NewService(db)
		user, err := access.New(db, people).CreateUser(ctx, auth.NewUser{
			Email: email, DisplayName: name, Role: parsedRole, Password: password, Capacity: capacity, SSOOnly: ssoOnly,
		}, ids, 0)
		if err != nil {
			return fmt.Errorf("user add: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "user %s (%s) added with id %d\n", user.Email, user.Role, user.ID)
		return err
	})
}

func queueAdd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	var n queue.New
	err := parseFlags("queue add", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&n.Name, "name", "", "queue name")
		fs.StringVar(&n.Parent, "parent", "", "parent queue")
		fs.DurationVar(&n.TTL, "ttl", queue.DefaultTTL, "how long an unclaimed package waits before it expires")
		fs.DurationVar(&n.ReservationTimeout, "reservation-timeout", queue.DefaultReservationTimeout, "how long a reservation waits for acknowledgement")
		fs.StringVar(&n.RefundThreshold, "refund-threshold", queue.DefaultRefundThreshold, "refunds above this need a supervisor")
		fs.StringVar(&n.Currency, "currency", queue.DefaultCurrency, "the threshold's currency (ISO 4217); refunds in another always need a supervisor")
		fs.DurationVar(&n.ApprovalTimeout, "approval-timeout", queue.DefaultApprovalTimeout, "how long a refund approval request waits for a decision")
		fs.DurationVar(&n.AcceptWindow, "accept-window", queue.DefaultAcceptWindow, "how long a warm package rings one agent before it rings the next")
		fs.DurationVar(&n.WarmWait, "warm-wait", queue.DefaultWarmWait, "how long a warm package goes on ringing before it waits like any other")
		fs.IntVar(&n.MissedRingsAway, "missed-rings", queue.DefaultMissedRingsAway, "rings an agent may let run out in a row before they are set away")
		fs.BoolVar(&n.AcceptsTopLevelTransfers, "accepts-top-level-transfers", false,
			"a top-level queue: other top-level queues may transfer packages into it")
	})
	if err != nil {
		return err
	}
	if err := required("queue add", map[string]string{"name": n.Name}); err != nil {
		return err
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		q, err := queue.NewService(db).Create(ctx, n)
		if err != nil {
			return fmt.Errorf("queue add: %w", err)
		}
		var topLevel string
		if q.AcceptsTopLevelTransfers {
			topLevel = ", accepts top-level transfers"
		}
		_, err = fmt.Fprintf(stdout, "queue %s added (ttl %s, reservation timeout %s, refund threshold %s %s, approval timeout %s, accept window %s, warm wait %s, away after %d missed rings%s)\n",
			q.Name, q.TTL, q.ReservationTimeout, q.RefundThreshold, q.Currency, q.ApprovalTimeout, q.AcceptWindow, q.WarmWait, q.MissedRingsAway, topLevel)
		return err
	})
}

func apikeyAdd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	var name, queues, webhookURL string
	err := parseFlags("apikey add", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&name, "name", "", "key name (the bot it belongs to)")
		fs.StringVar(&queues, "queues", "", "comma-separated queues the bot may send to")
		fs.StringVar(&webhookURL, "webhook-url", "", "where status webhooks are POSTed")
	})
	if err != nil {
		return err
	}
	if err := required("apikey add", map[string]string{"name": name, "queues": queues}); err != nil {
		return err
	}
	allowPrivate, err := allowPrivateWebhooks(getenv)
	if err != nil {
		return err
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		queueIDs, err := queue.NewService(db).IDsByName(ctx, queue.SplitNames(queues))
		if err != nil {
			return fmt.Errorf("apikey add: %w", err)
		}
		key, err := auth.NewService(db).CreateAPIKey(ctx, auth.NewAPIKey{
			Name: name, QueueIDs: queueIDs, WebhookURL: webhookURL, AllowPrivateWebhook: allowPrivate,
		})
		if err != nil {
			return fmt.Errorf("apikey add: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "API key %q for queues %s (shown once, store it now):\n  key:            %s\n  webhook secret: %s\n",
			key.Name, queues, key.Key, key.WebhookSecret)
		return err
	})
}
