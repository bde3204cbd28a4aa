package server

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/views"
)

// ssoCookie binds a sign-in to the browser that started it: the callback must bring it back. Lax,
// so that it comes back on the provider's redirect, a top-level navigation.
const ssoCookie = "desk_sso"

// handleSSOStart sends the browser to the identity provider. A sign-in for the sidebar runs in a
// popup (popup=1), whose pages must keep their tie to the sidebar that opened it: the opener
// policy of the desk's other pages would cut it.
func (s *Server) handleSSOStart(c echo.Context) error {
	if s.sso == nil {
		return desk.Errorf(desk.NotFound, "single sign-on is not configured (OIDC_ISSUER)")
	}
	popup := c.QueryParam("popup") == "1"
	if popup {
		keepOpener(c)
	}
	started, err := s.sso.Start(c.Request().Context(), safeNext(c.QueryParam("next")), popup, c.RealIP())
	if err != nil {
		return s.ssoRefused(c, err)
	}
	c.SetCookie(&http.Cookie{Name: ssoCookie, Value: started.Browser, Path: "/sso/", MaxAge: 600, //nolint:gosec // G124: HttpOnly, Lax, and Secure wherever a browser keeps it, as the session's.
		HttpOnly: true, Secure: s.secureCookies, SameSite: http.SameSiteLaxMode})
	return c.Redirect(http.StatusSeeOther, started.URL)
}

// handleSSOCallback finishes a sign-in the provider sent back. A refusal is shown on the login
// page, saying why; a sign-in for the sidebar ends on the popup's page with its ticket.
func (s *Server) handleSSOCallback(c echo.Context) error {
	if s.sso == nil {
		return desk.Errorf(desk.NotFound, "single sign-on is not configured (OIDC_ISSUER)")
	}
	keepOpener(c)
	c.SetCookie(&http.Cookie{Name: ssoCookie, Path: "/sso/", MaxAge: -1, HttpOnly: true, Secure: s.secureCookies, SameSite: http.SameSiteLaxMode}) //nolint:gosec // G124: clears the cookie above, with its flags.
	if reason := c.QueryParam("error"); reason != "" {
		return s.ssoRefused(c, desk.Errorf(desk.Unauthorized, "the identity provider refused the sign-in: %s %s", reason, c.QueryParam("error_description")))
	}
	var browser string
	if ck, err := c.Cookie(ssoCookie); err == nil {
		browser = ck.Value
	}
	done, err := s.sso.Finish(c.Request().Context(), browser, c.QueryParam("state"), c.QueryParam("code"))
	if err != nil {
		return s.ssoRefused(c, err)
	}
	if done.Popup {
		return s.render(c, http.StatusOK, views.SignedInPopupPage(views.SignedInPopupView{Ticket: done.Ticket}))
	}
	if err := s.signIn(c, done.User, "sso"); err != nil {
		return err
	}
	return c.Redirect(http.StatusSeeOther, safeNext(done.Next))
}

// ssoRefused shows a refusal of single sign-on on the login page, with its status.
func (s *Server) ssoRefused(c echo.Context, err error) error {
	var refusal *desk.Error
	if !errors.As(err, &refusal) || refusal.Code == desk.Internal {
		return err
	}
	s.logger.Info("sso refused", "reason", refusal.Message)
	setRetryAfter(c, refusal)
	return s.render(c, statusOf[refusal.Code], views.LoginPage(views.LoginView{Error: desk.ErrorMessage(err), SSO: true, Popup: c.QueryParam("popup") == "1"}))
}

// signIn starts a session for the user in this browser, ending the one it had.
func (s *Server) signIn(c echo.Context, user auth.User, method string) error {
	if old, err := c.Cookie(sessionCookie); err == nil {
		if err := s.access.SignOut(c.Request().Context(), old.Value); err != nil {
			return err
		}
	}
	sess, err := s.auth.StartSession(c.Request().Context(), user.ID)
	if err != nil {
		return err
	}
	s.setSessionCookie(c, sess)
	s.logger.Info("login", "user_id", user.ID, "role", user.Role, "method", method)
	return nil
}

// keepOpener lets the popup's pages keep their tie to the window that opened them, which the
// desk's opener policy would cut: the popup hands its ticket back through it.
func keepOpener(c echo.Context) {
	c.Response().Header().Set("Cross-Origin-Opener-Policy", "unsafe-none")
}
