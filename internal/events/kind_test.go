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
	var userID int64
	if err := db.QueryRow(ctx, `INSERT INTO users (email, display_name, role, password_hash)
		VALUES ('dana@example.com', 'Dana', 'agent', 'x') RETURNING id`).Scan(&userID); err != nil {
		t.Fatal(err)
	}
	for _, k := range append(Kinds(), "forged") {
		var subject *int64
		if k.NamesPerson() {
			subject = &userID
		}
		_, err := db.Exec(ctx, `INSERT INTO events (kind, subject_user) VALUES ($1, $2)`, k, subject)
		if k == "forged" && (err == nil || !strings.Contains(err.Error(), "events_kind_check")) {
			t.Errorf("kind %q: %v, want the check constraint to refuse it", k, err)
		}
		if k != "forged" && err != nil {
			t.Errorf("kind %q: %v", k, err)
		}
	}
}

// A change of access that named nobody would close nobody's sockets, a ring or a reassignment that
// named nobody would reach no agent's pages; any other change naming a person would be read as one
// of those.
func TestOnlyAccessChangesNameTheirSubject(t *testing.T) {
	t.Parallel()
	db := pgtest.New(t)
	ctx := context.Background()
	var userID int64
	if err := db.QueryRow(ctx, `INSERT INTO users (email, display_name, role, password_hash)
		VALUES ('dana@example.com', 'Dana', 'agent', 'x') RETURNING id`).Scan(&userID); err != nil {
		t.Fatal(err)
	}
	for _, k := range Kinds() {
		var subject *int64
		if !k.NamesPerson() {
			subject = &userID
		}
		_, err := db.Exec(ctx, `INSERT INTO events (kind, subject_user) VALUES ($1, $2)`, k, subject)
		if err == nil || !strings.Contains(err.Error(), "events_subject_user") {
			t.Errorf("kind %q with subject %v: %v, want the check to refuse it", k, subject, err)
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
