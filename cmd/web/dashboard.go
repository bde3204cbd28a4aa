package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/dashboard"
)

// dashboardRebuild computes every hour of the dashboard's rollup again, from the packages as they
// stand: after restoring a backup, say. Instances keep it up to date on their own.
func dashboardRebuild(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	if err := parseFlags("dashboard rebuild", args, stdout); err != nil {
		return err
	}
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		r, err := dashboard.Rebuild(ctx, db)
		if err != nil {
			return fmt.Errorf("dashboard rebuild: %w", err)
		}
		_, err = fmt.Fprintf(stdout, "rebuilt the dashboard's rollup: %d hours\n", r.Hours)
		return err
	})
}
