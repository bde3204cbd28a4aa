package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/approvals"
	"github.com/handoffdesk/desk/internal/audit"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/savedreply"
	"github.com/handoffdesk/desk/internal/timeline"
	"github.com/handoffdesk/desk/internal/webhook"
	"github.com/handoffdesk/desk/views"
)

// mayView checks that the user works the queue (or oversees every queue) and says so in the
// error otherwise.
func (s *Server) mayView(ctx context.Context, user auth.User, queueID int64) (member bool, err error) {
	member, err = s.queues.IsMember(ctx, user.ID, queueID)
	if err != nil {
		return false, err
	}
	if !mayViewQueue(user, member) {
		return false, desk.Errorf(desk.Forbidden, "you are not a member of this queue")
	}
	return member, nil
}

// mayViewQueue is who sees a queue's packages: its members, and supervisors and admins.
func mayViewQueue(user auth.User, member bool) bool {
	return member || user.Role.AtLeast(auth.RoleSupervisor)
}

// visibleItem reads a package and whether the user works its queue. A package the user may not
// see answers as a missing one, so that an agent cannot probe which ids exist in other queues.
func (s *Server) visibleItem(ctx context.Context, user auth.User, id string) (board.Item, bool, error) {
	item, err := s.board.Item(ctx, id)
	if err != nil {
		return board.Item{}, false, err
	}
	member, err := s.mayView(ctx, user, item.QueueID)
	if desk.ErrorCode(err) == desk.Forbidden {
		return board.Item{}, false, board.NoItem(id)
	}
	return item, member, err
}

func (s *Server) handleQueue(c echo.Context) error {
	return s.renderQueue(c, c.Param("name"), "", http.StatusOK)
}

// renderQueue reads the page in three round trips: the queue, whether the user works it, the
// packages they hold and the top bar; the queue's page of packages; whose customers wait, with the
// record of what the page shows unmasked.
func (s *Server) renderQueue(c echo.Context, name, flash string, status int) error {
	ctx := c.Request().Context()
	user := currentUser(c)
	b := &pgx.Batch{}
	var top *topBar
	if _, ok := pageUser(c); ok {
		top = s.queueTopBar(b, user)
	}
	var (
		q             queue.Queue
		member, found bool
		held          []board.Item
	)
	queue.QueueNamedFor(b, name, user.ID, &q, &member, &found)
	board.QueueHeld(b, user.ID, &held)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	if top != nil {
		top.held = rowIDs(held)
		top.set(c)
	}
	if !found || !mayViewQueue(user, member) {
		return queue.Unknown(name)
	}
	var after *board.Cursor
	if raw := c.QueryParam("after"); raw != "" {
		cursor, err := board.ParseCursor(raw)
		if err != nil {
			return err
		}
		after = &cursor
	}
	waiting, next, err := s.board.Waiting(ctx, q.ID, after)
	if err != nil {
		return err
	}
	answersAt(c, "/queues/"+q.Name)
	v := views.QueueView{Viewer: *viewer(c), Queue: q.Name, Flash: flash,
		Live: views.LiveConfig{Queues: []string{q.Name}, Mark: string(s.hub.Mark())}}
	var shown audit.Shown
	for _, it := range waiting {
		shown.Add(it.ID, cardUnmasked(it, visibility(user, it), cardEntities))
	}
	for _, it := range held {
		shown.Add(it.ID, cardUnmasked(it, visibility(user, it), cardEntities))
	}
	b = &pgx.Batch{}
	var customers map[int64]conversation.Waiting
	conversation.QueueWaitingOf(b, append(rowIDs(waiting), rowIDs(held)...), &customers)
	audit.QueueRecord(b, user.ID, audit.ViaPage, shown)
	if err := s.db.SendBatch(ctx, b).Close(); err != nil {
		return err
	}
	for _, it := range waiting {
		v.Cards = append(v.Cards, withWaiting(cardOf(it, visibility(user, it), cardEntities), customers, it.ID))
	}
	for _, it := range held {
		v.Held = append(v.Held, withWaiting(cardOf(it, visibility(user, it), cardEntities), customers, it.ID))
	}
	if next != nil {
		v.More = next.String()
	}
	return s.render(c, status, views.QueuePage(v))
}

// rowIDs are the row ids of items.
func rowIDs(items []board.Item) []int64 {
	ids := make([]int64, len(items))
	for i, it := range items {
		ids[i] = it.ID
	}
	return ids
}

// loadHandoff reads a package and what the user may do with it, and what the view shows them
// unmasked: a caller that shows the view records that first (audit.Record). notes says what of
// that the timeline alone shows ("note": what people wrote named the customer).
func (s *Server) loadHandoff(ctx context.Context, user auth.User, id string) (_ views.HandoffView, _ audit.Shown, notes []string, _ error) {
	item, member, err := s.visibleItem(ctx, user, id)
	if err != nil {
		return views.HandoffView{}, audit.Shown{}, nil, err
	}
	var shown audit.Shown
	shown.Add(item.ID, visibility(user, item).Unmasked(item.Package))
	entries, err := timeline.Read(ctx, s.db, item.ID)
	if err != nil {
		return views.HandoffView{}, audit.Shown{}, nil, err
	}
	lines := timeline.Lines(entries)
	perms := actions.Allowed(user, member, item.State, time.Now())
	var targets []string
	if perms.Transfer {
		q, err := s.queues.ByName(ctx, item.Queue)
		if err != nil {
			return views.HandoffView{}, audit.Shown{}, nil, err
		}
		if targets, err = s.queues.TransferTargets(ctx, q); err != nil {
			return views.HandoffView{}, audit.Shown{}, nil, err
		}
	}
	v := handoffView(item, user, perms, targets, s.citations)
	v.Timeline, notes = timelineOf(item, user, lines, perms.Note)
	shown.Add(item.ID, notes)
	if v.Controls.Approval, err = s.approvalControls(ctx, user, item, perms); err != nil {
		return views.HandoffView{}, audit.Shown{}, nil, err
	}
	if d := v.Controls.Approval.Decision; d != nil && d.State == string(approvals.Granted) {
		v.Controls.ResolveCode = "refunded"
	}
	if v.Controls.Reassign, err = s.reassignControls(ctx, user, item, perms.Reassign); err != nil {
		return views.HandoffView{}, audit.Shown{}, nil, err
	}
	v.Controls.HeldBy = heldBy(user, item)
	replies, err := evals.Replies(ctx, s.db, item.ID)
	if err != nil {
		return views.HandoffView{}, audit.Shown{}, nil, err
	}
	msgs, err := conversation.Read(ctx, s.db, item.ID, 0)
	if err != nil {
		return views.HandoffView{}, audit.Shown{}, nil, err
	}
	deliveries, err := webhook.ReplyDeliveries(ctx, s.db, item.PublicID)
	if err != nil {
		return views.HandoffView{}, audit.Shown{}, nil, err
	}
	var unmasked []string
	v.Thread, unmasked = threadOf(item, user, msgs, replies, deliveries)
	customers, err := conversation.WaitingOf(ctx, s.db, []int64{item.ID})
	if err != nil {
		return views.HandoffView{}, audit.Shown{}, nil, err
	}
	v.Card = withWaiting(v.Card, customers, item.ID)
	quiet, err := conversation.Quiet(ctx, s.db, []int64{item.ID})
	if err != nil {
		return views.HandoffView{}, audit.Shown{}, nil, err
	}
	v.Card.Idle = customerIdle(quiet, item, time.Now())
	shown.Add(item.ID, unmasked)
	earlier, err := s.board.History(ctx, item.ID, user.ID, user.Role.AtLeast(auth.RoleSupervisor))
	if err != nil {
		return views.HandoffView{}, audit.Shown{}, nil, err
	}
	v.Earlier = earlierOf(earlier)
	v.Controls.CanReply, v.Controls.Replied = perms.Reply, len(replies) > 0
	if perms.Reply {
		v.Editor = editorOf(item, user, len(replies) > 0)
		v.Editor.Offer = draftOffer(item, visibility(user, item), msgs)
		saved, err := savedreply.List(ctx, s.db, item.QueueID)
		if err != nil {
			return views.HandoffView{}, audit.Shown{}, nil, err
		}
		for _, r := range saved {
			v.Editor.Saved = append(v.Editor.Saved, views.SavedReply{ID: strconv.FormatInt(r.ID, 10), Title: r.Title,
				Text: item.Package.TemplateFor(visibility(user, item), r.Body)})
		}
		approvalFirst(v.Editor, v.Controls.Approval)
	} else {
		v.Gone = goneWhy(user, item)
	}
	v.Live = views.LiveConfig{Handoff: item.PublicID, Mark: string(s.hub.Mark())}
	// Read after the mark: a change in between reaches the page's socket as it catches up.
	if v.OthersViewing, err = s.othersViewing(ctx, user, item.ID); err != nil {
		return views.HandoffView{}, audit.Shown{}, nil, err
	}
	return v, shown, notes, nil
}

func (s *Server) handleHandoff(c echo.Context) error {
	return s.renderHandoff(c, c.Param("id"), http.StatusOK, s.noticed(c))
}

// renderHandoff renders the package page, after show has set what this answer adds to the view
// (a flash, the text of a refused reply).
func (s *Server) renderHandoff(c echo.Context, id string, status int, show func(*views.HandoffView)) error {
	ctx, user := c.Request().Context(), currentUser(c)
	v, shown, _, err := s.loadHandoff(ctx, user, id)
	if err != nil {
		return err
	}
	if err := audit.Record(ctx, s.db, user.ID, audit.ViaPage, shown); err != nil {
		return err
	}
	v.Viewer = viewer(c)
	show(&v)
	return s.render(c, status, views.HandoffPage(v))
}

func (s *Server) handleSidebar(c echo.Context) error {
	return s.renderSidebar(c, c.Param("id"), http.StatusOK, s.noticed(c))
}

func (s *Server) renderSidebar(c echo.Context, id string, status int, show func(*views.HandoffView)) error {
	s.allowFraming(c)
	ctx, user := c.Request().Context(), currentUser(c)
	v, shown, _, err := s.loadHandoff(ctx, user, id)
	if err != nil {
		return err
	}
	if err := audit.Record(ctx, s.db, user.ID, audit.ViaSidebar, shown); err != nil {
		return err
	}
	v.Viewer = viewer(c)
	show(&v)
	return s.render(c, status, views.SidebarPage(v))
}

// renderPackage answers an action on a package with its view where the action came from: the
// sidebar inside a CRM's frame, the page elsewhere.
func (s *Server) renderPackage(c echo.Context, id string, status int, show func(*views.HandoffView)) error {
	answersAt(c, packagePage(c, id))
	if framed(c) {
		return s.renderSidebar(c, id, status, show)
	}
	return s.renderHandoff(c, id, status, show)
}

// framed reports whether the browser sent the request from inside a frame: the sidebar in a CRM.
// Its answer goes back to the sidebar, the one page a CRM may frame; the package page or the
// queue would be refused by frame-ancestors and leave the agent an empty box. Sec-Fetch-Dest is
// set by the browser on every navigation, the sidebar's forms included, and a page cannot forge
// it; the forms themselves stay the same as on the package page, whose action panel the socket
// replaces with the same component.
func framed(c echo.Context) bool { return c.Request().Header.Get("Sec-Fetch-Dest") == "iframe" }

// packagePage is where an action on package id leads: the sidebar when it came from one.
func packagePage(c echo.Context, id string) string {
	if framed(c) {
		return "/sidebar/" + id
	}
	return "/handoffs/" + id
}

// allowFraming lets the configured CRM origins embed this response.
func (s *Server) allowFraming(c echo.Context) {
	ancestors := "'none'"
	if len(s.cfg.FrameAncestors) > 0 {
		ancestors = strings.Join(s.cfg.FrameAncestors, " ")
	}
	c.Response().Header().Set("Content-Security-Policy",
		"default-src 'self'; img-src 'self' data:; frame-ancestors "+ancestors+"; base-uri 'none'; form-action 'self'")
}

// actionFailed shows an action's refusal on the page the agent acted from, with the status the
// error maps to; other errors go to the error handler.
func (s *Server) actionFailed(c echo.Context, id string, err error) error {
	code := desk.ErrorCode(err)
	if code == desk.Internal {
		return err
	}
	return s.renderPackage(c, id, statusOf[code], func(v *views.HandoffView) { v.Flash = desk.ErrorMessage(err) })
}

func (s *Server) handleNext(c echo.Context) error {
	name := c.Param("name")
	id, err := s.actions.Next(c.Request().Context(), currentUser(c), name)
	if err != nil {
		if code := desk.ErrorCode(err); code != desk.Internal {
			return s.renderQueue(c, name, desk.ErrorMessage(err), statusOf[code])
		}
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/handoffs/"+id)
}

func (s *Server) handleAccept(c echo.Context) error {
	id := c.Param("id")
	if err := s.actions.Accept(c.Request().Context(), currentUser(c), id); err != nil {
		return s.actionFailed(c, id, err)
	}
	return c.Redirect(http.StatusSeeOther, packagePage(c, id))
}

// closing runs an action after which the package leaves the agent's hands, and goes back to the
// queue the package was in; in a sidebar, which holds one package, it shows the package as it is
// now.
func (s *Server) closing(c echo.Context, act func(ctx context.Context, user auth.User, id string) (from string, err error)) error {
	id := c.Param("id")
	from, err := act(c.Request().Context(), currentUser(c), id)
	if err != nil {
		return s.actionFailed(c, id, err)
	}
	if framed(c) {
		return c.Redirect(http.StatusSeeOther, "/sidebar/"+id)
	}
	return c.Redirect(http.StatusSeeOther, "/queues/"+from)
}

func (s *Server) handleReject(c echo.Context) error {
	return s.closing(c, func(ctx context.Context, user auth.User, id string) (string, error) {
		return s.actions.Reject(ctx, user, id, strings.TrimSpace(c.FormValue("reason")), c.FormValue("queue"))
	})
}

func (s *Server) handleReturn(c echo.Context) error {
	return s.closing(c, func(ctx context.Context, user auth.User, id string) (string, error) {
		back, err := handBackForm(c)
		if err != nil {
			return "", err
		}
		return s.actions.ReturnToBot(ctx, user, id, c.FormValue("reason"), strings.TrimSpace(c.FormValue("note")), back)
	})
}

func (s *Server) handleTransfer(c echo.Context) error {
	return s.closing(c, func(ctx context.Context, user auth.User, id string) (string, error) {
		return s.actions.Transfer(ctx, user, id, c.FormValue("queue"), strings.TrimSpace(c.FormValue("note")))
	})
}

// handleResolve closes the package with a code; refunded takes the refunded amount from the form
// field amount (empty: the amount the package asks), which a granted approval must cover.
func (s *Server) handleResolve(c echo.Context) error {
	return s.closing(c, func(ctx context.Context, user auth.User, id string) (string, error) {
		note := strings.TrimSpace(c.FormValue("note"))
		back, err := handBackForm(c)
		if err != nil {
			return "", err
		}
		if code := c.FormValue("code"); code != "refunded" {
			return s.actions.Resolve(ctx, user, id, code, note, back)
		}
		return s.actions.ResolveRefunded(ctx, user, id, strings.TrimSpace(c.FormValue("amount")), note, back)
	})
}

// handleReply sends the agent's reply (form fields text, tags, editing_ms) and shows the package
// again, with the reply among those sent.
func (s *Server) handleReply(c echo.Context) error {
	id := c.Param("id")
	form, err := c.FormParams()
	if err != nil {
		return err
	}
	text := form.Get("text")
	r, err := evals.ParseReply(text, form["tags"], form.Get("editing_ms"))
	var saved int64
	if v := form.Get("saved_reply"); v != "" && err == nil {
		if saved, err = strconv.ParseInt(v, 10, 64); err != nil || saved <= 0 {
			err = desk.Errorf(desk.Invalid, "saved_reply names a saved reply by its id, a whole number, not %q", v)
		}
	}
	if err == nil {
		err = s.actions.ReplyFrom(c.Request().Context(), currentUser(c), id, r, saved)
	}
	if code := desk.ErrorCode(err); code == desk.Invalid {
		// The agent's text stays in the composer beside what was wrong with it, to be fixed, not retyped.
		return s.renderPackage(c, id, statusOf[code], func(v *views.HandoffView) {
			if v.Editor == nil {
				v.Flash, v.Kept = desk.ErrorMessage(err), text
				return
			}
			v.Editor.Text, v.Editor.Error = text, desk.ErrorMessage(err)
		})
	} else if code != desk.Internal {
		// Refused (the package is no longer theirs, or not yet): the text is never thrown away. It
		// stays in the composer when there still is one, or is kept beside why for them to copy.
		return s.renderPackage(c, id, statusOf[code], func(v *views.HandoffView) {
			v.Flash = desk.ErrorMessage(err)
			if v.Editor != nil {
				v.Editor.Text = text
			} else {
				v.Kept = text
			}
		})
	} else if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, packagePage(c, id))
}

// goneWhy says why user may not reply to item, for a page that held the composer: who holds it
// now, or where it went.
func goneWhy(user auth.User, item board.Item) string {
	switch {
	case !item.Status.Open():
		return "This package is no longer open: it is " + timeline.Spoken(string(item.Status)) + "."
	case item.AssigneeID != nil && !item.HeldBy(user.ID):
		return "This package is no longer yours: " + item.Assignee + " holds it now."
	case item.AssigneeID == nil:
		return "This package is no longer yours: it is back in the queue."
	}
	return "You may not reply to this package as it is now (" + timeline.Spoken(string(item.Status)) + ")."
}

// handleNote keeps an internal note on the package (form field text) and shows the package again,
// the note on its timeline. A refused note comes back in its field, with what was wrong with it.
func (s *Server) handleNote(c echo.Context) error {
	id, text := c.Param("id"), c.FormValue("text")
	err := s.actions.AddNote(c.Request().Context(), currentUser(c), id, text)
	if code := desk.ErrorCode(err); code == desk.Invalid {
		return s.renderPackage(c, id, statusOf[code], func(v *views.HandoffView) {
			v.Timeline.NoteText, v.Timeline.NoteError = text, desk.ErrorMessage(err)
		})
	} else if err != nil {
		return s.actionFailed(c, id, err)
	}
	return c.Redirect(http.StatusSeeOther, packagePage(c, id))
}
