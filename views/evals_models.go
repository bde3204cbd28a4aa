package views

// EvalsView is the supervisors' page of what agents made of the bots' work over a window.
type EvalsView struct {
	Viewer  Viewer
	Window  string
	Windows []string
	Agents  []AgentEvals
}

// AgentEvals is one source agent's (bot profile's) figures over the window.
type AgentEvals struct {
	SourceAgent string
	// Drafts are the replies sent against the bot's draft; AsIs is the share sent unchanged.
	Drafts, FromScratch      int
	AsIs                     string
	MedianChars, MedianWords string
	Packages                 int
	Tags                     []Share
	Returns                  []Share
	Chart                    TrendChart
	Worst                    []WorstEdit
}

// Share is a count and what part of a whole it is, as the page prints it.
type Share struct {
	Value   string
	N       int
	Percent string
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
