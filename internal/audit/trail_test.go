package audit

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// Every filter of a page, on a log large enough for the planner to care, reads its rows from an
// index in the page's order: no sort, no sequential scan, whatever the log's length.
func TestTrailPagesFromAnIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := pgxpool.New(ctx, pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	var userID, queueID int64
	if err := db.QueryRow(ctx, `INSERT INTO users (email, display_name, role, password_hash)
		VALUES ('sam@example.com', 'Sam', 'supervisor', 'x') RETURNING id`).Scan(&userID); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(ctx, `INSERT INTO queues (name) VALUES ('billing') RETURNING id`).Scan(&queueID); err != nil {
		t.Fatal(err)
	}
	// 50,000 events over 50 days, one in ten by the user and in the queue, one in a hundred a
	// resolution; as on a desk, most are presence changes, which name no one and no queue.
	if _, err := db.Exec(ctx, `
		INSERT INTO events (at, kind, queue_id, actor_user, detail)
		SELECT now() - make_interval(secs => i * 86.4),
			CASE WHEN i % 100 = 0 THEN 'resolved' WHEN i % 10 = 0 THEN 'accepted' WHEN i % 4 = 0 THEN 'reply' ELSE 'presence' END,
			CASE WHEN i % 10 = 0 THEN $2::bigint WHEN i % 4 = 0 THEN $2::bigint + 1 END,
			CASE WHEN i % 10 = 0 THEN $1::bigint END, '{}'
		FROM generate_series(1, 50000) i`, userID, queueID); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(ctx, `ANALYZE events`); err != nil {
		t.Fatal(err)
	}
	after := &Cursor{At: time.Now().Add(-24 * time.Hour), Seq: 1 << 40}
	week := time.Now().Add(-7 * 24 * time.Hour)
	for _, c := range []struct {
		name  string
		f     Filter
		index string
	}{
		{"all", Filter{}, "events_at_idx"},
		{"all but presence", Filter{HidePresence: true}, "events_at_idx"},
		{"actor but presence", Filter{Actor: "sam@example.com", HidePresence: true}, "events_actor_idx"},
		{"queue but presence", Filter{Queue: "billing", HidePresence: true}, "events_queue_idx"},
		{"since", Filter{Since: week}, "events_at_idx"},
		{"actor", Filter{Actor: "sam@example.com"}, "events_actor_idx"},
		{"actor since", Filter{Actor: "SAM@example.com", Since: week}, "events_actor_idx"},
		{"queue", Filter{Queue: "billing"}, "events_queue_idx"},
		{"kind", Filter{Kind: events.Resolved}, "events_kind_idx"},
		{"kind until", Filter{Kind: events.Resolved, Until: week}, "events_kind_idx"},
	} {
		for _, cursor := range []*Cursor{nil, after} {
			sql, args := trailQuery(c.f, cursor, PageSize+1)
			var plan string
			rows, err := db.Query(ctx, "EXPLAIN "+sql, args...)
			if err != nil {
				t.Fatal(err)
			}
			for rows.Next() {
				var line string
				if err := rows.Scan(&line); err != nil {
					t.Fatal(err)
				}
				plan += line + "\n"
			}
			rows.Close()
			if strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan on events") || !strings.Contains(plan, c.index) {
				t.Errorf("%s (cursor %v): want %s in order, without a sort or a scan of the log:\n%s", c.name, cursor != nil, c.index, plan)
			}
		}
	}
}

// Filters the trail cannot read are refused by name.
func TestParseFilterNamesWhatIsWrong(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ query, param string }{
		{"kind=bogus", "kind"},
		{"since=yesterday", "since"},
		{"until=2026-13-01", "until"},
		{"since=2026-06-02&until=2026-06-01", "until"},
		{"colour=red", "colour"},
		{"queue=a&queue=b", "queue"},
		{"presence=yes", "presence"},
	} {
		q, _ := url.ParseQuery(c.query)
		_, err := ParseFilter(q)
		var e *desk.Error
		if err == nil || desk.ErrorCode(err) != desk.BadRequest {
			t.Errorf("%s: %v, want a bad request", c.query, err)
			continue
		}
		if e, _ = err.(*desk.Error); e.Details["param"] != c.param || !strings.Contains(e.Message, c.param) {
			t.Errorf("%s: %q names %q, want %q", c.query, e.Message, e.Details["param"], c.param)
		}
	}
	f, err := ParseFilter(url.Values{"kind": {"resolved"}, "since": {"2026-06-01"}, "after": {"1.2"}}, "after")
	if err != nil || f.Kind != events.Resolved || !f.Since.Equal(time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("ParseFilter = %+v, %v", f, err)
	}
	if got := f.Query().Encode(); got != "kind=resolved&since=2026-06-01" {
		t.Errorf("the filter back as a query: %s", got)
	}
	// Presence changes are left out unless asked for, by the parameter or by their kind.
	for query, hidden := range map[string]bool{"": true, "presence=show": false, "kind=presence": false, "actor=a@example.com": true} {
		q, _ := url.ParseQuery(query)
		f, err := ParseFilter(q)
		if err != nil || f.HidePresence != hidden {
			t.Errorf("%q: hides presence %v (%v), want %v", query, f.HidePresence, err, hidden)
		}
		back, _ := ParseFilter(f.Query())
		if back.HidePresence != hidden {
			t.Errorf("%q: the filter's own query %q hides presence %v, want %v", query, f.Query().Encode(), back.HidePresence, hidden)
		}
	}
	if _, err := ParseCursor("12.x"); desk.ErrorCode(err) != desk.BadRequest {
		t.Errorf("a garbled cursor: %v", err)
	}
	c := Cursor{At: time.UnixMicro(1780000000123456), Seq: 42}
	if got, err := ParseCursor(c.String()); err != nil || got != c {
		t.Errorf("the cursor %v comes back as %v, %v", c, got, err)
	}
}
