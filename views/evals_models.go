package views

// EvalsView is the supervisors' page of what agents made of the bots' work over a window.
type EvalsView struct {
	Viewer  Viewer
	Window  string
	Period  string // the window's start and end, as text
	Windows []WindowLink
	Agents  []AgentEvals
}

// AgentEvals is one source agent's (bot profile's) figures over the window, each count linked to
// its packages.
type AgentEvals struct {
	SourceAgent string
	// AsIs is the share of the replies to its drafts sent unchanged, with both counts; Median the
	// median edit distance with the replies it was taken over.
	AsIs, Median, FromScratch, Packages Figure
	Tags, Returns                       []Share
	Chart                               TrendChart
	Points                              []TrendRow
	Worst                               []WorstEdit
}

// Share is a count, linked to its packages, and what part of a whole it is.
type Share struct {
	Value   string
	N       Figure
	Percent string
}

// TrendRow is one bucket of an agent's chart, as its table prints it.
type TrendRow struct {
	Label                  string
	AsIs, Median, Returned Figure
}

// WorstEdit is a row of the worst edits list, linking to its side-by-side diff.
type WorstEdit struct {
	Href         string
	HandoffID    string
	Editor       string
	At           string
	Chars, Words int
	Tags         []string
}

// EvalDiffView is one reply record's draft and final text side by side, masked for the viewer.
type EvalDiffView struct {
	Viewer       Viewer
	HandoffID    string
	SourceAgent  string
	Editor       string
	At           string
	Chars, Words int
	Tags         []string
	Draft, Final []DiffPart
	Masked       bool
}

// DiffPart is a run of one side of the diff: kept, or changed (deleted from the draft, inserted
// in the final).
type DiffPart struct {
	Text    string
	Changed bool
}
