package server

import (
	"cmp"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/approvals"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/timeline"
	"github.com/handoffdesk/desk/views"
)

// cardEntities is how many entities a card shows; the package view shows them all.
const cardEntities = 3

// visibility is what user may see of item: the queue's PII rule applied to the user's role.
func visibility(user auth.User, item board.Item) handoff.Visibility {
	return handoff.VisibilityFor(user.Role, item.PIIRule())
}

// cardOf maps a package, masked for the receiver, to its card. Masking happens here, before any
// component sees the values.
func cardOf(item board.Item, v handoff.Visibility, entityLimit int) views.Card {
	p := item.Package.MaskFor(v)
	channel := string(p.ChannelOrigin)
	if p.ChannelTarget != "" && p.ChannelTarget != p.ChannelOrigin {
		channel += " → " + string(p.ChannelTarget)
	}
	contact := p.Contact.DisplayName
	if contact == "" {
		contact = p.Contact.ID
	}
	return views.Card{
		ID: item.PublicID, Queue: item.Queue, Status: string(item.Status), Priority: string(item.Priority()),
		ProblemStatement: p.ProblemStatement, Contact: contact, Entities: entities(p, item.RequiredEntityKeys, entityLimit),
		Sentiment: string(p.Sentiment), Channel: channel, EnqueuedAt: item.EnqueuedAt, SLA: item.SLA,
		Assignee: item.Assignee, NeedsSupervisor: item.NeedsSupervisor, Rejections: item.Rejections,
		SortKey: item.SortKey(), Repeat: item.Repeat, SLASince: item.CreatedAt, Waited: waited(item),
	}
}

// waited is how long item waited for its agent, once accepted: where its SLA timer stops.
func waited(item board.Item) *time.Duration {
	if item.AcceptedAt == nil {
		return nil
	}
	d := item.AcceptedAt.Sub(item.CreatedAt)
	return &d
}

// withWaiting is card with the customer waiting for an answer, if theirs is among waiting.
func withWaiting(card views.Card, waiting map[int64]conversation.Waiting, id int64) views.Card {
	if w, ok := waiting[id]; ok {
		card.Waiting = &views.CustomerWaiting{Since: w.Since, Unread: w.Unread}
	}
	return card
}

// unread counts the messages that wait for an answer.
func unread(waiting map[int64]conversation.Waiting) int {
	n := 0
	for _, w := range waiting {
		n += w.Unread
	}
	return n
}

// cardUnmasked is what a card of item shows unmasked for vis: the contact's name and the PII
// entities among the first entityLimit it lists (0: all).
func cardUnmasked(item board.Item, vis handoff.Visibility, entityLimit int) []string {
	shown := handoff.Package{Contact: handoff.Contact{DisplayName: item.Package.Contact.DisplayName}}
	for _, e := range entities(item.Package, item.RequiredEntityKeys, entityLimit) {
		if shown.StructuredEntities == nil {
			shown.StructuredEntities = map[string]handoff.EntityValue{}
		}
		shown.StructuredEntities[e.Key] = item.Package.StructuredEntities[e.Key]
	}
	return vis.Unmasked(shown)
}

// earlierOf maps the contact's earlier packages to the view. History returned only those in queues
// the viewer may see, and none of these fields falls under a queue's PII rule.
func earlierOf(es []board.Earlier) []views.EarlierHandoff {
	out := make([]views.EarlierHandoff, 0, len(es))
	for _, e := range es {
		outcome := string(e.Status)
		if e.Outcome != "" {
			outcome += ": " + e.Outcome
		}
		out = append(out, views.EarlierHandoff{ID: e.PublicID, At: formatTime(&e.CreatedAt), Queue: e.Queue,
			Trigger: e.Trigger, Outcome: outcome, Handler: e.Handler})
	}
	return out
}

// entities lists a package's entities up to limit (0: all): those its queue requires first, in the
// queue's order, as they are what the queue's agents look for; then the rest by key.
func entities(p handoff.Package, required []string, limit int) []views.Entity {
	keys := make([]string, 0, len(p.StructuredEntities))
	for k := range p.StructuredEntities {
		keys = append(keys, k)
	}
	rank := func(k string) int {
		if i := slices.Index(required, k); i >= 0 {
			return i
		}
		return len(required)
	}
	slices.SortFunc(keys, func(a, b string) int { return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b)) })
	var out []views.Entity
	for _, k := range keys {
		if limit > 0 && len(out) == limit {
			break
		}
		v := p.StructuredEntities[k]
		var value string
		switch v.Kind() {
		case handoff.EntityList:
			value = strings.Join(v.List(), ", ")
		case handoff.EntityNumber:
			value = v.Number().String()
		case handoff.EntityBool:
			value = strconv.FormatBool(v.Bool())
		default:
			value = v.Text()
		}
		out = append(out, views.Entity{Key: k, Value: value})
	}
	return out
}

func formatTime(t *time.Time) string {
	if t == nil {
		return ""
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// citationLinks are the schemes a citation may link to: https, http and the CRM's own (such as
// crm: and policy:), whose links open in whatever the agent's machine registered for them. It is a
// list of what is allowed because no list of what is not can be complete: ms-msdt:, search-ms: and
// intent: each start a program on the agent's machine. Other citations show as plain text.
type citationLinks []string

// schemeName is the syntax of a URI scheme (RFC 3986, 3.1), lower-cased.
var schemeName = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)

// newCitationLinks allows https, http and the configured schemes. It refuses those that would run
// script or read local files from the desk's pages, whatever the configuration says.
func newCitationLinks(schemes []string) (citationLinks, error) {
	links := citationLinks{"https", "http"}
	for _, s := range schemes {
		scheme := strings.ToLower(strings.TrimSuffix(s, ":"))
		switch {
		case !schemeName.MatchString(scheme):
			return nil, fmt.Errorf("CITATION_SCHEMES: %q is not a URI scheme", s)
		case slices.Contains([]string{"javascript", "vbscript", "data", "blob", "file"}, scheme):
			return nil, fmt.Errorf("CITATION_SCHEMES: %q links could run script or read files in the desk's pages", s)
		}
		links = append(links, scheme)
	}
	return links, nil
}

// href is the link for a citation, or "" when it is to be shown as text.
func (links citationLinks) href(uri string) string {
	u, err := url.Parse(uri)
	if err != nil || !slices.Contains(links, strings.ToLower(u.Scheme)) {
		return ""
	}
	return uri
}

// handoffView maps a package to its full view for one receiver.
func handoffView(item board.Item, user auth.User, perms actions.Permissions, transferTargets []string, links citationLinks) views.HandoffView {
	vis := visibility(user, item)
	p := item.Package.MaskFor(vis)
	v := views.HandoffView{
		Card:      cardOf(item, vis, 0),
		ContactID: p.Contact.ID, ContactEmail: p.Contact.Email, ContactPhone: p.Contact.Phone, PIIMasked: !vis.PII,
		UserVerified: p.UserVerified, Trigger: string(p.Trigger), Reason: p.Reason, TransferMode: string(p.TransferMode),
		SourceAgent: p.SourceAgent, Locale: p.Locale, OpenQuestions: p.OpenQuestions,
		RecommendedNextStep: p.RecommendedNextStep, DraftReply: p.DraftReply, HandoffChain: p.HandoffChain,
		Outcome:  outcomeOf(item),
		Controls: controls(perms, transferTargets),
	}
	v.Controls.Entities = v.Card.Entities
	if user.Role.AtLeast(auth.RoleSupervisor) {
		v.History = "/audit?package=" + url.QueryEscape(item.PublicID)
	}
	if p.Refund != nil {
		v.Refund = p.Refund.Amount + " " + p.Refund.Currency
	}
	for _, a := range p.AttemptedActions {
		v.AttemptedActions = append(v.AttemptedActions, views.Action{Tool: a.Tool, Result: a.Result, OK: a.OK, At: formatTime(a.At)})
	}
	for i, c := range p.Citations {
		// A citation masking changed would link to a mangled address: it shows as text.
		href := ""
		if c == item.Package.Citations[i] {
			href = links.href(c)
		}
		v.Citations = append(v.Citations, views.Citation{URI: c, Href: href})
	}
	return v
}

// timelineOf is the package's timeline for user: what people wrote is masked as every text people
// wrote is (handoff.WrittenMaskFor). It also says which of that named the customer and was shown
// unmasked, for the record of PII reads: "note", or nothing.
func timelineOf(item board.Item, user auth.User, lines []timeline.Line, canNote bool) (views.Timeline, []string) {
	vis := visibility(user, item)
	mask := item.Package.WrittenMaskFor(vis)
	// What a viewer below the queue's PII role would be shown: where it differs, this one saw more.
	masked := item.Package.NoteMaskFor(handoff.Visibility{PIIEntityKeys: vis.PIIEntityKeys})
	t := views.Timeline{ID: item.PublicID, CanNote: canNote, NoteLimit: actions.MaxNoteChars}
	var unmasked []string
	for _, l := range lines {
		if vis.PII && unmasked == nil && masked(l.Note) != l.Note {
			unmasked = []string{"note"}
		}
		t.Lines = append(t.Lines, views.TimelineLine{At: l.At, Kind: string(l.Kind), Text: l.Text,
			Note: mask(l.Note, writerOf(user, l.NoteBy, l.NoteBySawContact))})
	}
	return t, unmasked
}

// writerOf is who wrote a text about a package for user, from the writer's user id (0 for a bot or
// the desk) and whether they could see the contact when they wrote it.
func writerOf(user auth.User, by int64, sawContact bool) handoff.Writer {
	return handoff.Writer{Viewer: by != 0 && by == user.ID, SawContact: sawContact}
}

func controls(perms actions.Permissions, transferTargets []string) views.Controls {
	return views.Controls{
		CanAccept: perms.Accept, CanReject: perms.Reject, CanReturn: perms.Return,
		CanTransfer: perms.Transfer, CanResolve: perms.Resolve, TransferTargets: transferTargets,
		ReturnReasons: handoff.ReturnReasons(), ResolutionCodes: handoff.ResolutionCodes(), NoteLimit: actions.MaxNoteChars,
	}
}

// outcomeOf says how a package ended: its code, and for a refund what was paid back against what
// was asked, so a partial refund reads as one.
func outcomeOf(item board.Item) string {
	r := item.Refund
	switch {
	case r == nil:
		return item.Outcome
	case r.Partial:
		return fmt.Sprintf("%s %s %s of %s %s asked", item.Outcome, r.Amount, r.Currency, r.RequestedAmount, r.RequestedCurrency)
	case r.RequestedAmount != "" && r.RequestedCurrency != r.Currency:
		return fmt.Sprintf("%s %s %s (%s %s asked)", item.Outcome, r.Amount, r.Currency, r.RequestedAmount, r.RequestedCurrency)
	}
	return fmt.Sprintf("%s %s %s", item.Outcome, r.Amount, r.Currency)
}

// editorOf is the co-pilot editor for the agent who may reply: the draft with tokens where
// their role may not see a value (handoff.Draft). Once a reply was sent the composer starts
// empty, so that the bot's stale draft is not offered for a second send.
func editorOf(item board.Item, user auth.User, replied bool) *views.Editor {
	d := item.Package.DraftFor(visibility(user, item))
	e := &views.Editor{Draft: d.Text, Text: d.Text, Tokens: d.Tokens(), Tags: evals.Tags(), Limit: evals.MaxReplyChars, Replied: replied}
	if replied {
		e.Text = ""
	}
	return e
}

// approvalFirst keeps the reply for after the decision on a refund that needs approval: until
// then the composer holds no draft (the bot's would promise the money) and says why; once decided,
// it holds a reply that tells the customer, to edit and send.
func approvalFirst(e *views.Editor, a views.ApprovalControls) {
	if e.Replied || !a.Needed {
		return
	}
	switch d := a.Decision; {
	case a.Pending() != nil:
		e.Text, e.Awaiting = "", "The refund of "+a.Refund+" awaits a supervisor's approval: the reply that tells the customer comes once it is decided."
	case a.AskFirst():
		e.Text, e.Awaiting = "", "The refund of "+a.Refund+" needs a supervisor's approval: ask for it first, then tell the customer what was decided."
	case d != nil && d.State == string(approvals.Granted):
		e.Text = "Good news: your refund of " + d.Refund + " is approved. You will see it on your statement within a few business days."
		e.Suggested = "The refund is approved: a reply that tells the customer, to edit before you send it."
	case d != nil && d.State == string(approvals.Denied):
		e.Text = "I am sorry: we are not able to refund " + d.Refund + " this time. Is there anything else I can help you with?"
		e.Suggested = "The refund was denied: a reply that tells the customer, to edit before you send it."
	}
}

// repliesOf maps the replies sent on a package to the page, newest first, each as the thread shows
// it (replyText): with the tokens the editor showed where the viewer may not see a value, or as
// submitted by an agent who could not see them either.
func repliesOf(item board.Item, user auth.User, rs []evals.SentReply) []views.SentReply {
	vis := visibility(user, item)
	out := make([]views.SentReply, 0, len(rs))
	for _, r := range slices.Backward(rs) {
		text := replyText(item.Package, vis, r.Final, r.AsWritten)
		how := "edited the draft"
		switch {
		case r.FromScratch:
			how = "written from scratch"
		case r.AcceptedAsIs:
			how = "draft sent as is"
		}
		out = append(out, views.SentReply{Editor: r.Editor, At: formatTime(&r.At), Text: text, Tags: r.Tags, How: how})
	}
	return out
}
