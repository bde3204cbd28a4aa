package evals

import (
	"strings"
	"testing"
)

func TestCompareWords(t *testing.T) {
	draft := "Hi Ana, your refund of 20 EUR is on its way.\nThanks!"
	final := "Hi Ana, your refund of 25 EUR is on its way today.\nThanks!"
	e := Compare(draft, final)
	want := []Segment{
		{Equal, "Hi Ana, your refund of "}, {Delete, "20"}, {Insert, "25"},
		{Equal, " EUR is on its "}, {Delete, "way."}, {Insert, "way today."}, {Equal, "\nThanks!"},
	}
	if len(e.Words) != len(want) {
		t.Fatalf("word diff = %q, want %q", e.Words, want)
	}
	for i := range want {
		if e.Words[i] != want[i] {
			t.Fatalf("word diff segment %d = %q, want %q (all: %q)", i, e.Words[i], want[i], e.Words)
		}
	}
	var a, b strings.Builder
	for _, s := range e.Words {
		if s.Op != Insert {
			a.WriteString(s.Text)
		}
		if s.Op != Delete {
			b.WriteString(s.Text)
		}
	}
	if a.String() != draft || b.String() != final {
		t.Errorf("the word diff gives back %q and %q, not the draft and the final", a.String(), b.String())
	}
	// Characters: "0"→"5" and " today" inserted. Words: "20"→"25", "way."→"way" and "today."
	// inserted.
	if e.CharDistance != 7 {
		t.Errorf("char distance = %d, want 7", e.CharDistance)
	}
	if e.WordDistance != 3 {
		t.Errorf("word distance = %d, want 3", e.WordDistance)
	}
}

func TestCompareSame(t *testing.T) {
	e := Compare("Same text.\n", "Same text.\n")
	if e.CharDistance != 0 || e.WordDistance != 0 || e.Unified != "" || len(e.Words) != 1 || e.Words[0].Op != Equal {
		t.Errorf("an unchanged draft gives %+v", e)
	}
}

func TestCompareFromScratch(t *testing.T) {
	e := Compare("", "Hello there")
	if e.CharDistance != 11 || e.WordDistance != 2 {
		t.Errorf("distances from nothing = %d chars, %d words; want 11 and 2", e.CharDistance, e.WordDistance)
	}
	want := "--- draft\n+++ final\n@@ -0,0 +1,1 @@\n+Hello there\n\\ No newline at end of file\n"
	if e.Unified != want {
		t.Errorf("unified diff from nothing =\n%s\nwant\n%s", e.Unified, want)
	}
}

func TestUnifiedHunks(t *testing.T) {
	var draft, final strings.Builder
	for i := 1; i <= 20; i++ {
		line := "line " + string(rune('a'+i)) + "\n"
		draft.WriteString(line)
		switch i {
		case 2:
			final.WriteString("changed two\n")
		case 15:
			// dropped
		default:
			final.WriteString(line)
		}
	}
	got := Compare(draft.String(), final.String()).Unified
	want := "--- draft\n+++ final\n" +
		"@@ -1,5 +1,5 @@\n line b\n-line c\n+changed two\n line d\n line e\n line f\n" +
		"@@ -12,7 +12,6 @@\n line m\n line n\n line o\n-line p\n line q\n line r\n line s\n"
	if got != want {
		t.Errorf("unified diff =\n%s\nwant\n%s", got, want)
	}
}
