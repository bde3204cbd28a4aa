package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
)

// TestMain lets the test binary be the socket farm too: measure starts os.Executable() with
// farmEnv set, which under `go test` is this binary.
func TestMain(m *testing.M) {
	if os.Getenv(farmEnv) != "" {
		if err := serveFarm(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintf(os.Stderr, "farm: %v\n", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func tinyConfig() config {
	return config{
		adminURL:        pgtest.AdminURL(),
		examplePath:     "../../internal/handoff/testdata/harbor-v1.json",
		serverConns:     4,
		scenarios:       []int{1, 2, 3, 4, 5},
		runs:            1,
		users:           10,
		latencySockets:  20,
		latencyPackages: 50,
		latencyRate:     100,
		fanoutSockets:   20,
		fanoutEvents:    2,
		racePackages:    50,
		raceAgents:      5,
		raceVia:         "http",
		raceLimit:       time.Minute,
		webhookWatch:    500 * time.Millisecond,
		pagePackages:    60, // more than a page, so page 2 exists
		pageRequests:    10,
		pageConcurrency: 2,
		collectTimeout:  time.Minute, // a deadline for a busy machine: collecting ends as soon as every card arrived
	}
}

// TestEveryScenarioIsCorrect runs the whole tool at tiny sizes and checks what decides its exit
// status: every socket got every card, no package was claimed twice, every page answered.
func TestEveryScenarioIsCorrect(t *testing.T) {
	var out strings.Builder
	res, err := measure(t.Context(), tinyConfig(), &out)
	if err != nil {
		t.Fatalf("measure: %v\n%s", err, out.String())
	}
	if len(res.failures) > 0 {
		t.Errorf("correctness failures: %q\n%s", res.failures, out.String())
	}

	if res.latency == nil || res.fanout == nil || res.race == nil || res.page == nil {
		t.Fatalf("a scenario did not report: %+v", res)
	}
	l := res.latency
	if l.missing != 0 || len(l.all) != l.packages*l.sockets || len(l.first) != l.packages {
		t.Errorf("latency: want %d×%d arrivals and none missing, got %+v", l.packages, l.sockets, l)
	}
	for _, d := range l.all {
		if d <= 0 {
			t.Fatalf("an arrival %s is not after its POST: clocks or bookkeeping are wrong", d)
		}
	}
	if loadtest.Percentile(l.notify, 50) <= 0 {
		t.Errorf("NOTIFY baseline measured nothing")
	}

	f := res.fanout
	if len(f.desk.last) != 2 || len(f.bare.last) != 2 || f.desk.missing+f.bare.missing != 0 {
		t.Errorf("fan-out: want 2 events on each side, none missing, got %+v", f)
	}
	if f.frameBytes == 0 || f.desk.idle.inuse() == 0 || f.bare.connectedSockets != 20 {
		t.Errorf("fan-out: frame %d bytes, idle snapshot %+v, bare server saw %d sockets", f.frameBytes, f.desk.idle, f.bare.connectedSockets)
	}

	r := res.race
	if r.accepted != 50 || r.once != 50 || r.double != 0 || r.harnessDouble != 0 || r.left != 0 || r.stuck != 0 {
		t.Errorf("race: want 50 packages each accepted once and resolved, got %+v", r)
	}
	if r.baseClaims != 50 || r.baseDouble != 0 {
		t.Errorf("race baseline: %d claims, %d double, want 50 and 0", r.baseClaims, r.baseDouble)
	}

	p := res.page
	if p.cards1 != 50 || p.cards2 != 10 || !strings.Contains(p.page2Path, "?after=") {
		t.Errorf("page: want 50 cards, then 10 through the more link, got %+v", p)
	}

	var report strings.Builder
	reportTo(&report, res)
	for _, want := range []string{"ingest→frame", "fan-out", "per idle socket", "accepts/s", "GET /queues/{name}", "zero double claims: yes"} {
		if !strings.Contains(report.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, report.String())
		}
	}
	assertDropped(t, res.database)
}

func reportTo(w io.Writer, res result) { report(w, res, time.Second) }

func assertDropped(t *testing.T, database string) {
	t.Helper()
	left, err := loadtest.DatabaseExists(t.Context(), pgtest.AdminURL(), database)
	if err != nil {
		t.Fatal(err)
	}
	if left {
		t.Errorf("database %s was not dropped", database)
	}
}

func TestCardKeys(t *testing.T) {
	frame := []byte(`{"type":"events","mark":"7","fragments":[` +
		`{"target":"card-ho_1","op":"upsert","list":"cards","sort":"2-1","html":"\u003cli id=\"card-x\"\u003e {\"target\":\"card-fake\",\"op\":\"upsert\"}"},` +
		`{"target":"held-ho_1","op":"remove"},{"target":"card-ho_2","op":"remove"},` +
		`{"target":"card-ho_3","op":"upsert","list":"cards","sort":"2-2","html":""}]}`)
	got := cardKeys(frame)
	if strings.Join(got, ",") != "ho_1,ho_3" {
		t.Errorf("cardKeys = %q, want [ho_1 ho_3]", got)
	}
	if got := cardKeys(bareFrame("bare_000001", 2400)); len(got) != 1 || got[0] != "bare_000001" {
		t.Errorf("cardKeys(bareFrame) = %q", got)
	}
	if n := len(bareFrame("k", 2400)); n != 2400 {
		t.Errorf("bareFrame is %d bytes, want 2400", n)
	}
}

func TestMoreLink(t *testing.T) {
	page := []byte(`<a href="/queues/q?after=2.1795242257547975.1094" class="mt-3" data-testid="more">Older</a>`)
	if got := moreLink(page); got != "/queues/q?after=2.1795242257547975.1094" {
		t.Errorf("moreLink = %q", got)
	}
	if got := moreLink([]byte(`<p>no more</p>`)); got != "" {
		t.Errorf("moreLink of a last page = %q, want empty", got)
	}
}
