package search

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// benchPackages is how many packages make bench-search's desk (BENCH_PACKAGES to change).
const benchPackages = 1_000_000

// seedSQL stores packages $2+1 … $2+$3 as intake would (the trigger indexes each): eight queues
// of unequal size, 40 first and 40 last names, an email and a phone each, problem statements from
// a few dozen words with an order number, entities, and outcomes by share. $1 the queue ids, $4
// the key.
const seedSQL = `
	WITH r AS (
		SELECT g, random() AS a, random() AS c, now() - random() * interval '60 days' AS created
		FROM generate_series($2::int + 1, $2::int + $3::int) g
	), s AS (
		SELECT r.*,
			CASE WHEN r.a < 0.6 THEN 'resolved' WHEN r.a < 0.8 THEN 'returned_to_bot' WHEN r.a < 0.9 THEN 'queued' ELSE 'accepted' END AS status,
			(ARRAY['Dana','Lee','Ana','Omar','Mei','Ivan','Sara','Tom','Nia','Raj','Eva','Ken','Lia','Max','Zoe','Ben','Ada','Leo','Ivy','Sam',
				'Noor','Finn','Maya','Hugo','Ines','Jon','Kim','Luca','Mila','Otto','Pia','Rui','Sven','Tara','Uma','Vera','Wim','Yara','Zeno','Aiko'])
				[1 + (g * 7) % 40] AS first,
			(ARRAY['Whitfield','Park','Silva','Haddad','Chen','Petrov','Cohen','Baker','Okafor','Patel','Novak','Sato','Rossi','Meyer','Nguyen',
				'Berg','Lind','Moreau','Kaur','Fischer','Garcia','Jensen','Kowalski','Larsen','Murphy','Nilsen','Olsen','Pereira','Quinn','Reyes',
				'Schmidt','Tanaka','Ueda','Vargas','Weber','Xu','Young','Zimmer','Abe','Brandt'])[1 + (g * 13) % 40] AS last,
			(ARRAY['refund','charge','invoice','password','delivery','upgrade','cancel','address','card','login','warranty','discount'])
				[1 + (g * 5) % 12] AS topic,
			(ARRAY['policy_boundary','low_confidence','tool_failure','user_request','sla_sentiment','capability_mismatch'])[1 + g % 6] AS trigger
		FROM r
	)
	INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package, body_sha256,
		expires_at, created_at, enqueued_at, accepted_at, closed_at, outcome, repeat_contact)
	SELECT 'ho_' || s.g, $4, ($1::bigint[])[1 + floor(pow(s.c, 1.5) * cardinality($1::bigint[]))::int], s.status, 1, 'cust_' || (s.g % 400000),
		'bot-' || s.g % 5,
		json_build_object('schema_version', '1.0', 'handoff_id', 'ho_' || s.g, 'trigger', s.trigger, 'source_agent', 'bot-' || s.g % 5,
			'contact', json_build_object('id', 'cust_' || (s.g % 400000), 'display_name', s.first || ' ' || s.last,
				'email', lower(s.first || '.' || s.last || (s.g % 400000)) || '@example.com', 'phone', '+1-415-555-' || lpad((s.g % 10000)::text, 4, '0')),
			'problem_statement', 'Customer asks about the ' || s.topic || ' on order ' || (s.g * 17) || ' placed last week.',
			'recommended_next_step', 'Check the ' || s.topic || ' history and reply.',
			'structured_entities', json_build_object('account_id', 'acct_' || (s.g % 400000), 'order_id', 'ord_' || (s.g * 17))),
		'\x00', s.created + interval '1 day', s.created, s.created,
		CASE WHEN s.status <> 'queued' THEN s.created + interval '3 minutes' END,
		CASE WHEN s.status IN ('resolved', 'returned_to_bot') THEN s.created + interval '20 minutes' END,
		CASE s.status WHEN 'resolved' THEN 'solved' WHEN 'returned_to_bot' THEN 'needs_more_info' END,
		s.g % 7 = 0
	FROM s`

// BenchmarkSearch is make bench-search: it seeds a desk of a million packages, then times, as a
// supervisor and as an agent of two queues, the searches people type (a package id, a contact id,
// an email, a phone, part of a name, a rare and a common word, filters alone), each a first page
// as /packages reads it, and the counts /packages makes for the dashboard's figures, beside a
// plain index lookup and a count(*) of a queue in the same run.
func BenchmarkSearch(b *testing.B) {
	ctx := context.Background()
	db := pgtest.New(b)
	n := benchPackages
	if v := os.Getenv("BENCH_PACKAGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	var queues []int64
	for i := range 8 {
		var id int64
		if err := db.QueryRow(ctx, `INSERT INTO queues (name) VALUES ($1) RETURNING id`, fmt.Sprintf("q%d", i)).Scan(&id); err != nil {
			b.Fatal(err)
		}
		queues = append(queues, id)
	}
	var keyID int64
	if err := db.QueryRow(ctx, `INSERT INTO api_keys (name, key_prefix, key_hash, webhook_secret) VALUES ('bench', 'bench', '\x00', 's')
		RETURNING id`).Scan(&keyID); err != nil {
		b.Fatal(err)
	}
	sup, err := auth.CreateUser(ctx, db, auth.NewUser{Email: "sup@example.com", DisplayName: "Sup", Role: auth.RoleSupervisor, Password: "long-enough"})
	if err != nil {
		b.Fatal(err)
	}
	agent, err := auth.CreateUser(ctx, db, auth.NewUser{Email: "agent@example.com", DisplayName: "Agent", Role: auth.RoleAgent, Password: "long-enough"})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `INSERT INTO queue_members (queue_id, user_id) VALUES ($1, $3), ($2, $3)`, queues[0], queues[1], agent.ID); err != nil {
		b.Fatal(err)
	}
	started := time.Now()
	const chunk = 100_000
	for done := 0; done < n; done += chunk {
		if _, err := db.Exec(ctx, seedSQL, queues, done, min(chunk, n-done), keyID); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.Exec(ctx, `VACUUM ANALYZE handoffs, package_search`); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("seeded %d packages (with package_search by the trigger) in %s\n", n, time.Since(started).Round(time.Second))
	s := New(db)
	substrings, err := s.Substrings(ctx)
	if err != nil {
		b.Fatal(err)
	}
	mid := n / 2
	var email string
	if err := db.QueryRow(ctx, `SELECT package->'contact'->>'email' FROM handoffs WHERE handoff_id = $1`, fmt.Sprintf("ho_%d", mid)).Scan(&email); err != nil {
		b.Fatal(err)
	}
	searches := []struct {
		name string
		f    Filter
	}{
		{"package id", Filter{Q: fmt.Sprintf("ho_%d", mid)}},
		{"contact id", Filter{Q: fmt.Sprintf("cust_%d", mid%400000)}},
		{"email", Filter{Q: email}},
		{"phone", Filter{Q: "+1-415-555-0042"}},
		{"part of a name", Filter{Q: "whitf"}},
		{"name", Filter{Q: "Dana Whitfield"}},
		{"rare word (order no.)", Filter{Q: strconv.Itoa(mid * 17)}},
		{"common word", Filter{Q: "warranty"}},
		{"word + filters", Filter{Q: "refund", Status: "resolved", Trigger: "policy_boundary"}},
		{"filters only", Filter{Queue: "q1", Status: "returned_to_bot", Outcome: "needs_more_info"}},
		{"past SLA, repeat", Filter{SLABreached: ptr(false), Repeat: ptr(true)}},
		{"no filter", Filter{}},
	}
	const runs = 25
	type timing struct{ p50, p95 time.Duration }
	measure := func(f func() error) timing {
		var ds []time.Duration
		for range runs {
			start := time.Now()
			if err := f(); err != nil {
				b.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return timing{ds[len(ds)/2], ds[len(ds)*95/100]}
	}
	var table strings.Builder
	table.WriteString("search\tas\tfound\tp50 ms\tp95 ms\t\n")
	row := func(name, as string, found int, t timing) {
		fmt.Fprintf(&table, "%s\t%s\t%d\t%.1f\t%.1f\t\n", name, as, found, ms(t.p50), ms(t.p95))
	}
	var one int64
	row("baseline: index lookup of a package id", "-", 1, measure(func() error {
		return db.QueryRow(ctx, `SELECT id FROM handoffs WHERE handoff_id = $1`, fmt.Sprintf("ho_%d", mid)).Scan(&one)
	}))
	var count int
	row("baseline: count(*) of queue q3", "-", 0, measure(func() error {
		return db.QueryRow(ctx, `SELECT count(*) FROM handoffs WHERE queue_id = $1`, queues[3]).Scan(&count)
	}))
	for _, who := range []struct {
		name string
		user auth.User
	}{{"supervisor", sup}, {"agent", agent}} {
		for _, sr := range searches {
			var found int
			t := measure(func() error {
				rs, _, err := s.Page(ctx, who.user, sr.f, 0, PageSize)
				found = len(rs)
				return err
			})
			row(sr.name, who.name, found, t)
		}
	}
	// The counts /packages makes for a dashboard's figures: a period's packages in, of all queues
	// (the supervisor's) or of the agent's two, with a figure's filters.
	now := time.Now()
	day, week, month := Filter{Since: now.Add(-24 * time.Hour), Until: now}, Filter{Since: now.Add(-7 * 24 * time.Hour), Until: now},
		Filter{Since: now.Add(-30 * 24 * time.Hour), Until: now}
	counts := []struct {
		name string
		f    Filter
	}{
		{"count: 24 h", day},
		{"count: 24 h, repeat contacts", func() Filter { f := day; f.Repeat = ptr(true); return f }()},
		{"count: 7 d, returned for a reason", func() Filter {
			f := week
			f.Status, f.Outcome = "returned_to_bot", "needs_more_info"
			return f
		}()},
		{"count: 30 d", month},
		{"count: 30 d of queue q1, accepted", func() Filter { f := month; f.Queue, f.Accepted = "q1", ptr(true); return f }()},
	}
	for _, who := range []struct {
		name string
		user auth.User
	}{{"supervisor", sup}, {"agent", agent}} {
		for _, c := range counts {
			var found int
			t := measure(func() error {
				n, err := s.Count(ctx, who.user, c.f)
				found = n.Packages
				return err
			})
			row(c.name, who.name, found, t)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("packages %d, pg_trgm %v, %d runs each, load average %s\n", n, substrings, runs, strings.TrimSpace(string(load)))
	out := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	if _, err := out.Write([]byte(table.String())); err != nil {
		b.Fatal(err)
	}
	if err := out.Flush(); err != nil {
		b.Fatal(err)
	}
}

func ptr[T any](v T) *T { return &v }

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
