package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/dashboard"
	"github.com/handoffdesk/desk/internal/evals/evalstest"
	"github.com/handoffdesk/desk/internal/handoff"
)

// web evals export writes the export to stdout with the route's options as flags, and refuses
// what the route refuses, naming it.
func TestEvalsExportCommand(t *testing.T) {
	t.Parallel()
	getenv := env(t)
	// The seed's history (seedHistory) ends hours before now; its own replies are sent now.
	since := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	if out, err := runCommand(t, getenv, "seed-demo"); err != nil {
		t.Fatalf("seed-demo: %v\n%s", err, out)
	}
	lines := func(args ...string) []map[string]any {
		t.Helper()
		out, err := runCommand(t, getenv, append([]string{"evals", "export", "--since", since}, args...)...)
		if err != nil {
			t.Fatalf("evals export %v: %v\n%s", args, err, out)
		}
		var ls []map[string]any
		for line := range strings.Lines(out) {
			var v map[string]any
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("evals export %v: line %q: %v", args, line, err)
			}
			ls = append(ls, v)
		}
		return ls
	}
	recs := lines()
	if len(recs) != 6 {
		t.Fatalf("the demo's records: %d lines, want its 3 replies and 3 resolutions", len(recs))
	}
	for _, r := range recs {
		if r["schema"] != "handoff-desk.eval/1" || r["kind"] == nil {
			t.Errorf("record %v", r)
		}
	}
	if got := lines("--kind", "reply"); len(got) != 3 {
		t.Errorf("--kind reply: %d lines, want 3", len(got))
	}
	dpo := lines("--format", "openai-dpo", "--redact")
	if len(dpo) != 1 || dpo[0]["input"] == nil || dpo[0]["preferred_output"] == nil {
		t.Errorf("--format openai-dpo: %v, want the demo's one edited draft", dpo)
	}
	for _, tc := range []struct {
		args []string
		name string
	}{
		{[]string{"--format", "csv"}, "format"},
		{[]string{"--kind", "edit"}, "kind"},
		{[]string{"--queue", "nowhere"}, "queue"},
		{[]string{"--role", "boss"}, "role"},
	} {
		out, err := runCommand(t, getenv, append([]string{"evals", "export"}, tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.name) || out != "" {
			t.Errorf("evals export %v: %v, printing %q; want an error naming %s and nothing printed", tc.args, err, out, tc.name)
		}
	}
}

// seed-demo leaves the dashboard figures to show: weeks of resolved, returned and canceled
// packages, repeat contacts among them, and drafts sent as is; a second seed adds nothing.
func TestSeedDemoGivesTheDashboardAHistory(t *testing.T) {
	t.Parallel()
	getenv := env(t)
	if out, err := runCommand(t, getenv, "seed-demo"); err != nil {
		t.Fatalf("seed-demo: %v\n%s", err, out)
	}
	ctx := context.Background()
	db, err := pgxpool.New(ctx, getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func() int {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM handoffs`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	if out, err := runCommand(t, getenv, "seed-demo"); err != nil {
		t.Fatalf("second seed-demo: %v\n%s", err, out)
	}
	if after := count(); after != before {
		t.Errorf("a second seed-demo: %d packages, then %d", before, after)
	}
	w, err := dashboard.ParseWindow("30d")
	if err != nil {
		t.Fatal(err)
	}
	s, err := dashboard.Read(ctx, db, dashboard.Filter{Window: w, Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []dashboard.Figures{s.Current, s.Previous} {
		if f.In == 0 || f.Resolved == 0 || f.Returned == 0 || f.Canceled == 0 || f.Repeats == 0 || f.AsIs == 0 || f.Drafts == f.AsIs {
			t.Errorf("the demo's figures %s – %s: %+v; want packages in, resolved, returned, canceled, repeats and drafts both ways",
				f.From.Format(time.DateTime), f.To.Format(time.DateTime), f)
		}
	}
	// Read from the rollup once built, the demo's figures are the same.
	out, err := runCommand(t, getenv, "dashboard", "rebuild")
	if err != nil || !strings.Contains(out, "rebuilt the dashboard's rollup: ") {
		t.Fatalf("dashboard rebuild: %v\n%s", err, out)
	}
	rolled, err := dashboard.Read(ctx, db, dashboard.Filter{Window: w, Now: s.Current.To})
	if err != nil {
		t.Fatal(err)
	}
	if rolled.Current.In != s.Current.In || rolled.Previous.Repeats != s.Previous.Repeats || rolled.Current.AsIs != s.Current.AsIs {
		t.Errorf("from the rollup: %+v\nwant %+v", rolled.Current, s.Current)
	}
}

// Every line the demo desk exports in a trainer's format passes that trainer's rules (see
// evalstest), as an admin and a supervisor see it and redacted, and no mask reaches it.
func TestDemoExportPassesTheTrainersRules(t *testing.T) {
	t.Parallel()
	getenv := env(t)
	if out, err := runCommand(t, getenv, "seed-demo"); err != nil {
		t.Fatalf("seed-demo: %v\n%s", err, out)
	}
	for _, format := range []string{"openai-sft", "openai-dpo", "trl-preference", "kto"} {
		for _, as := range [][]string{{"--role", "admin"}, {"--role", "supervisor"}, {"--redact"}} {
			out, err := runCommand(t, getenv, append([]string{"evals", "export", "--format", format}, as...)...)
			if err != nil {
				t.Fatalf("evals export %s %v: %v", format, as, err)
			}
			n := 0
			for line := range strings.Lines(out) {
				n++
				if err := evalstest.Check(format, []byte(line)); err != nil {
					t.Errorf("%s %v line %d: %v\n%s", format, as, n, err, line)
				}
				if strings.Contains(line, handoff.Masked) {
					t.Errorf("%s %v line %d holds a mask:\n%s", format, as, n, line)
				}
			}
			if n < 20 {
				t.Errorf("%s %v: %d lines; the demo has more replies than that", format, as, n)
			}
		}
	}
}

// historyWords are the words seedHistory writes in its packages and replies.
var historyWords = strings.FieldsFunc(strings.ToLower("Customer asks about order and its refund. Hi, your refund for order is on its way; "+
	"it reaches your card within business days. Hello, I've checked order: the refund went out today and shows within business days."),
	func(r rune) bool { return !unicode.IsLetter(r) })

// The history's contacts have distinct names, none of whose words is a word of the packages'
// own text, which masking would otherwise hide as if it named the customer.
func TestHistoryNamesAreDistinctAndNotWordsOfTheText(t *testing.T) {
	seen := map[string]bool{}
	for n := 1; n <= historyDays*historyPerDay; n++ {
		name := historyName(n)
		if seen[name] {
			t.Fatalf("contact %d is named %q like an earlier one", n, name)
		}
		seen[name] = true
		for _, word := range strings.Fields(name) {
			if slices.Contains(historyWords, strings.ToLower(word)) {
				t.Errorf("%q is a word of the packages' text", word)
			}
		}
	}
}
