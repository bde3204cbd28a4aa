package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/evals"
)

// evalsExport writes the eval export to stdout, read with the options of GET /evals/export.jsonl
// (one flag per query parameter, the same names), as role would download it. Its logger is
// discarded: stdout carries the lines, and a log line among them would break the file.
func evalsExport(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	values := map[string]*string{}
	var redact bool
	role := string(auth.RoleAdmin)
	err := parseFlags("evals export", args, stdout, func(fs *flag.FlagSet) {
		for _, name := range evals.FilterParams() {
			if name == "redact" {
				fs.BoolVar(&redact, name, false, "replace the customer's details with placeholders")
				continue
			}
			values[name] = fs.String(name, "", "as the query parameter "+name)
		}
		fs.StringVar(&role, "role", role, "mask as this role would see the records: supervisor or admin")
	})
	if err != nil {
		return err
	}
	q := url.Values{}
	for name, v := range values {
		if *v != "" {
			q.Set(name, *v)
		}
	}
	if redact {
		q.Set("redact", "true")
	}
	f, err := evals.ParseFilter(q)
	if err != nil {
		return fmt.Errorf("evals export: %s", desk.ErrorMessage(err))
	}
	r, err := auth.ParseRole(role)
	if err != nil {
		return fmt.Errorf("evals export: --role: %w", err)
	}
	return withDB(ctx, getenv, slog.New(slog.DiscardHandler), func(db *pgxpool.Pool) error {
		_, err := evals.Export(ctx, db, r, f, stdout, nil)
		if desk.ErrorCode(err) == desk.BadRequest {
			return fmt.Errorf("evals export: %s", desk.ErrorMessage(err))
		}
		if err != nil {
			return fmt.Errorf("evals export: %w", err)
		}
		return nil
	})
}
