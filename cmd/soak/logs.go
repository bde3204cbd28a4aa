package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
)

// logSummary is what the instances logged (LOG_FORMAT=json), read back from their log files.
type logSummary struct {
	warnings map[string]int // WARN and ERROR lines by level and message
	messages map[string]int // every line by message
	ids      map[string][]string
}

// loggedIDs are the messages whose handoff_id the summary keeps: what became of packages whose
// client was not there for the answer.
var loggedIDs = []string{
	"client left; package committed",
	"deadline passed; package committed",
	"client left; package not committed",
	"deadline passed; package not committed",
}

// readLogs summarizes the instances' logs. Lines that are not JSON (a panic's trace) count as
// ERROR lines of their own.
func readLogs(paths ...string) (logSummary, error) {
	sum := logSummary{warnings: map[string]int{}, messages: map[string]int{}, ids: map[string][]string{}}
	for _, path := range paths {
		f, err := os.Open(path) //nolint:gosec // G304: a log in the run's own directory.
		if err != nil {
			return sum, err
		}
		err = sum.read(f)
		if closeErr := f.Close(); err == nil {
			err = closeErr
		}
		if err != nil {
			return sum, fmt.Errorf("%s: %w", path, err)
		}
	}
	return sum, nil
}

func (sum logSummary) read(r io.Reader) error {
	lines := bufio.NewScanner(r)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	for lines.Scan() {
		var line struct {
			Level     string `json:"level"`
			Msg       string `json:"msg"`
			HandoffID string `json:"handoff_id"`
		}
		if json.Unmarshal(lines.Bytes(), &line) != nil {
			sum.warnings["ERROR (not a log line)"]++
			continue
		}
		sum.messages[line.Msg]++
		if line.Level == "WARN" || line.Level == "ERROR" {
			sum.warnings[line.Level+" "+line.Msg]++
		}
		if slices.Contains(loggedIDs, line.Msg) {
			sum.ids[line.Msg] = append(sum.ids[line.Msg], line.HandoffID)
		}
	}
	return lines.Err()
}

// warningLine shows the WARN and ERROR lines, the most frequent first.
func (sum logSummary) warningLine() string {
	if len(sum.warnings) == 0 {
		return "no WARN or ERROR lines"
	}
	keys := slices.SortedFunc(maps.Keys(sum.warnings), func(a, b string) int {
		return cmp.Or(sum.warnings[b]-sum.warnings[a], strings.Compare(a, b))
	})
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%q ×%d", k, sum.warnings[k]))
	}
	return strings.Join(parts, ", ")
}

// requestErrors counts the ERROR lines about requests and packages: what the desk says really
// failed. Background workers' lines are shown with the rest of the warnings.
func (sum logSummary) requestErrors() int {
	n := 0
	for k, c := range sum.warnings {
		if k == "ERROR request failed" || (strings.HasPrefix(k, "ERROR") && strings.Contains(k, "package")) {
			n += c
		}
	}
	return n
}

// errorLines counts every ERROR line, and every line that is not a log line (a panic's trace).
func (sum logSummary) errorLines() int {
	n := 0
	for k, c := range sum.warnings {
		if strings.HasPrefix(k, "ERROR") {
			n += c
		}
	}
	return n
}
