package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/queue"
)

// The commands that change someone's access go through package access, as the admin console
// will: each change is logged, and every running instance closes the person's open pages.

func userDisable(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	var email string
	err := parseFlags("user disable", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "login email")
	})
	if err != nil {
		return err
	}
	if err := required("user disable", map[string]string{"email": email}); err != nil {
		return err
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		people := auth.NewService(db)
		u, err := enabledUser(ctx, people, email)
		if err != nil {
			return fmt.Errorf("user disable: %w", err)
		}
		if err := access.New(db, people).Disable(ctx, u.ID, 0); err != nil {
			return fmt.Errorf("user disable: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "user %s disabled: their sessions ended and their open pages closed\n", u.Email)
		return err
	})
}

func userEnable(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	var email string
	err := parseFlags("user enable", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "login email")
	})
	if err != nil {
		return err
	}
	if err := required("user enable", map[string]string{"email": email}); err != nil {
		return err
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		people := auth.NewService(db)
		p, err := people.PersonByEmail(ctx, email)
		if err != nil {
			return fmt.Errorf("user enable: %w", err)
		}
		if err := access.New(db, people).Enable(ctx, p.ID, 0); err != nil {
			return fmt.Errorf("user enable: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "user %s enabled: they can log in again\n", p.Email)
		return err
	})
}

func userRole(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	var email, role string
	err := parseFlags("user role", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&email, "email", "", "login email")
		fs.StringVar(&role, "role", "", "agent, supervisor or admin")
	})
	if err != nil {
		return err
	}
	if err := required("user role", map[string]string{"email": email, "role": role}); err != nil {
		return err
	}
	parsedRole, err := auth.ParseRole(role)
	if err != nil {
		return fmt.Errorf("user role: %w", err)
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		people := auth.NewService(db)
		u, err := enabledUser(ctx, people, email)
		if err != nil {
			return fmt.Errorf("user role: %w", err)
		}
		if err := access.New(db, people).SetRole(ctx, u.ID, parsedRole, 0); err != nil {
			return fmt.Errorf("user role: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "user %s is %s (was %s)\n", u.Email, parsedRole, u.Role)
		return err
	})
}

func queueRemoveMember(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	var name, email string
	err := parseFlags("queue remove-member", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&name, "name", "", "queue name")
		fs.StringVar(&email, "email", "", "the member's login email")
	})
	if err != nil {
		return err
	}
	if err := required("queue remove-member", map[string]string{"name": name, "email": email}); err != nil {
		return err
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		people := auth.NewService(db)
		q, err := queue.NewService(db).ByName(ctx, name)
		if err != nil {
			return fmt.Errorf("queue remove-member: %w", err)
		}
		u, err := enabledUser(ctx, people, email)
		if err != nil {
			return fmt.Errorf("queue remove-member: %w", err)
		}
		err = access.New(db, people).RemoveMember(ctx, u.ID, q, 0)
		if desk.ErrorCode(err) == desk.NotFound {
			return fmt.Errorf("queue remove-member: %s does not work %s", u.Email, q.Name)
		}
		if err != nil {
			return fmt.Errorf("queue remove-member: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "%s no longer works %s\n", u.Email, q.Name)
		return err
	})
}

// enabledUser finds the enabled user with this email, saying which email it was when there is none.
func enabledUser(ctx context.Context, people *auth.Service, email string) (auth.User, error) {
	u, err := people.UserByEmail(ctx, email)
	if desk.ErrorCode(err) == desk.NotFound {
		return auth.User{}, desk.Errorf(desk.NotFound, "no enabled user has email %s", email)
	}
	return u, err
}
