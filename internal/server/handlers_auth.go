package server

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"unicode"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/views"
)

// The login page may be framed where the sidebar may: an agent logs in inside the CRM.
func (s *Server) handleLoginForm(c echo.Context) error {
	s.allowFraming(c)
	if viewer(c) != nil {
		return c.Redirect(http.StatusSeeOther, safeNext(c.QueryParam("next")))
	}
	return s.render(c, http.StatusOK, views.LoginPage(views.LoginView{Next: c.QueryParam("next"), SSO: s.sso != nil}))
}

func (s *Server) handleLogin(c echo.Context) error {
	s.allowFraming(c)
	email, password, next := c.FormValue("email"), c.FormValue("password"), c.FormValue("next")
	remote := c.RealIP()
	user, err := s.auth.Authenticate(c.Request().Context(), email, password, remote)
	if code := desk.ErrorCode(err); code == desk.Unauthorized || code == desk.RateLimited || code == desk.Unavailable || code == desk.Invalid {
		s.logger.Info("login failed", "email", email, "remote", remote, "reason", code)
		var refusal *desk.Error
		if errors.As(err, &refusal) {
			setRetryAfter(c, refusal)
		}
		return s.render(c, statusOf[code], views.LoginPage(views.LoginView{Email: email, Error: desk.ErrorMessage(err), Next: next, SSO: s.sso != nil}))
	}
	if err != nil {
		return err
	}
	if err := s.signIn(c, user, "password"); err != nil {
		return err
	}
	if user.MustChangePassword {
		return c.Redirect(http.StatusSeeOther, "/password")
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
