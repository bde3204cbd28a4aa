package server

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/sso"
	"github.com/handoffdesk/desk/views"
)

// handleLoginForm is the login page. Inside a CRM's frame it offers a popup instead of the form
// (views.PopupSignInPage), and in that popup (popup=1) the form signs in for the frame. A person
// already logged in goes on to next; in the popup, their sign-in is handed to the frame at once.
func (s *Server) handleLoginForm(c echo.Context) error {
	next, popup := c.QueryParam("next"), c.QueryParam("popup") == "1"
	if framed(c) {
		s.allowFraming(c)
		return s.render(c, http.StatusOK, views.PopupSignInPage(views.PopupSignInView{Next: safeNext(next), SSO: s.sso != nil}))
	}
	if popup {
		keepOpener(c)
	}
	if viewer(c) != nil {
		if popup && !currentUser(c).MustChangePassword {
			return s.handToFrame(c, currentUser(c), next)
		}
		return c.Redirect(http.StatusSeeOther, safeNext(next))
	}
	return s.render(c, http.StatusOK, views.LoginPage(views.LoginView{Next: next, SSO: s.sso != nil, Popup: popup, Notice: pageNotice(c)}))
}

// handleLogin checks the form's email and password. A refusal shows the form again, at the login
// page's address; a sign-in made in the popup a frame opened (popup=1) is handed to the frame,
// not kept here.
func (s *Server) handleLogin(c echo.Context) error {
	email, password, next, popup := c.FormValue("email"), c.FormValue("password"), c.FormValue("next"), c.FormValue("popup") == "1"
	if popup {
		keepOpener(c)
	}
	remote := c.RealIP()
	user, err := s.auth.Authenticate(c.Request().Context(), email, password, remote)
	if code := desk.ErrorCode(err); code == desk.Unauthorized || code == desk.RateLimited || code == desk.Unavailable || code == desk.Invalid {
		s.logger.Info("login failed", "email", email, "remote", remote, "reason", code)
		var refusal *desk.Error
		if errors.As(err, &refusal) {
			setRetryAfter(c, refusal)
		}
		answersAt(c, loginPage(next, popup))
		return s.render(c, statusOf[code], views.LoginPage(views.LoginView{Email: email, Error: desk.ErrorMessage(err), Next: next, SSO: s.sso != nil, Popup: popup}))
	}
	if err != nil {
		return err
	}
	if popup && !user.MustChangePassword {
		return s.handToFrame(c, user, next)
	}
	// A temporary password opens only the page that replaces it; from a popup, the person comes
	// back to the frame's "Sign in" once it is replaced.
	if err := s.signIn(c, user, "password"); err != nil {
		return err
	}
	if user.MustChangePassword {
		return c.Redirect(http.StatusSeeOther, "/password")
	}
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

// loginPage is the address of the login page for next, in the popup or not.
func loginPage(next string, popup bool) string {
	q := url.Values{}
	if next != "" {
		q.Set("next", next)
	}
	if popup {
		q.Set("popup", "1")
	}
	if len(q) == 0 {
		return "/login"
	}
	return "/login?" + q.Encode()
}

// ticketCookie carries a popup's ticket across the redirect from the login form to the page that
// hands it to the frame (handleLoginPopup), for a minute at most and to that page alone.
const ticketCookie = "desk_ticket"

// handToFrame ends a sign-in in the popup a CRM's frame opened: the user's one-time ticket goes to
// the popup's last page, which posts it to the frame; the frame trades it for a session of its own
// (handleLoginComplete), as its cookies are kept apart from the popup's.
func (s *Server) handToFrame(c echo.Context, user auth.User, next string) error {
	ticket, err := sso.IssueTicket(c.Request().Context(), s.db, user.ID, safeNext(next), c.RealIP(), time.Now())
	if err != nil {
		return err
	}
	s.logger.Info("login", "user_id", user.ID, "role", user.Role, "method", "password", "for", "frame")
	c.SetCookie(&http.Cookie{Name: ticketCookie, Value: ticket, Path: "/login/popup", MaxAge: 60, //nolint:gosec // G124: HttpOnly, Lax, and Secure wherever a browser keeps it, as the session's.
		HttpOnly: true, Secure: s.secureCookies, SameSite: http.SameSiteLaxMode})
	return c.Redirect(http.StatusSeeOther, "/login/popup")
}

// handleLoginPopup is the popup's last page: it hands the ticket the sign-in left to the frame that
// opened the popup, and closes (static/js/signin.js). Without a ticket, the popup starts again.
func (s *Server) handleLoginPopup(c echo.Context) error {
	keepOpener(c)
	ck, err := c.Cookie(ticketCookie)
	if err != nil || ck.Value == "" {
		return c.Redirect(http.StatusSeeOther, "/login?popup=1")
	}
	c.SetCookie(&http.Cookie{Name: ticketCookie, Path: "/login/popup", MaxAge: -1, HttpOnly: true, Secure: s.secureCookies, SameSite: http.SameSiteLaxMode}) //nolint:gosec // G124: clears the cookie above, with its flags.
	return s.render(c, http.StatusOK, views.SignedInPopupPage(views.SignedInPopupView{Ticket: ck.Value}))
}

// handleLoginComplete trades a popup's ticket, from a password or single sign-on, for a session in
// the window that posts it: the frame that opened the popup, or the popup itself when it has no
// opener. The frame may show the answer.
func (s *Server) handleLoginComplete(c echo.Context) error {
	s.allowFraming(c)
	user, next, err := sso.Redeem(c.Request().Context(), s.db, s.auth, c.FormValue("ticket"), time.Now())
	if err != nil {
		return err
	}
	if err := s.signIn(c, user, "ticket"); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(next))
}

func (s *Server) handleLogout(c echo.Context) error {
	if cookie, err := c.Cookie(sessionCookie); err == nil {
		if err := s.access.SignOut(c.Request().Context(), cookie.Value); err != nil {
			return err
		}
	}
	s.clearSessionCookie(c)
	return c.Redirect(http.StatusSeeOther, "/login")
}

// safeNext keeps the post-login redirect on this site. Browsers drop tabs and newlines from a URL
// and read a backslash as a slash, so "/\t/evil.example" and "/\evil.example" leave the site as
// "//evil.example" does. Only printable ASCII without a backslash passes (a next the desk wrote
// itself is percent-encoded), it must parse as a path with no scheme or host, and it is written out
// again from the parse. Its decoded, dot-resolved path may not start with "//" or hold a backslash
// or control character either: no desk page does, and a later hop that decodes or cleans it
// ("/%2F%2Fevil.example", "/.//evil.example") could turn it into another site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.ContainsFunc(next, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '\\' }) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Opaque != "" || u.User != nil || u.Host != "" {
		return "/"
	}
	u = siteRoot.ResolveReference(u)
	if !strings.HasPrefix(u.Path, "/") || strings.HasPrefix(u.Path, "//") ||
		strings.ContainsFunc(u.Path, func(r rune) bool { return r == '\\' || unicode.IsControl(r) }) {
		return "/"
	}
	return (&url.URL{Path: u.Path, RawPath: u.RawPath, RawQuery: u.RawQuery}).String()
}

// siteRoot stands for this site when next's dot segments are resolved; only the path is kept.
var siteRoot = &url.URL{Scheme: "https", Host: "desk.invalid", Path: "/"}
