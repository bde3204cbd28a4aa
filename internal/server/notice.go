package server

import (
	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/views"
)

// A notice tells the page an action redirected to what the action did, once: the action sets a
// short-lived cookie holding the notice's code, and the next page takes it. The cookie carries a
// code from this closed set, never text, so nobody can make the desk say something through it.
const (
	noticeCookie      = "desk_notice"
	noticeReplySent   = "reply_sent"
	noticeNoteAdded   = "note_added"
	noticeUserCreated = "user_created"
)

// packageNotices put each notice a package's page shows beside what the action changed.
var packageNotices = map[string]func(*views.HandoffView){
	noticeReplySent: func(v *views.HandoffView) {
		if v.Editor != nil {
			v.Editor.Notice = "Your reply was sent to the customer. It is at the top of the replies sent."
		}
	},
	noticeNoteAdded: func(v *views.HandoffView) {
		v.Timeline.Notice = "Your note was added to the timeline. Only the desk sees it."
	},
}

// pageNotices are what the other pages say, as a line of text.
var pageNotices = map[string]string{
	noticeUserCreated: "The user was created: they log in with the first password you gave them, and can change it at /password.",
}

// noticeMaxAge covers the redirect and a slow page load, not a later visit.
const noticeMaxAge = 60

func (s *Server) notify(c echo.Context, code string) {
	ck := s.sessionCookieFor(code) //nolint:gosec // G124: the session cookie's flags, from sessionCookieFor.
	ck.Name, ck.MaxAge = noticeCookie, noticeMaxAge
	c.SetCookie(ck)
}

// noticed takes the notice the request carries, if any, and puts it on the package's view.
func (s *Server) noticed(c echo.Context) func(*views.HandoffView) {
	if show, ok := packageNotices[s.takeNotice(c)]; ok {
		return show
	}
	return func(*views.HandoffView) {}
}

// takeNotice takes the code of the notice the request carries, "" when it carries none: the
// cookie goes with this answer, so the notice shows once.
func (s *Server) takeNotice(c echo.Context) string {
	ck, err := c.Cookie(noticeCookie)
	if err != nil {
		return ""
	}
	gone := s.sessionCookieFor("") //nolint:gosec // G124: clears the cookie notify set, with its flags.
	gone.Name, gone.MaxAge = noticeCookie, -1
	c.SetCookie(gone)
	return ck.Value
}
