package loadtest

import (
	"errors"
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
)

func TestParseInts(t *testing.T) {
	got, err := ParseInts("8, 64,1")
	if err != nil || !slices.Equal(got, []int{8, 64, 1}) {
		t.Errorf(`ParseInts("8, 64,1") = %v, %v; want [8 64 1]`, got, err)
	}
	for _, bad := range []string{"", "0", "8,", "-1", "a", "8,,64", "1.5"} {
		if got, err := ParseInts(bad); err == nil {
			t.Errorf("ParseInts(%q) = %v, want an error", bad, got)
		}
	}
}

func newTestFlags(getenv func(string) string) (*flag.FlagSet, *string, *int) {
	var adminURL string
	fs := NewFlagSet("benchtest", getenv, &adminURL)
	fs.SetOutput(io.Discard)
	runs := fs.Int("runs", 3, "runs")
	fs.String("note", "", "empty by default")
	fs.Bool("quick", false, "quick")
	return fs, &adminURL, runs
}

func TestNewFlagSetDefaultsToTheTestDatabase(t *testing.T) {
	fs, adminURL, _ := newTestFlags(func(string) string { return "" })
	if err := ParseFlags(fs, nil); err != nil {
		t.Fatal(err)
	}
	if *adminURL != DefaultAdminURL {
		t.Errorf("-database-url = %q, want %q", *adminURL, DefaultAdminURL)
	}
	env := "postgres://bench@db.example:5433/postgres"
	fs, adminURL, _ = newTestFlags(func(k string) string {
		if k == "TEST_DATABASE_URL" {
			return env
		}
		return ""
	})
	if err := ParseFlags(fs, nil); err != nil {
		t.Fatal(err)
	}
	if *adminURL != env {
		t.Errorf("-database-url = %q, want TEST_DATABASE_URL %q", *adminURL, env)
	}
	if err := ParseFlags(fs, []string{"-database-url", "postgres://other/postgres"}); err != nil || *adminURL != "postgres://other/postgres" {
		t.Errorf("an explicit -database-url gave %q, %v", *adminURL, err)
	}
}

func TestParseFlagsRefusesArguments(t *testing.T) {
	fs, _, runs := newTestFlags(func(string) string { return "" })
	err := ParseFlags(fs, []string{"-runs", "2", "extra"})
	if err == nil || err.Error() != `unexpected argument "extra"` {
		t.Errorf("ParseFlags with a stray argument = %v", err)
	}
	if *runs != 2 {
		t.Errorf("-runs = %d, want 2", *runs)
	}
	fs, _, _ = newTestFlags(func(string) string { return "" })
	if err := ParseFlags(fs, []string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("ParseFlags(-h) = %v, want flag.ErrHelp", err)
	}
}

func TestCommandLineSpellsOutEveryFlag(t *testing.T) {
	fs, _, _ := newTestFlags(func(string) string { return "postgres://bench:secret@127.0.0.1:5432/postgres?sslmode=disable" })
	if err := ParseFlags(fs, []string{"-runs=5", "-quick"}); err != nil {
		t.Fatal(err)
	}
	want := "go run ./cmd/benchtest -database-url=postgres://bench:xxxxx@127.0.0.1:5432/postgres?sslmode=disable -quick=true -runs=5"
	if got := CommandLine(fs); got != want {
		t.Errorf("CommandLine =\n%s\nwant\n%s", got, want)
	}
	want = "go run ./cmd/benchtest -database-url=postgres://bench:xxxxx@127.0.0.1:5432/postgres?sslmode=disable -runs=5"
	if got := CommandLine(fs, "quick"); got != want {
		t.Errorf("CommandLine without quick =\n%s\nwant\n%s", got, want)
	}
}

func TestPrintHeader(t *testing.T) {
	var out strings.Builder
	PrintHeader(&out, "go run ./cmd/benchtest -runs=1", "client and server")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "command:    go run ./cmd/benchtest -runs=1" ||
		!strings.HasPrefix(lines[1], "Go:         go") || !strings.HasSuffix(lines[1], "(client and server share these)") {
		t.Errorf("PrintHeader wrote:\n%s", out.String())
	}
}

// -quick sets the sizes the command line leaves out, never one it gives, and the command line that
// repeats the run spells them out and says it was a smoke run.
func TestQuickShrinksWhatTheCommandLineLeavesOut(t *testing.T) {
	newFlags := func() (*flag.FlagSet, *Quick, *int, *int) {
		var adminURL string
		fs := NewFlagSet("benchtest", func(string) string { return "" }, &adminURL)
		fs.SetOutput(io.Discard)
		runs := fs.Int("runs", 3, "runs")
		bots := fs.Int("bots", 64, "bots")
		return fs, AddQuick(fs, "smoke run", map[string]string{"runs": "1", "bots": "4"}), runs, bots
	}
	_, quick, runs, bots := newFlags()
	if err := quick.Parse([]string{"-quick", "-bots", "8"}); err != nil {
		t.Fatal(err)
	}
	if *runs != 1 || *bots != 8 {
		t.Errorf("-quick -bots 8: runs %d, bots %d; want 1, 8", *runs, *bots)
	}
	want := "go run ./cmd/benchtest -bots=8 -database-url=" + DefaultAdminURL + " -runs=1 (-quick)"
	if got := quick.CommandLine(); got != want {
		t.Errorf("CommandLine =\n%s\nwant\n%s", got, want)
	}

	_, quick, runs, bots = newFlags()
	if err := quick.Parse([]string{"-bots", "8"}); err != nil {
		t.Fatal(err)
	}
	if *runs != 3 || *bots != 8 || strings.Contains(quick.CommandLine(), "quick") {
		t.Errorf("without -quick: runs %d, bots %d, %q; want the defaults and no -quick", *runs, *bots, quick.CommandLine())
	}
	_, quick, _, _ = newFlags()
	if err := quick.Parse([]string{"-quick", "extra"}); err == nil {
		t.Error("a stray argument after -quick was accepted")
	}
}

func TestParseScenarios(t *testing.T) {
	if got, err := ParseScenarios("1,3", 4); err != nil || !slices.Equal(got, []int{1, 3}) {
		t.Errorf(`ParseScenarios("1,3", 4) = %v, %v`, got, err)
	}
	for _, bad := range []string{"5", "1,5", "0", ""} {
		if got, err := ParseScenarios(bad, 4); err == nil || !strings.HasPrefix(err.Error(), "-scenarios: ") {
			t.Errorf("ParseScenarios(%q, 4) = %v, %v; want an error naming -scenarios", bad, got, err)
		}
	}
}
