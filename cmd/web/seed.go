package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/queue"
)

// The demo's secrets are fixed so that every `make run` can print them; they are for a local
// desk only and say so.
const (
	demoPassword      = "handoff-demo"
	demoBotKey        = "hdk_demo-bot_local-demo-key-not-for-production"
	demoWebhookSecret = "whsec_local-demo-secret-not-for-production" //nolint:gosec // G101: a published demo secret for local desks, printed by every `make run` on purpose.
)

// The two teams take each other's misrouted packages, so the demo shows a transfer out of the box.
var demoQueues = []queue.New{
	{Name: "billing_t2", AcceptsTopLevelTransfers: true},
	{Name: "billing_escalations", Parent: "billing_t2"},
	{Name: "tech_t2", AcceptsTopLevelTransfers: true},
}

var demoUsers = []struct {
	user   auth.NewUser
	queues []string
}{
	{auth.NewUser{Email: "agent@example.com", DisplayName: "Alex Agent", Role: auth.RoleAgent}, []string{"billing_t2", "tech_t2"}},
	{auth.NewUser{Email: "agent2@example.com", DisplayName: "Bea Agent", Role: auth.RoleAgent}, []string{"billing_t2", "billing_escalations"}},
	{auth.NewUser{Email: "supervisor@example.com", DisplayName: "Sam Supervisor", Role: auth.RoleSupervisor}, []string{"billing_t2", "billing_escalations", "tech_t2"}},
	{auth.NewUser{Email: "admin@example.com", DisplayName: "Ada Admin", Role: auth.RoleAdmin}, nil},
}

// ignoreConflict lets the seed run again on a seeded database.
func ignoreConflict(err error) error {
	if desk.ErrorCode(err) == desk.Conflict {
		return nil
	}
	return err
}

func seedDemo(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	if err := parseFlags("seed-demo", args, stdout); err != nil {
		return err
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		queues, users := queue.NewService(db), auth.NewService(db)
		for _, q := range demoQueues {
			if _, err := queues.Create(ctx, q); ignoreConflict(err) != nil {
				return fmt.Errorf("seed-demo: queue %s: %w", q.Name, err)
			}
		}
		for _, d := range demoUsers {
			d.user.Password = demoPassword
			if _, err := users.CreateUser(ctx, d.user); ignoreConflict(err) != nil {
				return fmt.Errorf("seed-demo: user %s: %w", d.user.Email, err)
			}
			u, err := users.UserByEmail(ctx, d.user.Email)
			if err != nil {
				return fmt.Errorf("seed-demo: user %s: %w", d.user.Email, err)
			}
			if err := queues.AddMembers(ctx, u.ID, d.queues); err != nil {
				return fmt.Errorf("seed-demo: user %s: %w", d.user.Email, err)
			}
		}
		queueIDs, err := queues.IDsByName(ctx, []string{"billing_t2", "tech_t2"})
		if err != nil {
			return fmt.Errorf("seed-demo: %w", err)
		}
		_, err = users.InsertAPIKeyWithSecrets(ctx, auth.NewAPIKey{Name: "demo-bot", QueueIDs: queueIDs}, demoBotKey, demoWebhookSecret)
		if ignoreConflict(err) != nil {
			return fmt.Errorf("seed-demo: api key: %w", err)
		}
		if _, err := fmt.Fprintln(stdout, "Demo desk ready. Log in with any of these (password "+demoPassword+"):"); err != nil {
			return err
		}
		for _, d := range demoUsers {
			if _, err := fmt.Fprintf(stdout, "  %-24s %s\n", d.user.Email, d.user.Role); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintf(stdout, "Demo bot key (queues billing_t2, tech_t2): %s\n", demoBotKey)
		return err
	})
}
