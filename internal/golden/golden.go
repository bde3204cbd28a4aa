// Package golden compares what a test produced with a file kept in the repository, and rewrites
// the file when the test runs with its -update flag.
package golden

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// MatchJSON compares v, as indented JSON, with the golden file at path, or rewrites the file when
// update is set. test names the test to rerun with -update.
func MatchJSON(t testing.TB, path string, v any, test string, update bool) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if update {
		// A golden file is a source file of the repository, readable like the others.
		if err := os.WriteFile(path, got, 0o644); err != nil { //nolint:gosec // see above
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("the result differs from %s (refresh with -run %s -update if intended):\n%s", path, test, got)
	}
}
