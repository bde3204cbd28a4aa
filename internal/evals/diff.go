// Package evals keeps what agents do with the bots' work as evaluation and training records:
// each reply an agent sends (the bot's draft, the final text and how they differ) and each
// outcome that labels a handoff (returned to the bot, rejected, resolved). The records are written
// in the transaction of the action they describe, by the package that makes it, through Queue, and
// read back by Export, in the desk's own format or those that fine-tuning tools read.
package evals

import (
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/sergi/go-diff/diffmatchpatch"
)

// Op is what a segment of a diff did to the draft.
type Op string

const (
	Equal  Op = "equal"
	Insert Op = "insert"
	Delete Op = "delete"
)

// Segment is a run of text the final kept, added or took out of the draft.
type Segment struct {
	Op   Op     `json:"op"`
	Text string `json:"text"`
}

// Edit is how the final text differs from the draft.
type Edit struct {
	// Words is the word-level diff: whole words (and the spaces between them) kept, inserted or
	// deleted, in order. Concatenating the equal and delete segments gives the draft back; the
	// equal and insert ones give the final.
	Words []Segment
	// Unified is the line-level diff in the unified format of diff -u, with three lines of context.
	Unified string
	// CharDistance and WordDistance are the edit (Levenshtein) distances over characters (Unicode
	// code points) and over words (runs of non-space), both read off a diff.
	CharDistance, WordDistance int
}

// diffTimeout bounds the search for the shortest diff. Past it go-diff returns a correct diff that
// may not be the shortest, so a distance can come out above the true one; replies are capped at
// 10,000 characters, well within it in practice.
const diffTimeout = 2 * time.Second

// Compare diffs final against draft.
func Compare(draft, final string) Edit {
	dmp := diffmatchpatch.New()
	dmp.DiffTimeout = diffTimeout
	chars := dmp.DiffMain(draft, final, false)
	return Edit{
		Words:        words(dmp, draft, final),
		Unified:      unified(dmp, draft, final),
		CharDistance: dmp.DiffLevenshtein(chars),
		WordDistance: dmp.DiffLevenshtein(tokenDiff(dmp, strings.Fields(draft), strings.Fields(final))),
	}
}

// tokenDiff diffs two token sequences with go-diff's line-mode trick: each distinct token becomes
// one rune, the rune strings are diffed, and a segment's runes stand for its tokens. Its
// Levenshtein distance counts tokens.
func tokenDiff(dmp *diffmatchpatch.DiffMatchPatch, a, b []string) []diffmatchpatch.Diff {
	ra, rb, _ := toRunes(a, b)
	return dmp.DiffMainRunes(ra, rb, false)
}

// runeBase keeps token runes clear of the surrogate range; a 10,000-character text has far fewer
// distinct tokens than the runes above it.
const runeBase = 0x10000

func toRunes(a, b []string) ([]rune, []rune, []string) {
	index := map[string]rune{}
	var tokens []string
	next := rune(runeBase)
	conv := func(ts []string) []rune {
		rs := make([]rune, len(ts))
		for i, t := range ts {
			r, ok := index[t]
			if !ok {
				r = next
				next++
				index[t] = r
				tokens = append(tokens, t)
			}
			rs[i] = r
		}
		return rs
	}
	ra := conv(a)
	return ra, conv(b), tokens
}

// segments diffs two token sequences and gives the segments back as text.
func segments(dmp *diffmatchpatch.DiffMatchPatch, a, b []string) []Segment {
	ra, rb, tokens := toRunes(a, b)
	var out []Segment
	for _, d := range dmp.DiffMainRunes(ra, rb, false) {
		var sb strings.Builder
		for _, r := range d.Text {
			sb.WriteString(tokens[r-runeBase])
		}
		op := Equal
		switch d.Type {
		case diffmatchpatch.DiffInsert:
			op = Insert
		case diffmatchpatch.DiffDelete:
			op = Delete
		}
		out = append(out, Segment{Op: op, Text: sb.String()})
	}
	return out
}

// splitWords cuts text into runs of non-space and runs of space, so that the word diff keeps every
// character of both texts, line breaks included.
func splitWords(text string) []string {
	var tokens []string
	start, space := 0, false
	for i, r := range text {
		if i > start && unicode.IsSpace(r) != space {
			tokens = append(tokens, text[start:i])
			start = i
		}
		space = unicode.IsSpace(r)
	}
	if start < len(text) {
		tokens = append(tokens, text[start:])
	}
	return tokens
}

func words(dmp *diffmatchpatch.DiffMatchPatch, draft, final string) []Segment {
	return segments(dmp, splitWords(draft), splitWords(final))
}

// splitLines cuts text after each line break, keeping it, as diff reads a file.
func splitLines(text string) []string {
	var lines []string
	for text != "" {
		i := strings.IndexByte(text, '\n')
		if i < 0 {
			lines = append(lines, text)
			break
		}
		lines = append(lines, text[:i+1])
		text = text[i+1:]
	}
	return lines
}

// contextLines is how many unchanged lines a hunk shows around its changes, as diff -u does.
const contextLines = 3

type line struct {
	op   Op
	text string
}

// unified writes the line diff of draft and final in the unified format, built from go-diff's
// line-mode diff (its own patch text is character-level and URL-escaped, which no reader expects).
// An empty string means no line changed.
func unified(dmp *diffmatchpatch.DiffMatchPatch, draft, final string) string {
	var ls []line
	for _, s := range segments(dmp, splitLines(draft), splitLines(final)) {
		for _, l := range splitLines(s.Text) {
			ls = append(ls, line{s.Op, l})
		}
	}
	var out strings.Builder
	for i := 0; i < len(ls); {
		if ls[i].op == Equal {
			i++
			continue
		}
		// A hunk runs from the context before this change to the context after the last change
		// close enough to the one before it that their contexts would meet.
		start := max(0, i-contextLines)
		end := i
		for j := i; j < len(ls); j++ {
			if ls[j].op != Equal {
				end = j
			} else if j-end > 2*contextLines {
				break
			}
		}
		stop := min(len(ls), end+contextLines+1)
		if out.Len() == 0 {
			out.WriteString("--- draft\n+++ final\n")
		}
		writeHunk(&out, ls, start, stop)
		i = stop
	}
	return out.String()
}

func writeHunk(out *strings.Builder, ls []line, start, stop int) {
	// Line numbers before the hunk, in the draft and in the final.
	var a, b int
	for _, l := range ls[:start] {
		if l.op != Insert {
			a++
		}
		if l.op != Delete {
			b++
		}
	}
	var na, nb int
	var body strings.Builder
	for _, l := range ls[start:stop] {
		mark := " "
		switch l.op {
		case Insert:
			mark = "+"
			nb++
		case Delete:
			mark = "-"
			na++
		default:
			na++
			nb++
		}
		body.WriteString(mark + l.text)
		if !strings.HasSuffix(l.text, "\n") {
			body.WriteString("\n\\ No newline at end of file\n")
		}
	}
	fmt.Fprintf(out, "@@ -%s +%s @@\n%s", hunkRange(a, na), hunkRange(b, nb), body.String())
}

// hunkRange is a hunk's start and length as diff -u writes them: an empty range names the line
// before it.
func hunkRange(before, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", before)
	}
	return fmt.Sprintf("%d,%d", before+1, n)
}
