package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/approvals"
	"github.com/handoffdesk/desk/internal/audit"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/timeline"
	"github.com/handoffdesk/desk/views"
)

// handleRequestApproval asks a supervisor to approve the package's refund (form field note).
func (s *Server) handleRequestApproval(c echo.Context) error {
	id := c.Param("id")
	if _, err := s.actions.RequestApproval(c.Request().Context(), currentUser(c), id, strings.TrimSpace(c.FormValue("note"))); err != nil {
		return s.actionFailed(c, id, err)
	}
	return c.Redirect(http.StatusSeeOther, packagePage(c, id))
}

func (s *Server) handleWithdrawApproval(c echo.Context) error {
	id := c.Param("id")
	if err := s.actions.WithdrawApproval(c.Request().Context(), currentUser(c), id); err != nil {
		return s.actionFailed(c, id, err)
	}
	return c.Redirect(http.StatusSeeOther, packagePage(c, id))
}

func (s *Server) handleApprovals(c echo.Context) error {
	return s.renderApprovals(c, "", http.StatusOK)
}

func (s *Server) renderApprovals(c echo.Context, flash string, status int) error {
	user := currentUser(c)
	ctx := c.Request().Context()
	pending, err := approvals.PendingList(ctx, s.db)
	if err != nil {
		return err
	}
	around, err := s.approvalContexts(ctx, pending)
	if err != nil {
		return err
	}
	rows, shown := approvalRows(user, pending, around)
	if err := audit.Record(ctx, s.db, user.ID, audit.ViaPage, shown); err != nil {
		return err
	}
	answersAt(c, "/approvals")
	return s.render(c, status, views.ApprovalsPage(views.ApprovalsView{Viewer: *viewer(c), Rows: rows, Flash: flash,
		Live: views.LiveConfig{Approvals: true, Mark: string(s.hub.Mark())}}))
}

func (s *Server) handleApprove(c echo.Context) error { return s.decide(c, true) }
func (s *Server) handleDeny(c echo.Context) error    { return s.decide(c, false) }

// decide grants or denies the request in the path with the form's note, and shows /approvals
// again; a refusal shows there with its status (403 for the requester or holder, 409 for the
// loser of a race or an expired request, 422 without a note).
func (s *Server) decide(c echo.Context, grant bool) error {
	raw := c.Param("approval_id")
	id, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || id <= 0 {
		return desk.Errorf(desk.NotFound, "no approval %q", raw)
	}
	_, err = s.actions.Decide(c.Request().Context(), currentUser(c), id, grant, strings.TrimSpace(c.FormValue("note")))
	if code := desk.ErrorCode(err); err != nil && code != desk.Internal {
		return s.renderApprovals(c, desk.ErrorMessage(err), statusOf[code])
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/approvals")
}

// approvalRows are the pending requests as user sees them: each package masked by the one PII
// policy for the user's role in its queue, and why the user may not decide it, if not; and the
// contact names they show unmasked, for the record of PII reads.
func approvalRows(user auth.User, pending []approvals.Listed, around map[int64]approvalContext) ([]views.ApprovalRow, audit.Shown) {
	var shown audit.Shown
	now := time.Now()
	rows := make([]views.ApprovalRow, 0, len(pending))
	for _, l := range pending {
		item := board.Item{Package: l.Package, PIIMinRole: l.PIIMinRole, PIIEntityKeys: l.PIIEntityKeys}
		vis := visibility(user, item)
		p := l.Package.MaskFor(vis)
		shown.Add(l.HandoffID, vis.Unmasked(handoff.Package{Contact: handoff.Contact{DisplayName: l.Package.Contact.DisplayName}}))
		contact := p.Contact.DisplayName
		if contact == "" {
			contact = p.Contact.ID
		}
		r := views.ApprovalRow{ID: strconv.FormatInt(l.ID, 10), HandoffID: l.PublicID, Queue: l.Queue,
			ProblemStatement: p.ProblemStatement, Contact: contact, Refund: l.Refund.String(), Agent: l.Requester,
			Note: l.Package.WrittenMaskFor(vis)(l.Note, writerOf(user, l.RequestedBy, l.RequesterSawContact)), RequestedAt: l.RequestedAt, Timeout: l.ApprovalTimeout,
			NoteLimit: actions.MaxNoteChars}
		if err := approvals.Check(user, l.Approval, l.AssigneeID, now); err != nil {
			r.WhyNot = desk.ErrorMessage(err)
		}
		// The context is masked as the package page masks it for this viewer.
		c := around[l.HandoffID]
		r.Replies, r.Earlier = repliesOf(item, user, c.replies), earlierOf(c.earlier)
		t, unmasked := timelineOf(item, user, c.lines, false)
		r.Timeline = t.Lines
		shown.Add(l.HandoffID, unmasked)
		rows = append(rows, r)
	}
	return rows, shown
}

// approvalContext is what a pending request's card shows beside it: the replies sent on its
// package, the contact's earlier handoffs and the package's timeline, unmasked, read once for
// every supervisor who sees the list.
type approvalContext struct {
	replies []evals.SentReply
	earlier []board.Earlier
	lines   []timeline.Line
}

// approvalContexts reads the context of each pending request, by the package's row id.
// Supervisors and admins see every queue's earlier handoffs, as on the package page.
func (s *Server) approvalContexts(ctx context.Context, pending []approvals.Listed) (map[int64]approvalContext, error) {
	out := make(map[int64]approvalContext, len(pending))
	for _, l := range pending {
		var c approvalContext
		var err error
		if c.replies, err = evals.Replies(ctx, s.db, l.HandoffID); err != nil {
			return nil, err
		}
		if c.earlier, err = s.board.History(ctx, l.HandoffID, 0, true); err != nil {
			return nil, err
		}
		entries, err := timeline.Read(ctx, s.db, l.HandoffID)
		if err != nil {
			return nil, err
		}
		c.lines = timeline.Lines(entries)
		out[l.HandoffID] = c
	}
	return out, nil
}

// approvalControls are the package's refund and approvals as user sees them on the action panel.
func (s *Server) approvalControls(ctx context.Context, user auth.User, item board.Item, perms actions.Permissions) (views.ApprovalControls, error) {
	var a views.ApprovalControls
	history, err := approvals.ForHandoff(ctx, s.db, item.ID)
	if err != nil {
		return a, err
	}
	if r := approvals.RefundOf(item.Package); r != nil {
		a.Refund, a.RefundAmount = r.String(), r.Amount
		if a.Needed, err = approvals.Needed(*r, item.RefundThreshold, item.Currency); err != nil {
			return a, err
		}
	}
	a.CanWithdraw = perms.WithdrawApproval
	mask := item.Package.WrittenMaskFor(visibility(user, item))
	now := time.Now()
	for _, h := range history {
		decider := int64(0)
		if h.DecidedBy != nil {
			decider = *h.DecidedBy
		}
		if h.State == approvals.Pending && approvals.Check(user, h, item.AssigneeID, now) == nil {
			a.Decide = strconv.FormatInt(h.ID, 10)
		}
		a.History = append(a.History, views.ApprovalLine{ID: strconv.FormatInt(h.ID, 10), State: string(h.State),
			Refund: h.Refund.String(), Requester: h.Requester, Note: mask(h.Note, writerOf(user, h.RequestedBy, h.RequesterSawContact)),
			RequestedAt: formatTime(&h.RequestedAt), Decider: h.Decider,
			DecisionNote: mask(h.DecisionNote, writerOf(user, decider, h.DeciderSawContact)),
			DecidedAt:    formatTime(h.DecidedAt)})
	}
	// The latest request, once decided, is the agent's news: a grant is what they resolve with,
	// and no second request is offered for the amount it covers.
	granted := false
	if n := len(history); n > 0 && history[n-1].State != approvals.Pending && history[n-1].State != approvals.Withdrawn {
		a.Decision = &a.History[n-1]
		if last := history[n-1]; last.State == approvals.Granted {
			granted = true
			a.RefundAmount = last.Refund.Amount
		}
	}
	a.CanRequest = perms.RequestApproval && a.Needed && !granted
	return a, nil
}
