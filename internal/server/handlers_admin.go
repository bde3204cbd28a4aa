package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/savedreply"
	"github.com/handoffdesk/desk/internal/sso"
	"github.com/handoffdesk/desk/internal/webhook"
	"github.com/handoffdesk/desk/views"
)

// The admin console. Each handler reads the form, calls access (which has the owner make the
// change and logs it), and renders; a refused form is shown again with each bad field's
// complaint beside it and the values as typed, so nothing is lost.

func (s *Server) handleAdmin(c echo.Context) error {
	return c.Redirect(http.StatusSeeOther, "/admin/queues")
}

// idParam reads a numeric path parameter; anything else is a page that does not exist.
func idParam(c echo.Context, name string) (int64, error) {
	id, err := strconv.ParseInt(c.Param(name), 10, 64)
	if err != nil || id <= 0 {
		return 0, desk.Errorf(desk.NotFound, "no such %s", name)
	}
	return id, nil
}

// refused reports whether err is one a form shows to its user (a bad field, a conflict), and its
// status; any other error is the error handler's.
func refused(err error) (int, bool) {
	switch code := desk.ErrorCode(err); code {
	case desk.Invalid, desk.Conflict, desk.NotFound:
		return statusOf[code], true
	}
	return 0, false
}

// withErrors puts err's complaints beside their fields, and the rest above the form.
func withErrors(f views.AdminForm, err error) views.AdminForm {
	fields := desk.FieldsOf(err)
	placed := 0
	for i := range f.Fields {
		if msg, ok := fields[f.Fields[i].Name]; ok {
			f.Fields[i].Error = msg
			placed++
		}
	}
	if placed < len(fields) || len(fields) == 0 {
		f.Error = desk.ErrorMessage(err)
	}
	return f
}

// queueOptions are the queues a reference setting may name, "none" first.
func queueOptions(all []queue.Queue, except int64) []views.Option {
	options := []views.Option{{Value: "", Label: "— none —"}}
	for _, q := range all {
		if q.ID != except {
			options = append(options, views.Option{Value: strconv.FormatInt(q.ID, 10), Label: q.Name})
		}
	}
	return options
}

// queueForm is the form of queue.Settings, filled with values.
func queueForm(action, submit string, values map[string][]string, all []queue.Queue, self int64) views.AdminForm {
	f := views.AdminForm{Action: action, Submit: submit, TestID: "queue-form"}
	for _, st := range queue.Settings() {
		field := views.FormField{Name: st.Field, Label: st.Label, Help: st.Help, Input: string(st.Input)}
		v := values[st.Field]
		switch st.Input {
		case queue.InputChoices:
			field.Selected = v
			for _, o := range st.Options {
				field.Options = append(field.Options, views.Option{Value: o, Label: o})
			}
		case queue.InputSelect:
			for _, o := range st.Options {
				field.Options = append(field.Options, views.Option{Value: o, Label: o})
			}
		case queue.InputQueue:
			field.Input, field.Options = "select", queueOptions(all, self)
		}
		if len(v) > 0 {
			field.Value = v[0]
		}
		f.Fields = append(f.Fields, field)
	}
	return f
}

func (s *Server) queuesPage(c echo.Context, status int, form views.AdminForm) error {
	ctx := c.Request().Context()
	all, err := s.queues.All(ctx)
	if err != nil {
		return err
	}
	members, err := s.queues.Memberships(ctx)
	if err != nil {
		return err
	}
	if form.Action == "" {
		form = queueForm("/admin/queues", "Create queue", queue.Values(queue.Defaults()), all, 0)
	}
	count := map[int64]int{}
	for _, m := range members {
		count[m.QueueID]++
	}
	v := views.AdminQueuesView{Viewer: *viewer(c), Form: form}
	for _, t := range queueTree(all) {
		v.Queues = append(v.Queues, views.AdminQueueRow{ID: strconv.FormatInt(t.q.ID, 10), Name: t.q.Name, Depth: t.depth,
			Enabled: t.q.Enabled, Members: count[t.q.ID], PIIRole: t.q.PIIMinRole})
	}
	answersAt(c, "/admin/queues")
	return s.render(c, status, views.AdminQueuesPage(v))
}

type treeRow struct {
	q     queue.Queue
	depth int
}

// queueTree orders queues as a tree: each under its parent, siblings by name.
func queueTree(all []queue.Queue) []treeRow {
	children := map[int64][]queue.Queue{}
	var roots []queue.Queue
	ids := map[int64]bool{}
	for _, q := range all {
		ids[q.ID] = true
	}
	for _, q := range all {
		if q.ParentID == nil || !ids[*q.ParentID] {
			roots = append(roots, q)
		} else {
			children[*q.ParentID] = append(children[*q.ParentID], q)
		}
	}
	var rows []treeRow
	var walk func(q queue.Queue, depth int)
	walk = func(q queue.Queue, depth int) {
		rows = append(rows, treeRow{q, depth})
		for _, child := range children[q.ID] {
			walk(child, depth+1)
		}
	}
	for _, q := range roots {
		walk(q, 0)
	}
	return rows
}

func (s *Server) handleAdminQueues(c echo.Context) error {
	return s.queuesPage(c, http.StatusOK, views.AdminForm{})
}

func (s *Server) handleAdminCreateQueue(c echo.Context) error {
	values, err := c.FormParams()
	if err != nil {
		return err
	}
	q, err := s.access.SaveQueue(c.Request().Context(), 0, values, currentUser(c).ID)
	if status, ok := refused(err); ok {
		all, lerr := s.queues.All(c.Request().Context())
		if lerr != nil {
			return lerr
		}
		return s.queuesPage(c, status, withErrors(queueForm("/admin/queues", "Create queue", values, all, 0), err))
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/queues/"+strconv.FormatInt(q.ID, 10))
}

func (s *Server) queuePage(c echo.Context, status int, id int64, values url.Values, formErr, otherErr error) error {
	ctx := c.Request().Context()
	all, err := s.queues.All(ctx)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(all, func(q queue.Queue) bool { return q.ID == id })
	if i < 0 {
		return desk.Errorf(desk.NotFound, "no queue has id %d", id)
	}
	q := all[i]
	if values == nil {
		values = queue.Values(q)
	}
	path := "/admin/queues/" + strconv.FormatInt(id, 10)
	v := views.AdminQueueView{Viewer: *viewer(c), Name: q.Name, Enabled: q.Enabled, Enable: path + "/enable",
		Form: queueForm(path, "Save", values, all, id)}
	if formErr != nil {
		v.Form = withErrors(v.Form, formErr)
	}
	moveTo := views.FormField{Name: "move_to", Label: "Move open packages to", Input: "select",
		Help: "A queue that still holds open packages is disabled only once they move; accepted ones stay with their agent."}
	moveTo.Options = []views.Option{{Value: "", Label: "— none —"}}
	for _, o := range all {
		if o.Enabled && o.ID != id {
			moveTo.Options = append(moveTo.Options, views.Option{Value: strconv.FormatInt(o.ID, 10), Label: o.Name})
		}
	}
	v.Disable = views.AdminForm{Action: path + "/disable", Submit: "Disable " + q.Name, TestID: "disable-queue", Fields: []views.FormField{moveTo}}
	people, err := s.auth.People(ctx)
	if err != nil {
		return err
	}
	members, err := s.queues.Memberships(ctx)
	if err != nil {
		return err
	}
	add := views.FormField{Name: "user", Label: "Add a member", Input: "select", Help: "An enabled person who is not a member yet."}
	for _, p := range people {
		works := slices.ContainsFunc(members, func(m queue.Member) bool { return m.QueueID == id && m.UserID == p.ID })
		switch {
		case works:
			v.Members = append(v.Members, views.Option{Value: strconv.FormatInt(p.ID, 10), Label: p.Email})
		case !p.Disabled:
			add.Options = append(add.Options, views.Option{Value: strconv.FormatInt(p.ID, 10), Label: p.Email})
		}
	}
	v.AddMember = views.AdminForm{Action: path + "/members", Submit: "Add", TestID: "add-member", Fields: []views.FormField{add}}
	v.RemoveAction = path + "/members/"
	saved, err := savedreply.List(ctx, s.db, id)
	if err != nil {
		return err
	}
	for _, r := range saved {
		v.SavedReplies = append(v.SavedReplies, views.SavedReply{ID: strconv.FormatInt(r.ID, 10), Title: r.Title, Text: r.Body})
	}
	v.RemoveSavedAction = path + "/saved-replies/"
	// A refused saved reply comes back with what the admin typed.
	var title, body string
	if strings.HasSuffix(c.Path(), "/saved-replies") {
		title, body = c.FormValue("title"), c.FormValue("body")
	}
	v.AddSavedReply = views.AdminForm{Action: path + "/saved-replies", Submit: "Add saved reply", TestID: "add-saved-reply", Fields: []views.FormField{
		{Name: "title", Label: "Title", Value: title, Help: fmt.Sprintf("What agents pick it by; up to %d characters, one per title in the queue.", savedreply.MaxTitle)},
		{Name: "body", Label: "Text", Input: "textarea", Value: body, Help: "The reply, with tokens where the customer's values go."},
	}}
	if otherErr != nil {
		// A refusal is shown on the form it came from.
		switch {
		case strings.HasSuffix(c.Path(), "/disable"):
			v.Disable = withErrors(v.Disable, otherErr)
		case strings.HasSuffix(c.Path(), "/saved-replies"):
			v.AddSavedReply = withErrors(v.AddSavedReply, otherErr)
		default:
			v.AddMember = withErrors(v.AddMember, otherErr)
		}
	}
	answersAt(c, path)
	return s.render(c, status, views.AdminQueuePage(v))
}

func (s *Server) handleAdminQueue(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	return s.queuePage(c, http.StatusOK, id, nil, nil, nil)
}

func (s *Server) handleAdminSaveQueue(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	values, err := c.FormParams()
	if err != nil {
		return err
	}
	_, err = s.access.SaveQueue(c.Request().Context(), id, values, currentUser(c).ID)
	if status, ok := refused(err); ok && desk.ErrorCode(err) != desk.NotFound {
		return s.queuePage(c, status, id, values, err, nil)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/queues/"+strconv.FormatInt(id, 10))
}

func (s *Server) handleAdminDisableQueue(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	var moveTo int64
	if v := c.FormValue("move_to"); v != "" {
		if moveTo, err = strconv.ParseInt(v, 10, 64); err != nil {
			return desk.Errorf(desk.Invalid, "move_to %q is not a queue", v)
		}
	}
	err = s.access.DisableQueue(c.Request().Context(), id, moveTo, currentUser(c).ID)
	if status, ok := refused(err); ok && desk.ErrorCode(err) != desk.NotFound {
		return s.queuePage(c, status, id, nil, nil, err)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/queues/"+strconv.FormatInt(id, 10))
}

// memberAction adds (remove false) or removes the form's or path's user to or from the queue.
func (s *Server) memberAction(c echo.Context, remove bool) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	ctx, actor := c.Request().Context(), currentUser(c).ID
	if remove {
		userID, err := idParam(c, "user")
		if err != nil {
			return err
		}
		q, err := queue.ByID(ctx, s.db, id)
		if err == nil {
			err = s.access.RemoveMember(ctx, userID, q, actor)
		}
		if err != nil {
			return err
		}
	} else {
		userID, perr := strconv.ParseInt(c.FormValue("user"), 10, 64)
		err = desk.Errorf(desk.Invalid, "pick a person to add")
		if perr == nil {
			err = s.access.AddMember(ctx, userID, id, actor)
		}
		if status, ok := refused(err); ok {
			return s.queuePage(c, status, id, nil, nil, err)
		}
		if err != nil {
			return err
		}
	}
	return c.Redirect(http.StatusSeeOther, "/admin/queues/"+strconv.FormatInt(id, 10))
}

func (s *Server) handleAdminAddMember(c echo.Context) error { return s.memberAction(c, false) }

func (s *Server) handleAdminRemoveMember(c echo.Context) error { return s.memberAction(c, true) }

// handleAdminAddSavedReply saves a reply for the queue's agents (form fields title, body); a
// refusal comes back on its form with what was typed.
func (s *Server) handleAdminAddSavedReply(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	err = s.access.AddSavedReply(c.Request().Context(), id, c.FormValue("title"), c.FormValue("body"), currentUser(c).ID)
	if status, ok := refused(err); ok && desk.ErrorCode(err) != desk.NotFound {
		return s.queuePage(c, status, id, nil, nil, err)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/queues/"+strconv.FormatInt(id, 10))
}

func (s *Server) handleAdminRemoveSavedReply(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	reply, err := idParam(c, "reply")
	if err != nil {
		return err
	}
	if err := s.access.RemoveSavedReply(c.Request().Context(), id, reply, currentUser(c).ID); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/queues/"+strconv.FormatInt(id, 10))
}

func (s *Server) handleAdminEnableQueue(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	if err := s.access.EnableQueue(c.Request().Context(), id, currentUser(c).ID); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/queues/"+strconv.FormatInt(id, 10))
}

// userForm is the form for a user; new users also get an email and a first password.
func userForm(action string, isNew bool, values url.Values, all []queue.Queue) views.AdminForm {
	f := views.AdminForm{Action: action, Submit: "Save", TestID: "user-form"}
	if isNew {
		f.Submit = "Create user"
		f.Fields = append(f.Fields,
			views.FormField{Name: "email", Label: "Email", Input: "email", Value: values.Get("email"), Help: "Their login; one account per address, any case."},
			views.FormField{Name: "password", Label: "First password", Input: "password", Help: "At least 8 characters; give it to them, and they can change it at /password."})
	}
	roles := []views.Option{}
	for _, r := range auth.Roles {
		roles = append(roles, views.Option{Value: string(r), Label: string(r)})
	}
	queues := []views.Option{}
	for _, q := range all {
		if q.Enabled {
			queues = append(queues, views.Option{Value: strconv.FormatInt(q.ID, 10), Label: q.Name})
		}
	}
	f.Fields = append(f.Fields,
		views.FormField{Name: "name", Label: "Name", Input: "text", Value: values.Get("name"), Help: "How agents and supervisors see them."},
		views.FormField{Name: "role", Label: "Role", Input: "select", Value: values.Get("role"), Options: roles,
			Help: "Agents work their queues; supervisors oversee all; admins also run this console."},
		views.FormField{Name: "queues", Label: "Queues", Input: "choices", Selected: values["queues"], Options: queues, Help: "The queues they work."},
		views.FormField{Name: "capacity", Label: "Capacity", Input: "number", Value: values.Get("capacity"), Help: "How many packages they hold at once."})
	return f
}

func queueIDs(values url.Values) ([]int64, error) {
	var ids []int64
	for _, v := range values["queues"] {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, desk.Errorf(desk.Invalid, "queue %q is not a queue", v)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// capacityOf reads the capacity field: empty is the default (0), and anything but a positive
// number is left for the domain's check to refuse (-1).
func capacityOf(v string) int {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return -1
	}
	return n
}

func (s *Server) usersPage(c echo.Context, status int, form *views.AdminForm) error {
	ctx := c.Request().Context()
	all, err := s.queues.All(ctx)
	if err != nil {
		return err
	}
	people, err := s.auth.People(ctx)
	if err != nil {
		return err
	}
	members, err := s.queues.Memberships(ctx)
	if err != nil {
		return err
	}
	seen, err := s.queues.SeenNow(ctx)
	if err != nil {
		return err
	}
	names := map[int64]string{}
	for _, q := range all {
		names[q.ID] = q.Name
	}
	works := map[int64][]string{}
	for _, m := range members {
		works[m.UserID] = append(works[m.UserID], names[m.QueueID])
	}
	v := views.AdminUsersView{Viewer: *viewer(c)}
	if form != nil {
		v.Form = *form
	} else {
		v.Form = userForm("/admin/users", true, url.Values{"role": {"agent"}, "capacity": {strconv.Itoa(auth.DefaultCapacity)}}, all)
	}
	for _, p := range people {
		row := views.AdminUserRow{ID: strconv.FormatInt(p.ID, 10), Email: p.Email, Name: p.DisplayName, Role: string(p.Role),
			Queues: strings.Join(works[p.ID], ", "), Capacity: p.Capacity, Status: "active", LastSeen: "never"}
		switch {
		case p.Disabled:
			row.Status = "disabled"
		case p.MustChangePassword:
			row.Status = "must change password"
		}
		switch at, online := seen[p.ID]; {
		case online:
			row.LastSeen = "online now (" + at.UTC().Format("15:04:05 UTC") + ")"
		case p.LastLogin != nil:
			row.LastSeen = "logged in " + p.LastLogin.UTC().Format("2006-01-02 15:04 UTC")
		}
		v.Users = append(v.Users, row)
	}
	answersAt(c, "/admin/users")
	return s.render(c, status, views.AdminUsersPage(v))
}

func (s *Server) handleAdminUsers(c echo.Context) error { return s.usersPage(c, http.StatusOK, nil) }

func (s *Server) handleAdminCreateUser(c echo.Context) error {
	ctx := c.Request().Context()
	values, err := c.FormParams()
	if err != nil {
		return err
	}
	ids, err := queueIDs(values)
	if err == nil {
		_, err = s.access.CreateUser(ctx, auth.NewUser{Email: values.Get("email"), DisplayName: values.Get("name"),
			Role: auth.Role(values.Get("role")), Password: values.Get("password"), Capacity: capacityOf(values.Get("capacity"))},
			ids, currentUser(c).ID)
	}
	if status, ok := refused(err); ok {
		all, lerr := s.queues.All(ctx)
		if lerr != nil {
			return lerr
		}
		form := withErrors(userForm("/admin/users", true, values, all), err)
		return s.usersPage(c, status, &form)
	}
	if err != nil {
		return err
	}
	s.notify(c, noticeUserCreated)
	return c.Redirect(http.StatusSeeOther, "/admin/users")
}

func (s *Server) userPage(c echo.Context, status int, id int64, values url.Values, formErr, actionErr error) error {
	ctx := c.Request().Context()
	p, err := s.auth.PersonByID(ctx, id)
	if err != nil {
		return err
	}
	all, err := s.queues.All(ctx)
	if err != nil {
		return err
	}
	if values == nil {
		works, err := queue.QueuesOf(ctx, s.db, id)
		if err != nil {
			return err
		}
		values = url.Values{"name": {p.DisplayName}, "role": {string(p.Role)}, "capacity": {strconv.Itoa(p.Capacity)}}
		for _, q := range works {
			values.Add("queues", strconv.FormatInt(q, 10))
		}
	}
	path := "/admin/users/" + strconv.FormatInt(id, 10)
	v := views.AdminUserView{Viewer: *viewer(c), ID: strconv.FormatInt(id, 10), Email: p.Email, Disabled: p.Disabled, SSOOnly: p.SSOOnly,
		Form: userForm(path, false, values, all)}
	if formErr != nil {
		v.Form = withErrors(v.Form, formErr)
	}
	if actionErr != nil {
		v.Error = desk.ErrorMessage(actionErr)
	}
	answersAt(c, path)
	return s.render(c, status, views.AdminUserPage(v))
}

func (s *Server) handleAdminUser(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	return s.userPage(c, http.StatusOK, id, nil, nil, nil)
}

func (s *Server) handleAdminSaveUser(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	values, err := c.FormParams()
	if err != nil {
		return err
	}
	ids, err := queueIDs(values)
	if err == nil {
		err = s.access.EditUser(c.Request().Context(), id, access.UserEdit{
			Profile: auth.Profile{DisplayName: values.Get("name"), Capacity: capacityOf(values.Get("capacity"))},
			Role:    auth.Role(values.Get("role")), QueueIDs: ids}, currentUser(c).ID)
	}
	if status, ok := refused(err); ok {
		return s.userPage(c, status, id, values, err, nil)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/users/"+strconv.FormatInt(id, 10))
}

// userAction runs one of the buttons of a user's page: a refusal is shown on the page.
func (s *Server) userAction(c echo.Context, act func(ctx context.Context, id, actor int64) error) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	err = act(c.Request().Context(), id, currentUser(c).ID)
	if status, ok := refused(err); ok && desk.ErrorCode(err) != desk.NotFound {
		return s.userPage(c, status, id, nil, nil, err)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/users/"+strconv.FormatInt(id, 10))
}

// confirmed reports whether the form says confirm=yes. Disabling a person and revoking a key
// act at once on others (a person's open pages, a bot's next request): the first POST answers
// with what will happen, and only the confirmation's POST acts.
func confirmed(c echo.Context) bool { return c.FormValue("confirm") == "yes" }

func (s *Server) handleAdminDisableUser(c echo.Context) error {
	if confirmed(c) {
		return s.userAction(c, s.access.Disable)
	}
	ctx := c.Request().Context()
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	p, err := s.auth.PersonByID(ctx, id)
	if err != nil {
		return err
	}
	path := "/admin/users/" + strconv.FormatInt(id, 10)
	if p.Disabled {
		return c.Redirect(http.StatusSeeOther, path)
	}
	impact, err := s.access.ImpactOfDisable(ctx, id)
	if err != nil {
		return err
	}
	answersAt(c, path)
	return s.render(c, http.StatusOK, views.ConfirmPage(views.ConfirmView{Viewer: *viewer(c), Tab: "/admin/users",
		Title: "Disable " + p.Email + "?", Consequences: disableConsequences(p.DisplayName, impact),
		Action: path + "/disable", Submit: "Disable " + p.Email, Cancel: path, TestID: "confirm-disable"}))
}

// disableConsequences says what disabling the person named name does, as the admin confirms it.
func disableConsequences(name string, impact access.DisableImpact) []string {
	lines := []string{name + " can no longer log in, with a password or single sign-on."}
	switch impact.Sessions {
	case 0:
		lines = append(lines, "They have no open session.")
	case 1:
		lines = append(lines, "Their open session ends: every page they have open goes to the login page.")
	default:
		lines = append(lines, fmt.Sprintf("Their %d open sessions end: every page they have open goes to the login page.", impact.Sessions))
	}
	packages, approvals := 0, 0
	var where []string
	for _, h := range impact.Held {
		packages += h.Packages
		approvals += h.AwaitingApproval
		where = append(where, fmt.Sprintf("%d to %s", h.Packages, h.Queue))
	}
	switch {
	case packages == 0:
		lines = append(lines, "They hold no package.")
	case len(impact.Held) == 1:
		lines = append(lines, fmt.Sprintf("%s back to %s, for the next agent.", heldPackages(packages), impact.Held[0].Queue))
	default:
		lines = append(lines, fmt.Sprintf("%s back to their queues (%s), for the next agent.", heldPackages(packages), strings.Join(where, ", ")))
	}
	switch approvals {
	case 0:
	case 1:
		lines = append(lines, "The refund approval they asked for is withdrawn, and its bot is told.")
	default:
		lines = append(lines, fmt.Sprintf("The %d refund approvals they asked for are withdrawn, and the bots are told.", approvals))
	}
	return append(lines, "You can enable them again later; the packages do not come back to them.")
}

func heldPackages(n int) string {
	if n == 1 {
		return "1 held package goes"
	}
	return fmt.Sprintf("%d held packages go", n)
}

func (s *Server) handleAdminEnableUser(c echo.Context) error { return s.userAction(c, s.access.Enable) }

func (s *Server) handleAdminResetPassword(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	p, err := s.auth.PersonByID(c.Request().Context(), id)
	if err != nil {
		return err
	}
	password, err := s.access.ResetPassword(c.Request().Context(), id, currentUser(c).ID)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	answersAt(c, "/admin/users/"+strconv.FormatInt(id, 10))
	return s.render(c, http.StatusOK, views.SecretPage(views.SecretView{Viewer: *viewer(c), Title: "Temporary password for " + p.Email,
		Note:    "Shown this once. Their sessions have ended; with this password they log in once and choose their own.",
		Secrets: []views.Option{{Label: "password", Value: password}}, Back: "/admin/users/" + strconv.FormatInt(id, 10)}))
}

// handleAdminSSOOnly turns the user's password login off (sso_only=on) or on again (off).
func (s *Server) handleAdminSSOOnly(c echo.Context) error {
	var ssoOnly bool
	switch v := c.FormValue("sso_only"); v {
	case "on":
		ssoOnly = true
	case "off":
	default:
		return desk.Errorf(desk.Invalid, "sso_only %q is neither on nor off", v)
	}
	return s.userAction(c, func(ctx context.Context, id, actor int64) error {
		if ssoOnly && s.sso == nil {
			// Their password would be refused and nothing else lets them in.
			return desk.Errorf(desk.Conflict, "this desk has no identity provider (OIDC_ISSUER): a user who may sign in with single sign-on only could not sign in at all")
		}
		return s.access.SetSSOOnly(ctx, id, ssoOnly, actor)
	})
}

// keyForm is the form for a key's name (new keys only), queues and webhook URL.
func keyForm(action string, isNew bool, values url.Values, all []queue.Queue) views.AdminForm {
	f := views.AdminForm{Action: action, Submit: "Save", TestID: "key-form"}
	if isNew {
		f.Submit = "Create key"
		f.Fields = append(f.Fields, views.FormField{Name: "name", Label: "Name", Input: "text", Value: values.Get("name"), Help: "Which bot holds the key."})
	}
	queues := []views.Option{}
	for _, q := range all {
		if q.Enabled {
			queues = append(queues, views.Option{Value: strconv.FormatInt(q.ID, 10), Label: q.Name})
		}
	}
	f.Fields = append(f.Fields,
		views.FormField{Name: "queues", Label: "Queues", Input: "choices", Selected: values["queues"], Options: queues, Help: "The queues the bot may send packages to."},
		views.FormField{Name: "webhook_url", Label: "Webhook URL", Input: "text", Value: values.Get("webhook_url"),
			Help: "Where the desk POSTs what happens to the bot's packages, signed with the key's secret; empty: no webhooks."})
	return f
}

func (s *Server) keysPage(c echo.Context, status int, form *views.AdminForm) error {
	ctx := c.Request().Context()
	all, err := s.queues.All(ctx)
	if err != nil {
		return err
	}
	keys, err := s.auth.APIKeys(ctx)
	if err != nil {
		return err
	}
	v := views.AdminKeysView{Viewer: *viewer(c)}
	if form != nil {
		v.Form = *form
	} else {
		v.Form = keyForm("/admin/keys", true, url.Values{}, all)
	}
	for _, k := range keys {
		row := views.AdminKeyRow{ID: strconv.FormatInt(k.ID, 10), Name: k.Name, Prefix: k.Prefix, Queues: queueNames(all, k.QueueIDs),
			WebhookURL: k.WebhookURL, Created: k.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"), LastUsed: "never", Revoked: k.Revoked != nil}
		if k.LastUsed != nil {
			row.LastUsed = k.LastUsed.UTC().Format("2006-01-02 15:04 UTC")
		}
		v.Keys = append(v.Keys, row)
	}
	answersAt(c, "/admin/keys")
	return s.render(c, status, views.AdminKeysPage(v))
}

func queueNames(all []queue.Queue, ids []int64) string {
	var names []string
	for _, q := range all {
		if slices.Contains(ids, q.ID) {
			names = append(names, q.Name)
		}
	}
	return strings.Join(names, ", ")
}

func (s *Server) handleAdminKeys(c echo.Context) error { return s.keysPage(c, http.StatusOK, nil) }

func (s *Server) handleAdminCreateKey(c echo.Context) error {
	ctx := c.Request().Context()
	values, err := c.FormParams()
	if err != nil {
		return err
	}
	ids, err := queueIDs(values)
	var issued auth.IssuedAPIKey
	if err == nil {
		issued, err = s.access.CreateAPIKey(ctx, auth.NewAPIKey{Name: values.Get("name"), QueueIDs: ids,
			WebhookURL: strings.TrimSpace(values.Get("webhook_url")), AllowPrivateWebhook: s.cfg.AllowPrivateWebhooks}, currentUser(c).ID)
	}
	if status, ok := refused(err); ok {
		all, lerr := s.queues.All(ctx)
		if lerr != nil {
			return lerr
		}
		form := withErrors(keyForm("/admin/keys", true, values, all), err)
		return s.keysPage(c, status, &form)
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	answersAt(c, "/admin/keys/"+strconv.FormatInt(issued.ID, 10))
	return s.render(c, http.StatusCreated, views.SecretPage(views.SecretView{Viewer: *viewer(c), Title: "Key " + issued.Name + " created",
		Note: "The key and its signing secret are shown this once: give them to the bot now. Bots send the key as " +
			"\"Authorization: Bearer <key>\" and verify webhooks with the secret, with any Standard Webhooks library " +
			"(docs/bots.md, \"Verifying a webhook\").",
		Secrets: []views.Option{{Label: "key", Value: issued.Key}, {Label: "signing-secret", Value: issued.WebhookSecret}},
		Back:    "/admin/keys/" + strconv.FormatInt(issued.ID, 10)}))
}

func (s *Server) keyPage(c echo.Context, status int, id int64, values url.Values, formErr, rotateErr error) error {
	ctx := c.Request().Context()
	k, err := s.auth.APIKeyByID(ctx, id)
	if err != nil {
		return err
	}
	all, err := s.queues.All(ctx)
	if err != nil {
		return err
	}
	if values == nil {
		values = url.Values{"webhook_url": {k.WebhookURL}}
		for _, q := range k.QueueIDs {
			values.Add("queues", strconv.FormatInt(q, 10))
		}
	}
	path := "/admin/keys/" + strconv.FormatInt(id, 10)
	v := views.AdminKeyView{Viewer: *viewer(c), ID: strconv.FormatInt(id, 10), Name: k.Name, Prefix: k.Prefix, Revoked: k.Revoked != nil,
		Form: keyForm(path, false, values, all)}
	if formErr != nil {
		v.Form = withErrors(v.Form, formErr)
	}
	v.Rotate = rotateForm(path, c.FormValue("overlap"))
	if k.PreviousSecretUntil != nil {
		v.PreviousUntil = k.PreviousSecretUntil.UTC().Format("2006-01-02 15:04 UTC")
	}
	if rotateErr != nil {
		v.Rotate = withErrors(v.Rotate, rotateErr)
	}
	var before int64
	if b := c.QueryParam("before"); b != "" {
		if before, err = strconv.ParseInt(b, 10, 64); err != nil || before <= 0 {
			return desk.Errorf(desk.BadRequest, "before %q is not a delivery id", b)
		}
	}
	deliveries, err := webhook.Deliveries(ctx, s.db, webhook.DeliveryFilter{APIKeyID: id, Before: before, Limit: webhook.DefaultDeliveryLimit})
	if err != nil {
		return err
	}
	for _, d := range deliveries {
		row := views.AdminDelivery{ID: strconv.FormatInt(d.ID, 10), Event: d.Event, HandoffID: d.HandoffID, State: d.State,
			Attempts: d.Attempts, LastError: d.LastError, Created: d.CreatedAt.UTC().Format(time.DateTime),
			Redeliverable: d.Redeliverable()}
		if d.LastStatus != 0 {
			row.LastStatus = strconv.Itoa(d.LastStatus)
		}
		if d.State == webhook.StatePending {
			row.NextAttempt = d.NextAttemptAt.UTC().Format(time.DateTime)
		}
		v.Deliveries = append(v.Deliveries, row)
	}
	if len(deliveries) == webhook.DefaultDeliveryLimit {
		v.Older = path + "?before=" + strconv.FormatInt(deliveries[len(deliveries)-1].ID, 10)
	}
	answersAt(c, path)
	return s.render(c, status, views.AdminKeyPage(v))
}

func (s *Server) handleAdminKey(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	return s.keyPage(c, http.StatusOK, id, nil, nil, nil)
}

func (s *Server) handleAdminSaveKey(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	values, err := c.FormParams()
	if err != nil {
		return err
	}
	ids, err := queueIDs(values)
	if err == nil {
		err = s.access.EditAPIKey(c.Request().Context(), id, auth.KeyReach{QueueIDs: ids,
			WebhookURL: strings.TrimSpace(values.Get("webhook_url")), AllowPrivateWebhook: s.cfg.AllowPrivateWebhooks}, currentUser(c).ID)
	}
	if status, ok := refused(err); ok && desk.ErrorCode(err) != desk.NotFound {
		return s.keyPage(c, status, id, values, err, nil)
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/keys/"+strconv.FormatInt(id, 10))
}

// handleAdminRevokeKey revokes the key once confirmed (see confirmed); first it says what will
// happen.
func (s *Server) handleAdminRevokeKey(c echo.Context) error {
	ctx := c.Request().Context()
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	path := "/admin/keys/" + strconv.FormatInt(id, 10)
	if confirmed(c) {
		if err := s.access.RevokeAPIKey(ctx, id, currentUser(c).ID); err != nil {
			return err
		}
		return c.Redirect(http.StatusSeeOther, path)
	}
	k, err := s.auth.APIKeyByID(ctx, id)
	if err != nil {
		return err
	}
	if k.Revoked != nil {
		return c.Redirect(http.StatusSeeOther, path)
	}
	open, err := s.access.OpenFromKey(ctx, id)
	if err != nil {
		return err
	}
	answersAt(c, path)
	return s.render(c, http.StatusOK, views.ConfirmPage(views.ConfirmView{Viewer: *viewer(c), Tab: "/admin/keys",
		Title: "Revoke key " + k.Name + "?", Consequences: revokeConsequences(k.Name, k.Prefix, k.WebhookURL, open),
		Action: path + "/revoke", Submit: "Revoke " + k.Name, Cancel: path, TestID: "confirm-revoke"}))
}

// revokeConsequences says what revoking a key does, as the admin confirms it.
func revokeConsequences(name, prefix, webhookURL string, open int) []string {
	lines := []string{fmt.Sprintf("The bot's requests with key %s (%s…) are refused from the next one, on every instance.", name, prefix),
		"This cannot be undone: the bot will need a new key."}
	packages, their := "Its 1 open package stays in its queue for the agents", "its"
	if open != 1 {
		packages, their = fmt.Sprintf("Its %d open packages stay in their queues for the agents", open), "their"
	}
	switch {
	case open == 0:
		lines = append(lines, "It has no open package.")
	case webhookURL != "":
		lines = append(lines, packages+"; the desk goes on sending "+their+" webhooks to "+webhookURL+".")
	default:
		lines = append(lines, packages+".")
	}
	return lines
}

// rotateForm is the form for a new signing secret; overlap is as typed, or empty for the default.
func rotateForm(keyPath, overlap string) views.AdminForm {
	if overlap == "" {
		overlap = queue.FormatDuration(auth.DefaultSecretOverlap)
	}
	return views.AdminForm{Action: keyPath + "/rotate", Submit: "Rotate secret", TestID: "rotate-form", Fields: []views.FormField{
		{Name: "overlap", Label: "Overlap", Input: "text", Value: overlap,
			Help: "How long the old secret also signs (both signatures in Webhook-Signature), for the bot to move over; 0s stops it now, for a leaked secret."}}}
}

// handleAdminRotateKey gives the key a new signing secret and shows it once.
func (s *Server) handleAdminRotateKey(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	overlap, err := time.ParseDuration(strings.TrimSpace(c.FormValue("overlap")))
	if err != nil {
		err = &desk.Error{Code: desk.Invalid, Details: map[string]string{"overlap": "a duration like 24h, 90m or 0s"},
			Message: fmt.Sprintf("overlap %q is not a duration", c.FormValue("overlap"))}
	}
	var r auth.RotatedSecret
	if err == nil {
		r, err = s.access.RotateWebhookSecret(c.Request().Context(), id, overlap, currentUser(c).ID)
	}
	if status, ok := refused(err); ok && desk.ErrorCode(err) != desk.NotFound {
		return s.keyPage(c, status, id, nil, nil, err)
	}
	if err != nil {
		return err
	}
	note := "The old secret no longer signs: give the new one to the bot now."
	if !r.PreviousUntil.IsZero() {
		note = "Until " + r.PreviousUntil.UTC().Format("2006-01-02 15:04 UTC") + " each delivery carries both signatures " +
			"(Webhook-Signature: v1,<new> v1,<old>); give the new secret to the bot before then."
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	answersAt(c, "/admin/keys/"+strconv.FormatInt(id, 10))
	return s.render(c, http.StatusOK, views.SecretPage(views.SecretView{Viewer: *viewer(c), Title: "New signing secret for " + r.Key.Name,
		Note: "Shown this once. " + note, Secrets: []views.Option{{Label: "signing-secret", Value: r.Secret}},
		Back: "/admin/keys/" + strconv.FormatInt(id, 10)}))
}

func (s *Server) handleAdminRedeliver(c echo.Context) error {
	id, err := idParam(c, "id")
	if err != nil {
		return err
	}
	delivery, err := idParam(c, "delivery")
	if err != nil {
		return err
	}
	if err := s.access.Redeliver(c.Request().Context(), id, delivery, currentUser(c).ID); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/keys/"+strconv.FormatInt(id, 10))
}

// passwordForm is the form to choose a new password.
func passwordForm() views.AdminForm {
	return views.AdminForm{Action: "/password", Submit: "Change password", TestID: "password-form", Fields: []views.FormField{
		{Name: "current", Label: "Current password", Input: "password", Help: "The one you logged in with (the temporary one after a reset)."},
		{Name: "password", Label: "New password", Input: "password", Help: "At least 8 characters."},
	}}
}

func (s *Server) handlePasswordForm(c echo.Context) error {
	return s.render(c, http.StatusOK, views.PasswordPage(views.PasswordView{Viewer: *viewer(c), Forced: currentUser(c).MustChangePassword, Form: passwordForm()}))
}

func (s *Server) handleChangePassword(c echo.Context) error {
	user := currentUser(c)
	cookie, err := c.Cookie(sessionCookie)
	if err != nil {
		return desk.Errorf(desk.Unauthorized, "log in first")
	}
	err = s.access.ChangePassword(c.Request().Context(), user.ID, c.FormValue("current"), c.FormValue("password"), cookie.Value)
	if status, ok := refused(err); ok {
		answersAt(c, "/password")
		return s.render(c, status, views.PasswordPage(views.PasswordView{Viewer: *viewer(c), Forced: user.MustChangePassword,
			Form: withErrors(passwordForm(), err)}))
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/")
}

// settingsForm is the form of the desk's single sign-on settings.
func settingsForm(unknownEmails string) views.AdminForm {
	return views.AdminForm{Action: "/admin/settings", Submit: "Save", TestID: "sso-settings", Fields: []views.FormField{
		{Name: "unknown_emails", Label: "Unknown emails", Input: "select", Value: unknownEmails,
			Options: []views.Option{{Value: sso.RefuseUnknown, Label: "refuse"}, {Value: sso.CreateUnknown, Label: "create an agent with no queues"}},
			Help:    "What signing in with a verified email no user has does: refused, or a new agent who signs in with single sign-on only."}}}
}

func (s *Server) settingsPage(c echo.Context, status int, form views.AdminForm) error {
	answersAt(c, "/admin/settings")
	return s.render(c, status, views.AdminSettingsPage(views.AdminSettingsView{Viewer: *viewer(c), SSOConfigured: s.sso != nil, SSO: form}))
}

func (s *Server) handleAdminSettings(c echo.Context) error {
	policy, err := sso.UnknownEmails(c.Request().Context(), s.db)
	if err != nil {
		return err
	}
	return s.settingsPage(c, http.StatusOK, settingsForm(policy))
}

func (s *Server) handleAdminSaveSettings(c echo.Context) error {
	policy := c.FormValue("unknown_emails")
	err := s.access.SetUnknownEmails(c.Request().Context(), policy, currentUser(c).ID)
	if status, ok := refused(err); ok {
		return s.settingsPage(c, status, withErrors(settingsForm(policy), err))
	}
	if err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, "/admin/settings")
}
