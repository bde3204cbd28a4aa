package main

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// section is one scenario's report: a table of figures, each an invariant (PASS/FAIL, deciding
// the exit status), an expectation (ok/MISS, informational) or a plain figure, then notes.
type section struct {
	n      int
	title  string
	took   time.Duration
	rows   [][4]string // figure, value, wanted, verdict
	notes  []string
	failed []string
	missed []string
	// counts are figures a test reads: how often each path of the run was taken.
	counts map[string]int
}

func (s *section) info(figure, value string) {
	s.rows = append(s.rows, [4]string{figure, value, "", ""})
}

// invariant is a figure the desk promises; a failure makes the run fail.
func (s *section) invariant(figure, value, want string, ok bool) {
	verdict := "PASS"
	if !ok {
		verdict = "FAIL"
		s.failed = append(s.failed, fmt.Sprintf("%d: %s: %s, want %s", s.n, figure, value, want))
	}
	s.rows = append(s.rows, [4]string{figure, value, want, verdict})
}

// expect is a figure with a target worth meeting that the run does not fail on.
func (s *section) expect(figure, value, want string, ok bool) {
	verdict := "ok"
	if !ok {
		verdict = "MISS"
		s.missed = append(s.missed, strings.TrimSpace(figure))
	}
	s.rows = append(s.rows, [4]string{figure, value, want, verdict})
}

func (s *section) note(format string, args ...any) {
	s.notes = append(s.notes, fmt.Sprintf(format, args...))
}

// unexpected adds what errs counted, if anything, as an expectation of none, with the first few.
func (s *section) unexpected(figure string, errs *loadtest.ErrorLog) {
	if n := errs.Count(); n > 0 {
		s.expect(figure, fmt.Sprintf("%d, first: %q", n, errs.Samples()), "0", false)
	}
}

// refusals expects every answer in phases of the tallies that refused (as refused tells from its
// kind) to be a 503 with Retry-After, which tells a client when to come back, and some to have come.
func (s *section) refusals(figure string, refused func(kind string) bool, tallies []*tally, phases ...string) {
	n, other := 0, 0
	for _, t := range tallies {
		for _, p := range phases {
			n += t.count(p, refused)
			other += t.count(p, func(k string) bool {
				return refused(k) && (!strings.HasPrefix(k, "503 ") || !strings.Contains(k, "Retry-After"))
			})
		}
	}
	s.expect(figure, fmt.Sprintf("%d of %d", n-other, n), "all", other == 0 && n > 0)
}

// answers notes the answers t counted, a line a phase, each after who got them.
func (s *section) answers(who string, t *tally) {
	for _, l := range t.lines() {
		s.note("%s %s", who, l)
	}
}

func (s *section) print(w io.Writer) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  figure\tvalue\twanted\tverdict")
	for _, r := range s.rows {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", r[0], r[1], r[2], r[3])
	}
	tw.Flush()
	for _, n := range s.notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	fmt.Fprintf(w, "  (scenario took %s)\n", s.took.Round(time.Second))
}

// summary prints the scenario's verdict line and returns its failed invariants.
func (s *section) summary(w io.Writer) []string {
	verdict := "PASS"
	if len(s.failed) > 0 {
		verdict = "FAIL: " + strings.Join(s.failed, "; ")
	}
	missed := ""
	if len(s.missed) > 0 {
		missed = fmt.Sprintf("; MISS: %s", strings.Join(s.missed, ", "))
	}
	fmt.Fprintf(w, "  %d. %-45s invariants %s%s\n", s.n, s.title, verdict, missed)
	return s.failed
}

// tally counts answers by phase and kind, for the lines under a table.
type tally struct {
	mu     sync.Mutex
	phases []string // in the order of the run
	counts map[string]map[string]int
}

func newTally(phases ...string) *tally {
	t := &tally{phases: phases, counts: map[string]map[string]int{}}
	for _, p := range phases {
		t.counts[p] = map[string]int{}
	}
	return t
}

func (t *tally) add(phase, kind string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.counts[phase][kind]++
}

// count is how many answers of phase satisfy keep.
func (t *tally) count(phase string, keep func(kind string) bool) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for k, c := range t.counts[phase] {
		if keep(k) {
			n += c
		}
	}
	return n
}

// lines shows each phase's answers, the most frequent first.
func (t *tally) lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, p := range t.phases {
		counts := t.counts[p]
		kinds := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
			return cmp.Or(counts[b]-counts[a], strings.Compare(a, b))
		})
		var parts []string
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%s ×%d", k, counts[k]))
		}
		if len(parts) == 0 {
			parts = []string{"none"}
		}
		out = append(out, fmt.Sprintf("%s: %s", p, strings.Join(parts, ", ")))
	}
	return out
}

// phases splits a run at instants that are marked as the run gets there: phase i runs from mark
// i-1 to mark i. Clients ask which phase their answers fall in while the run marks them.
type phases struct {
	mu    sync.Mutex
	names []string
	marks []time.Time // one fewer than names; a zero mark has not come yet
}

func newPhases(names ...string) *phases {
	return &phases{names: names, marks: make([]time.Time, len(names)-1)}
}

// mark records that phase i+1 begins at t.
func (p *phases) mark(i int, t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.marks[i] = t
}

// at is the phase instant t falls in.
func (p *phases) at(t time.Time) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, m := range p.marks {
		if m.IsZero() || t.Before(m) {
			return p.names[i]
		}
	}
	return p.names[len(p.names)-1]
}

// durations sorts a copy of d, for percentiles.
func durations(d []time.Duration) []time.Duration {
	d = slices.Clone(d)
	slices.Sort(d)
	return d
}

// p50p90max shows the spread of latencies.
func p50p90max(d []time.Duration) string {
	if len(d) == 0 {
		return "none measured"
	}
	s := durations(d)
	return fmt.Sprintf("p50 %s, p90 %s, max %s (%d)", loadtest.Millis(loadtest.Percentile(s, 50)),
		loadtest.Millis(loadtest.Percentile(s, 90)), loadtest.Millis(s[len(s)-1]), len(s))
}

func seconds(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func rate(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// ratio shows a/b, or "-" when b is nothing.
func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("×%.2f", a/b)
}
