// Package views holds the desk's templ components. Components take plain view models shaped like
// the page, never the web framework's context or database rows, so the same component renders a
// whole page, a websocket fragment and a test.
package views

import "time"

// Viewer is who the page is rendered for: it decides the navigation and what is masked.
type Viewer struct {
	Name         string
	Email        string
	Role         string
	IsSupervisor bool
}

// LoginView is the login form, possibly redisplayed after a failure.
type LoginView struct {
	Email string
	Error string
	Next  string
}

// QueueSummary is one row of "my queues".
type QueueSummary struct {
	Name       string
	Open       int
	Waiting    int
	OldestWait time.Duration // zero when nothing waits
	OverSLA    bool
	Member     bool
}

// HomeView is the "my queues" page.
type HomeView struct {
	Viewer Viewer
	Queues []QueueSummary
}

// ErrorView is a full-page error for browsers.
type ErrorView struct {
	Viewer  *Viewer
	Status  int
	Title   string
	Message string
}

// Entity is one key fact on a card or a package, already masked for the viewer.
type Entity struct {
	Key   string
	Value string
}

// Card is a package in a queue list. The same component renders the page and the live fragment.
type Card struct {
	ID               string
	Queue            string
	Status           string
	Priority         string
	ProblemStatement string
	Contact          string
	Entities         []Entity
	Sentiment        string
	Channel          string
	EnqueuedAt       time.Time
	SLA              time.Duration
	Assignee         string
	NeedsSupervisor  bool
	Rejections       int
	SortKey          string
	// Repeat: the contact had another package resolved or returned within the 7 days before this one.
	Repeat bool
}

// EarlierHandoff is one of the contact's earlier packages, in a queue the viewer may see.
type EarlierHandoff struct {
	ID      string
	At      string
	Queue   string
	Trigger string
	// Outcome is the package's status, and its resolution code when it has one.
	Outcome string
	Handler string
}

// QueueView is the live queue page.
type QueueView struct {
	Viewer Viewer
	Queue  string
	Cards  []Card
	Held   []Card
	More   string // cursor of the next page; empty at the end
	Live   LiveConfig
	Flash  string
}

// LiveConfig tells the page's script what to watch and where it stands in the event stream.
type LiveConfig struct {
	Queues  []string
	Handoff string
	Roster  bool
	// Dashboard is the figures' query ("window=7d&queue=billing"): the socket sends them anew,
	// throttled, as packages change.
	Dashboard string
	Mark      string
}

// Action is one step the bot already tried.
type Action struct {
	Tool   string
	Result string
	OK     *bool
	At     string
}

// Turn is one message of the transcript.
type Turn struct {
	Role    string
	Content string
	At      string
}

// Citation is a source the bot relied on; Href is empty when the URI is not safe to link.
type Citation struct {
	URI  string
	Href string
}

// Note is an agent's remark kept with the package.
type Note struct {
	Author string
	Body   string
	At     string
}

// Controls are the actions the viewer may take on a package, with their choices.
type Controls struct {
	CanAccept       bool
	CanReject       bool
	CanReturn       bool
	CanTransfer     bool
	CanResolve      bool
	TransferTargets []string
	ReturnReasons   []string
	ResolutionCodes []string
	// NoteLimit is the most characters a reason or note may have; the server refuses more.
	NoteLimit int
}

// Editor is the co-pilot editor: the bot's draft ("" when it left none) for the agent to edit
// and send, and the tags they may give for changing it.
type Editor struct {
	Draft string
	Tags  []string
	// Limit is the most characters a reply may have; the server refuses more.
	Limit int
}

// SentReply is a reply an agent sent, its text masked for the viewer like a note.
type SentReply struct {
	Editor string
	At     string
	Text   string
	Tags   []string
	// How is how the reply came about: the draft sent as is, edited, or written from scratch.
	How string
}

// HandoffView is the package view, also the CRM sidebar.
type HandoffView struct {
	Viewer              *Viewer
	Card                Card
	ContactID           string
	ContactEmail        string
	ContactPhone        string
	PIIMasked           bool
	UserVerified        bool
	Trigger             string
	Reason              string
	TransferMode        string
	SourceAgent         string
	Locale              string
	Refund              string
	AttemptedActions    []Action
	OpenQuestions       []string
	RecommendedNextStep string
	DraftReply          string
	Citations           []Citation
	HandoffChain        []string
	Transcript          []Turn
	Notes               []Note
	// Earlier are the contact's packages of the last 90 days before this one, newest first.
	Earlier []EarlierHandoff
	// Editor is the co-pilot editor, for the agent who accepted the package; nil for everyone else.
	Editor *Editor
	// Replies are the replies sent on the package, oldest first.
	Replies  []SentReply
	Outcome  string
	Controls Controls
	Live     LiveConfig
	Flash    string
}

// QueueHealth is one queue on the roster.
type QueueHealth struct {
	Name         string
	Waiting      int
	Reserved     int
	Accepted     int
	OldestWait   time.Duration
	OverSLA      bool
	AgentsOnline int
}

// AgentLoad is one agent on the roster.
type AgentLoad struct {
	Name     string
	Role     string
	Status   string
	Holding  int
	Capacity int
	Queues   string
}

// RosterView is the supervisors' live roster.
type RosterView struct {
	Queues []QueueHealth
	Agents []AgentLoad
}

// DashboardView is the supervisors' page.
type DashboardView struct {
	Viewer Viewer
	// Queue is the queue chosen ("" for all), Window the window; the pickers offer the others.
	Queue, Window   string
	Queues, Windows []string
	Figures         DashboardFigures
	Roster          RosterView
	Live            LiveConfig
}

// DashboardFigures is the dashboard's numbers for one queue or all over a window, beside the
// previous window: the part of the page that live frames replace, at most once every few seconds.
type DashboardFigures struct {
	Scope, Window     string
	Current, Previous string // the two periods, as text
	Rows              []FigureRow
	Triggers, Sources []ShareRow
	Returns           []ShareRow
	In, Resolution    Sparkline
	QueueBars         []Bar
}

// FigureRow is one figure in the current and the previous window. ID names it for tests and for
// the definition it links to in docs/metrics.md.
type FigureRow struct {
	ID, Name, Current, Previous, Definition string
}

// ShareRow is a value's count and share in the current window, and its count in the previous.
type ShareRow struct {
	Value, N, Percent, Previous string
}
