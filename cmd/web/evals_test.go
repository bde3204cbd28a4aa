package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// web evals export writes the export to stdout with the route's options as flags, and refuses
// what the route refuses, naming it.
func TestEvalsExportCommand(t *testing.T) {
	t.Parallel()
	getenv := env(t)
	if out, err := runCommand(t, getenv, "seed-demo"); err != nil {
		t.Fatalf("seed-demo: %v\n%s", err, out)
	}
	lines := func(args ...string) []map[string]any {
		t.Helper()
		out, err := runCommand(t, getenv, append([]string{"evals", "export"}, args...)...)
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
	if got := lines("--kind", "reply", "--since", "2000-01-01"); len(got) != 3 {
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
