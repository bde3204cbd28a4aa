package events

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// The Go list of kinds and the table's check constraint must agree: a kind only Go knows would
// fail its change's transaction, and one only the table knows would go unread.
func TestKindsAreTheTablesKinds(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	for _, k := range append(Kinds(), "forged") {
		_, err := db.Exec(ctx, `INSERT INTO events (kind) VALUES ($1)`, k)
		if k == "forged" && (err == nil || !strings.Contains(err.Error(), "events_kind_check")) {
			t.Errorf("kind %q: %v, want the check constraint to refuse it", k, err)
		}
		if k != "forged" && err != nil {
			t.Errorf("kind %q: %v", k, err)
		}
	}
}

func TestQueueRefusesAnUnknownKind(t *testing.T) {
	t.Parallel()
	if err := Queue(&pgx.Batch{}, Change{PublicID: "h1", Kind: "exploded", At: time.Now()}); err == nil {
		t.Fatal("Queue accepted the kind exploded")
	}
}

func TestLogIsAppendOnly(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO events (kind) VALUES ('presence')`); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{`UPDATE events SET kind = 'queued'`, `DELETE FROM events`, `TRUNCATE events`} {
		if _, err := db.Exec(ctx, sql); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want the database to refuse", sql, err)
		}
	}
}
