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
	// Ring is what the top of every page says of the viewer's rings: the one ringing now, the
	// ones they let run out.
	Ring    RingSlotView
	IsAdmin bool
	// Availability is what the viewer chose to be: available, break or away (the header's switch).
	Availability string
	// Path is the page's own path and query, where the header's forms come back to.
	Path string
	// Holding is how many open packages the viewer holds, "My work" in the top bar; Unread how
	// many messages their customers wrote since the last reply, also in the window's title.
	Holding int
	Unread  int
	// Approvals is how many refund approvals wait, beside "Approvals" in a supervisor's top bar
	// and in their pages' titles.
	Approvals int
	// Notice says what the viewer's last action did ("You accepted the package"), shown once on
	// the page the action led to, in a polite live region.
	Notice string
}

// RingView is a warm package ringing for the viewer: accept it within the window, or decline.
type RingView struct {
	ID          string
	Queue       string
	Problem     string // masked for the viewer
	UntilMillis int64  // the end of the accept window, for the countdown
}

// RingSlotView is the top of every desk page for its viewer: the warm package ringing for them,
// if any, the rings they let run out lately, and whether the desk set them away for it.
type RingSlotView struct {
	Ring   *RingView // nil when none rings
	Missed []MissedRingView
	// SetAway: the desk set the viewer away after rings they let run out, until they choose again.
	SetAway bool
	// Path is the page's own path and query, where declining and coming back return to; "" in a
	// socket's fragment, whose page's desk.js fills it in.
	Path string
}

// MissedRingView is a ring the viewer let run out: the package, its queue and when it rang.
type MissedRingView struct {
	ID    string
	Queue string
	At    time.Time
}

// LoginView is the login form, possibly redisplayed after a failure.
type LoginView struct {
	Email string
	Error string
	Next  string
	// SSO shows "Sign in with SSO" (the desk has an identity provider).
	SSO bool
	// Popup: the form signs in for the sidebar that opened this window; it ends as a ticket the
	// sidebar trades for a session of its own, not as a session here.
	Popup bool
	// Notice says what led here ("You logged out"), once.
	Notice string
}

// PopupSignInView is the login page inside a CRM's frame: no password form, which a frame is
// the wrong place to type into, but a button that signs in through a popup.
type PopupSignInView struct {
	Next string
	SSO  bool
}

// SignedInPopupView is the end of a sign-in in a popup: the ticket the sidebar that opened it
// trades for a session (the ticket knows where the sidebar goes next).
type SignedInPopupView struct {
	Ticket string
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
	// Live keeps the page's ring and its queues' counts current.
	Live LiveConfig
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
	// SLASince is when the package arrived, which its SLA counts from to the accept; Waited is,
	// once accepted, how long it waited: the SLA timer stops there, as search's sla_breached does.
	SLASince time.Time
	Waited   *time.Duration
	// Waiting is the customer waiting for the desk's answer, nil when nobody waits.
	Waiting *CustomerWaiting
	// Idle is the customer who left the agent's reply unanswered, nil when they have not.
	Idle *CustomerIdle
}

// CustomerWaiting is a customer who wrote since the last reply: since when, and how many messages
// the desk has not answered.
type CustomerWaiting struct {
	Since  time.Time
	Unread int
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
	// Approvals: the page follows refund approval requests (/approvals).
	Approvals bool
	// Dashboard is the figures' query ("window=7d&queue=billing"): the socket sends them anew,
	// throttled, as packages change.
	Dashboard string
	// Mine: the page is "My work", the viewer's held packages. Summaries: the page is "my queues",
	// each queue's counts.
	Mine      bool
	Summaries bool
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
	// ResolveCode is the resolution the form offers first: refunded once an approval is granted.
	ResolveCode string
	// NoteLimit is the most characters a reason or note may have; the server refuses more.
	NoteLimit int
	// Approval is the package's refund approval: what it asks, whether it needs approval, what the
	// viewer may do about it, and every request so far.
	Approval ApprovalControls
	// Reassign is offered to supervisors on a held package; nil otherwise.
	Reassign *ReassignControls
	// HeldBy names who holds the package when it is not the viewer: a holder whose package a
	// supervisor moved sees it here, live.
	HeldBy string
	// CanReply: the viewer may reply (they accepted it); Replied: a reply was sent on it. With
	// the permissions they decide the one next step the panel offers first (Primary).
	CanReply bool
	Replied  bool
	// Entities are the package's structured entities as the viewer sees them, which the return
	// and resolve forms offer to confirm or correct for the bot.
	Entities []Entity
}

// The next steps of a package's working day, in order; Primary says which one the action panel
// offers first, the others wait in its menu.
const (
	PrimaryAccept   = "accept"   // queued or reserved for the viewer
	PrimaryReply    = "reply"    // accepted, nothing sent to the customer yet: the composer's Send
	PrimaryApproval = "approval" // replied, and the refund needs a supervisor's approval first
	PrimaryResolve  = "resolve"  // replied: close it
)

// Primary is the one next step of the package for the viewer, or "" when none is theirs (a
// supervisor looking at an agent's package, a refund waiting for approval).
func (c Controls) Primary() string {
	switch {
	case c.CanAccept:
		return PrimaryAccept
	// A refund that needs approval is asked for before the customer is told anything: a reply
	// first would promise money a supervisor may refuse. While the request waits, nothing is
	// next but its decision (the panel shows it pending).
	case !c.Replied && c.Approval.AskFirst():
		return PrimaryApproval
	case !c.Replied && c.Approval.Needed && c.Approval.Pending() != nil:
		return ""
	case c.CanReply && !c.Replied:
		return PrimaryReply
	case c.Approval.CanRequest && c.Replied:
		return PrimaryApproval
	case c.CanResolve && c.Replied:
		return PrimaryResolve
	}
	return ""
}

// InMenu reports whether an action other than the primary one is open to the viewer: the menu
// shows then.
func (c Controls) InMenu() bool {
	p := c.Primary()
	return c.CanReject || c.CanReturn || (c.CanTransfer && len(c.TransferTargets) > 0) ||
		(c.CanResolve && p != PrimaryResolve) || (c.Approval.CanRequest && p != PrimaryApproval) ||
		c.Approval.CanWithdraw || c.Reassign != nil
}

// ApprovalControls are the package's refund and its approvals, on the action panel, which
// websocket frames replace: the agent sees a decision live.
type ApprovalControls struct {
	Refund       string // "120.00 USD"; empty when the package asks for none
	RefundAmount string // the amount the resolve form offers to refund
	Needed       bool   // above the queue's threshold, or in another currency
	CanRequest   bool
	CanWithdraw  bool
	// Decision is the latest request once decided (granted, denied or expired), for the banner
	// that tells the agent; nil while none is, or one is pending.
	Decision *ApprovalLine
	// Decide is the pending request's id when the viewer may decide it, on /approvals.
	Decide  string
	History []ApprovalLine
}

// AskFirst reports whether the refund needs an approval the agent should ask for now: none was
// asked, or the last one expired. After a denial the next step is telling the customer.
func (a ApprovalControls) AskFirst() bool {
	return a.CanRequest && (a.Decision == nil || a.Decision.State == "expired")
}

// Pending is the request waiting for a supervisor, if one does: always the latest.
func (a ApprovalControls) Pending() *ApprovalLine {
	if n := len(a.History); n > 0 && a.History[n-1].State == "pending" {
		return &a.History[n-1]
	}
	return nil
}

// ApprovalLine is one request for approval and how it ended, its notes masked for the viewer.
type ApprovalLine struct {
	ID           string
	State        string
	Refund       string
	Requester    string
	Note         string
	RequestedAt  string
	Decider      string
	DecisionNote string
	DecidedAt    string
}

// ApprovalsView is the supervisors' live /approvals page.
type ApprovalsView struct {
	Viewer Viewer
	Rows   []ApprovalRow
	Live   LiveConfig
	Flash  string
}

// ApprovalRow is one pending request beside its package, masked for the viewer.
type ApprovalRow struct {
	ID               string
	HandoffID        string
	Queue            string
	ProblemStatement string
	Contact          string
	Refund           string
	Agent            string
	Note             string
	RequestedAt      time.Time
	Timeout          time.Duration
	// WhyNot says why the viewer may not decide it (their own request, their package); empty
	// when they may.
	WhyNot    string
	NoteLimit int
	// What a supervisor decides with, masked for them as the package page would show it: what
	// the agent already told the customer, the contact's earlier handoffs, and what happened.
	Replies  []SentReply
	Earlier  []EarlierHandoff
	Timeline []TimelineLine
}

// Editor is the co-pilot editor: the bot's draft ("" when it left none) for the agent to edit
// and send, and the tags they may give for changing it.
type Editor struct {
	// Draft is the bot's draft with tokens (⟦first name⟧) where the agent may not see a value:
	// what the live diff compares against.
	Draft string
	// Text is what the composer holds: the draft, nothing once a reply was sent, or the text a
	// refused send came back with.
	Text string
	// Tokens are the tokens the agent may keep or insert, and Error why the last send was refused.
	Tokens []string
	Error  string
	// Notice is what the page announces happened, such as a reply sent.
	Notice string
	// Saved are the queue's saved replies, offered with / in the composer, their tokens filled
	// where the agent may see the values.
	Saved []SavedReply
	// Offer is the bot's draft for the customer's latest turn, offered beside the composer; nil
	// when the customer's messages came with none.
	Offer *DraftOffer
	// Replied: a reply was sent on the package already; sending another is no longer its next step.
	Replied bool
	Tags    []string
	// Limit is the most characters a reply may have; the server refuses more.
	Limit int
	// Awaiting says, while a refund waits for its approval, that the reply comes after the
	// decision; Suggested, once it is decided, that Text is a reply the desk suggests telling it.
	Awaiting, Suggested string
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
	Viewer *Viewer
	// OthersViewing are the names of the others who have the package open.
	OthersViewing       []string
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
	// Timeline is what happened to the package, in words, and the note form.
	Timeline Timeline
	// History links to the package's audit trail, for those who may read it; "" for others.
	History string
	// Earlier are the contact's packages of the last 90 days before this one, newest first.
	Earlier []EarlierHandoff
	// Editor is the co-pilot editor, for the agent who accepted the package; nil for everyone else.
	Editor *Editor
	// Thread is the conversation: the transcript's last turns, then the messages since the handoff
	// and the replies.
	Thread Thread
	// Gone says, to a viewer without the editor, why they cannot reply: shown when the page loses
	// the package while its agent writes (desk.js), or a send is refused. Kept is the text of a
	// refused send, kept for them to copy.
	Gone, Kept string
	Outcome    string
	Controls   Controls
	Live       LiveConfig
	Flash      string
}

// QueueHealth is one queue on the roster; each count links to its packages.
type QueueHealth struct {
	Name                                  string
	Waiting                               int
	Reserved                              int
	Accepted                              int
	WaitingHref, ReservedHref, WorkedHref string
	OldestWait                            time.Duration
	OverSLA                               bool
	AgentsOnline                          int
}

// AgentLoad is one agent on the roster.
type AgentLoad struct {
	Name   string
	Role   string
	Status string // offline, available, break or away
	// For is how long they have been what they chose; 0 if they never chose or are offline.
	For     time.Duration
	Holding int
	// HoldingHref lists the packages they hold.
	HoldingHref string
	Capacity    int
	Queues      string
	Ringing     string // the warm package ringing for the agent, if any
	// Rings says how the agent's rings of the last day went ("3 rings, 2 accepted, last timed out"),
	// or "" when they had none.
	Rings string
}

// RosterView is the supervisors' live roster.
type RosterView struct {
	Queues []QueueHealth
	Agents []AgentLoad
	// Held are the packages agents hold, longest held first, each with the controls to move it;
	// HeldMore how many more there are, listed at HeldMoreHref.
	Held         []HeldRow
	HeldMore     int
	HeldMoreHref string
	// Waiting are the waiting packages whose SLA ends first; PastHref lists every waiting package
	// past its SLA.
	Waiting  []SLARow
	PastHref string
}

// HeldRow is a held package on the roster, with the agents of its queue it may be moved to and
// the viewer's own email for a take-over ("" when the viewer holds it).
type HeldRow struct {
	ID, Queue, Status, Holder string
	// HeldFor is how long the accept that stands has stood; 0 for a reservation.
	HeldFor time.Duration
	Move    ReassignControls
}

// SLARow is a waiting package and the end of its SLA. Shown says whether it is past its SLA or
// within Warn of its end when the page is rendered; the page's clock shows the others as they
// come close (desk.js).
type SLARow struct {
	ID, Queue, Status string
	Due               time.Time
	Warn              time.Duration
	Shown             bool
}

// DashboardView is the supervisors' page.
type DashboardView struct {
	Viewer Viewer
	// Queue is the queue chosen ("" for all), Window the window; the pickers offer the others.
	Queue, Window string
	Queues        []string
	Windows       []WindowLink
	Figures       DashboardFigures
	Roster        RosterView
	Live          LiveConfig
}

// WindowLink is one window of the window control /dashboard and /evals share: the page over that
// window, the other choices kept.
type WindowLink struct {
	Name, Href string
	Current    bool
}

// DashboardFigures is the dashboard's numbers for one queue or all over a window, beside the
// previous window: the part of the page that live frames replace, at most once every few seconds.
type DashboardFigures struct {
	Scope, Window     string
	Current, Previous string // the two periods, as text
	Rows              []FigureRow
	Triggers, Sources []ShareRow
	Returns           []ShareRow
	In, Resolution    SeriesChart
	// Buckets are the charts' points as a table: each bucket's packages in and median time to
	// resolution, with their counts linked.
	Buckets   []BucketRow
	BucketCol string // what a bucket is: "Hour (UTC)" or "Day (UTC)"
	Queues    []QueueBar
	Agents    []AgentRow
	// AgentDefinitions say how each column of the agents' table is counted.
	AgentDefinitions []FigureRow
	// CSATQueues and CSATAgents are the customer's verdicts per queue and per agent.
	CSATQueues, CSATAgents []CSATRow
}

// CSATRow is a queue's or an agent's verdicts, each leg this window beside the previous one: the
// mean score and its sample, linked to the packages behind it. An agent's row has no bot leg.
type CSATRow struct {
	Name, Email                    string
	Human, PrevHuman, Bot, PrevBot Figure
}

// FigureRow is one figure in the current and the previous window. ID names it for tests and for
// the definition it links to in docs/metrics.md.
type FigureRow struct {
	ID, Name          string
	Current, Previous Figure
	Definition        string
}

// ShareRow is a value's count and share in the current window, and its count in the previous.
type ShareRow struct {
	Value       string
	N, Previous Figure
	Percent     string
}

// BucketRow is one bucket of the window's charts.
type BucketRow struct {
	Label      string
	In         Figure
	Resolution Figure // the median time to resolution and how many were resolved
}

// QueueBar is one queue's bar: its packages in over the window, as a share of the busiest queue's,
// and its repeat contacts.
type QueueBar struct {
	Queue       string
	Width       string // percent of the track
	In, Repeats Figure
}

// AgentRow is one agent's figures over the window.
type AgentRow struct {
	Name, Email                                string
	Handled, Accept, Resolution, Replies, AsIs Figure
	Edit                                       Figure
}

// AuditView is a page of the audit trail, newest first, with the filters that chose it.
type AuditView struct {
	Viewer  Viewer
	Filter  AuditFilter
	Kinds   []string
	Entries []AuditEntry
	// More is the link to the next page; "" on the last.
	More string
	// CSV and JSONL are the links to the exports of everything the filters select.
	CSV, JSONL string
	// PIIViews are who was shown the package's personal data unmasked, when the trail is one
	// package's.
	PIIViews []PIIView
}

// AuditFilter is the filter form's values, as given, and a refused filter's complaint.
type AuditFilter struct {
	Package, Actor, Kind, Queue, Since, Until string
	Presence                                  bool              // presence changes are listed too
	Errors                                    map[string]string // field → what is wrong with it
	Error                                     string            // a refusal that is no field's
}

// AuditEntry is one event, its summary already masked for the viewer.
type AuditEntry struct {
	At                          string // to the second, with the zone
	Datetime                    string // the same, machine-readable
	Actor, Kind, Package, Queue string
	Summary                     string // what happened, in words: audit.Summary
}

// PIIView is one record of personal data shown unmasked.
type PIIView struct {
	At, User, Via, Fields string
}
