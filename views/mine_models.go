package views

import "time"

// MineView is "My work": every package the viewer holds, in whichever queue.
type MineView struct {
	Viewer Viewer
	Rows   []MineRow
	Live   LiveConfig
}

// MineRow is one package the viewer holds, masked for them.
type MineRow struct {
	Card Card
	// Href opens it: the package page, or the sidebar inside a CRM's frame.
	Href string
	// Status is the package's status in words ("awaiting approval").
	Status string
	// Due is when the queue's SLA runs out: from the package's arrival until the accept, and from
	// the customer's first unanswered message while one waits, whichever runs out first (past
	// already when the accept came late); zero once accepted with nobody waiting (the card's SLA
	// timer says how the accept went).
	Due time.Time
	// Last is the last thing that happened to it, in words, and when.
	Last   string
	LastAt time.Time
}

// Timeline is what happened to a package, newest first, and the form for an internal note.
type Timeline struct {
	ID    string // the package's id
	Lines []TimelineLine
	// CanNote: the viewer may add a note (they work the package's queue, or oversee it).
	CanNote   bool
	NoteLimit int
	// Notice says what the viewer's last action did ("note added"); NoteText and NoteError are a
	// refused note, back in its field beside what was wrong with it.
	Notice    string
	NoteText  string
	NoteError string
}

// TimelineLine is one thing that happened, in words. Note is what a person wrote with it, masked
// for the viewer.
type TimelineLine struct {
	At   time.Time
	Kind string
	Text string
	Note string
}
