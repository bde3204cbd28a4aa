package server

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/views"
)

// A notice tells the page an action redirected to what the action did, once: the action sets a
// short-lived cookie holding the notice's code, and the next page takes it and says it in a
// polite live region. The cookie carries a code from this closed set, never text, so nobody can
// make the desk say something through it. routes.go names each action's notice (confirm).
const (
	noticeCookie = "desk_notice"

	noticeAccepted          = "accepted"
	noticeReserved          = "reserved"
	noticeRejected          = "rejected"
	noticeReturned          = "returned"
	noticeTransferred       = "transferred"
	noticeResolved          = "resolved"
	noticeReplySent         = "reply_sent"
	noticeNoteAdded         = "note_added"
	noticeApprovalRequested = "approval_requested"
	noticeApprovalWithdrawn = "approval_withdrawn"
	noticeDeclined          = "declined"
	noticeReassigned        = "reassigned"
	noticeApprovalGranted   = "approval_granted"
	noticeApprovalDenied    = "approval_denied"
	noticePasswordChanged   = "password_changed"
	noticeLoggedIn          = "logged_in"
	noticeLoggedOut         = "logged_out"

	noticeQueueCreated      = "queue_created"
	noticeQueueSaved        = "queue_saved"
	noticeQueueDisabled     = "queue_disabled"
	noticeQueueEnabled      = "queue_enabled"
	noticeSavedReplyAdded   = "saved_reply_added"
	noticeSavedReplyRemoved = "saved_reply_removed"
	noticeMemberAdded       = "member_added"
	noticeMemberRemoved     = "member_removed"
	noticeUserCreated       = "user_created"
	noticeUserSaved         = "user_saved"
	noticeUserDisabled      = "user_disabled"
	noticeUserEnabled       = "user_enabled"
	noticeKeySaved          = "key_saved"
	noticeKeyRevoked        = "key_revoked"
	noticeRedelivered       = "redelivered"
	noticeSettingsSaved     = "settings_saved"
)

// noticeStatus is the notice of a choice of availability: its code is the choice's.
func noticeStatus(c echo.Context) string { return "status_" + c.FormValue("status") }

// noticeSSOOnly is the notice of turning a person's password login off or on.
func noticeSSOOnly(c echo.Context) string { return "sso_only_" + c.FormValue("sso_only") }

// notices are what the page an action led to says, at its top.
var notices = map[string]string{
	noticeAccepted:          "You accepted the package: it is yours now. Its next step is marked on the page.",
	noticeReserved:          "The next package is reserved for you: accept it (A) before the reservation runs out.",
	noticeRejected:          "You rejected the package: it went back to the queue, and the desk does not offer it to you again.",
	noticeReturned:          "You returned the package to the bot, with your reason; the bot was told.",
	noticeTransferred:       "You transferred the package, with your note for the next agent.",
	noticeResolved:          "You resolved the package; the bot was told.",
	noticeApprovalRequested: "You asked a supervisor to approve the refund; their decision shows here as soon as they make it.",
	noticeApprovalWithdrawn: "You withdrew the refund approval request.",
	noticeDeclined:          "You declined the ring; the desk rings the next agent.",
	"status_available":      "You are available: warm transfers ring you.",
	"status_break":          "You are on a break: no warm transfer rings you until you are available again.",
	"status_away":           "You are away: no warm transfer rings you until you are available again.",
	noticeReassigned:        "The package was reassigned.",
	noticeApprovalGranted:   "You approved the refund; the agent sees it at once.",
	noticeApprovalDenied:    "You denied the refund; the agent sees your note at once.",
	noticePasswordChanged:   "Your password was changed.",
	noticeLoggedIn:          "You are logged in.",
	noticeLoggedOut:         "You logged out.",

	noticeQueueCreated:      "The queue was created; add its members below.",
	noticeQueueSaved:        "The queue's settings were saved.",
	noticeQueueDisabled:     "The queue is disabled: bots can no longer send packages to it.",
	noticeQueueEnabled:      "The queue is enabled again.",
	noticeSavedReplyAdded:   "The saved reply was added: the queue's agents insert it with / in the reply editor.",
	noticeSavedReplyRemoved: "The saved reply was removed from the queue's list.",
	noticeMemberAdded:       "The member was added to the queue.",
	noticeMemberRemoved:     "The member was removed from the queue.",
	noticeUserCreated:       "The user was created: they log in with the first password you gave them, and can change it at /password.",
	noticeUserSaved:         "The user's profile, role and queues were saved.",
	noticeUserDisabled:      "The user is disabled: they can no longer log in.",
	noticeUserEnabled:       "The user is enabled: they can log in again.",
	"sso_only_on":           "Password login is off for the user: they sign in with single sign-on.",
	"sso_only_off":          "Password login is on again for the user.",
	noticeKeySaved:          "The key's queues and webhook URL were saved.",
	noticeKeyRevoked:        "The key is revoked: the bot's next request with it is refused.",
	noticeRedelivered:       "The delivery was queued to be sent again.",
	noticeSettingsSaved:     "The single sign-on settings were saved.",
}

// packageNotices say a notice on a package's page beside what the action changed, rather than at
// its top.
var packageNotices = map[string]func(*views.HandoffView){
	noticeReplySent: func(v *views.HandoffView) {
		if v.Editor != nil {
			v.Editor.Notice = "Your reply is in the conversation, on its way to the bot: beside it, whether the bot took it."
		}
	},
	noticeNoteAdded: func(v *views.HandoffView) {
		v.Timeline.Notice = "Your note was added to the timeline. Only the desk sees it."
	},
}

// noticeMaxAge covers the redirect and a slow page load, not a later visit.
const noticeMaxAge = 60

// confirm has the action's page say the notice code names once its handler answered with a
// redirect: the answer of an action done. A refusal answers with a page (or an error) and says
// nothing of the kind.
func (s *Server) confirm(code string) echo.MiddlewareFunc {
	return s.confirmBy(func(echo.Context) string { return code })
}

// confirmBy is confirm with a notice that depends on the request (which status was chosen).
func (s *Server) confirmBy(code func(echo.Context) string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			c.Response().Before(func() {
				if c.Response().Status == http.StatusSeeOther {
					s.notify(c, code(c))
				}
			})
			return next(c)
		}
	}
}

// notify sets the notice the next page says. A script's request (the ring's decline, sent without
// leaving the page) leads to no page, and its script says what happened itself.
func (s *Server) notify(c echo.Context, code string) {
	if _, ok := notices[code]; !ok && packageNotices[code] == nil {
		return
	}
	if mode := c.Request().Header.Get("Sec-Fetch-Mode"); mode != "" && mode != "navigate" {
		return
	}
	ck := s.sessionCookieFor(code) //nolint:gosec // G124: the session cookie's flags, from sessionCookieFor.
	ck.Name, ck.MaxAge = noticeCookie, noticeMaxAge
	c.SetCookie(ck)
}

// noticeKey is where loadNotice leaves the code of the notice the request brought.
const noticeKey = "notice"

// loadNotice takes the notice a page load brings, if any, for the page to say: the cookie goes
// with this answer, so the notice shows once. Only a page takes it, not the page's styles, scripts
// or socket, nor a bot.
func (s *Server) loadNotice(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method != http.MethodGet || isAPI(r) || strings.HasPrefix(r.URL.Path, "/static/") || r.URL.Path == "/ws" {
			return next(c)
		}
		ck, err := c.Cookie(noticeCookie)
		if err != nil {
			return next(c)
		}
		gone := s.sessionCookieFor("") //nolint:gosec // G124: clears the cookie notify set, with its flags.
		gone.Name, gone.MaxAge = noticeCookie, -1
		c.SetCookie(gone)
		c.Set(noticeKey, ck.Value)
		return next(c)
	}
}

// pageNotice is the text of the notice the request brought for the top of its page, "" when it
// brought none or one a package's page says in its place.
func pageNotice(c echo.Context) string {
	code, _ := c.Get(noticeKey).(string)
	return notices[code]
}

// noticed puts the notice the request brought beside what it is about on the package's view.
func (s *Server) noticed(c echo.Context) func(*views.HandoffView) {
	code, _ := c.Get(noticeKey).(string)
	if show, ok := packageNotices[code]; ok {
		return show
	}
	return func(*views.HandoffView) {}
}
