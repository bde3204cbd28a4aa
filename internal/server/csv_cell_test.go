package server

import "testing"

// A cell a spreadsheet would evaluate, after trimming it or reading a full-width sign as ASCII,
// gets a leading quote; any other cell is left as it is.
func TestInertCell(t *testing.T) {
	for cell, want := range map[string]string{
		`=HYPERLINK("http://evil")`: `'=HYPERLINK("http://evil")`,
		"+1-415":                    "'+1-415",
		"-2+3":                      "'-2+3",
		"@SUM(A1)":                  "'@SUM(A1)",
		"\t=1+1":                    "'\t=1+1",
		"\r=1+1":                    "'\r=1+1",
		" =1+1":                     "' =1+1",
		"\n=1+1":                    "'\n=1+1",
		"\u00a0=1+1":                "'\u00a0=1+1",
		"\u3000=1+1":                "'\u3000=1+1",
		"＝HYPERLINK(\"x\")":         "'＝HYPERLINK(\"x\")",
		"＋1":                        "'＋1",
		"－1":                        "'－1",
		"＠SUM(A1)":                  "'＠SUM(A1)",
		" plain":                    "' plain", // leading white space is quoted too: harmless, and simpler than a list of what follows
		"ho_9f2a":                   "ho_9f2a",
		"Dana Whitfield":            "Dana Whitfield",
		"a=b":                       "a=b",
		"":                          "",
	} {
		if got := inertCell(cell); got != want {
			t.Errorf("inertCell(%q) = %q, want %q", cell, got, want)
		}
	}
}
