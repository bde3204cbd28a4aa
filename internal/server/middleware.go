package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/metrics"
	"github.com/handoffdesk/desk/internal/tracing"
	"github.com/handoffdesk/desk/views"
)

const sessionCookie = "desk_session"

const userKey = "user"

func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = fmt.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		return next(c)
	}
}

func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		req := c.Request()
		level := slog.LevelInfo
		if c.Response().Status >= 500 {
			level = slog.LevelWarn
		}
		took := time.Since(start)
		method, route := metrics.Method(req.Method), s.route(c)
		s.metrics.Request(method, route, c.Response().Status, took)
		if route != metrics.Unmatched {
			tracing.Route(req.Context(), method, route)
		}
		s.logger.LogAttrs(req.Context(), level, "request",
			slog.String("method", req.Method), slog.String("path", req.URL.Path),
			slog.Int("status", c.Response().Status), slog.Duration("duration", took))
		return nil
	}
}

// route is the template of the route that took the request, or metrics.Unmatched when none did
// (echo's RouteNotFound routes, or nothing at all): what a client makes up never becomes a label.
func (s *Server) route(c echo.Context) string {
	if route := c.Path(); s.templates[route] {
		return route
	}
	return metrics.Unmatched
}

// permissionsPolicy denies the browser features the desk never uses, so that nothing injected
// into a page, nor a page that frames the sidebar, can ask an agent for them. Autoplay stays
// allowed: urgent packages may sound a tone (desktop notifications are not a policy feature).
const permissionsPolicy = "accelerometer=(), browsing-topics=(), camera=(), clipboard-read=(), display-capture=(), " +
	"geolocation=(), gyroscope=(), hid=(), idle-detection=(), local-fonts=(), magnetometer=(), microphone=(), " +
	"midi=(), payment=(), publickey-credentials-get=(), screen-wake-lock=(), serial=(), usb=(), " +
	"window-management=(), xr-spatial-tracking=()"

// limitTime gives each request the server's deadline, so a request waiting on a busy database
// ends with a 503 the client can retry on, instead of lasting as long as the client waits.
// A websocket is bounded only until its upgrade: the socket then lives on without the request.
func (s *Server) limitTime(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		timeout := s.cfg.RequestTimeout
		if c.Path() == mcpPath {
			timeout += MaxWait // get_messages waits that long for a reply, holding no connection meanwhile
		}
		ctx, cancel := context.WithTimeout(req.Context(), timeout)
		defer cancel()
		c.SetRequest(req.WithContext(ctx))
		err := next(c)
		// An error is answered once this returns, with the deadline's context cancelled: on the
		// request as it came, whose context ends only if the client leaves.
		c.SetRequest(req)
		return err
	}
}

// closeWhileDraining closes each connection after its answer once the server drains: a client
// that keeps its connection alive takes its next request through the load balancer to another
// instance, instead of finding the connection closed under it at shutdown.
func (s *Server) closeWhileDraining(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.draining.Load() {
			c.Response().Header().Set(echo.HeaderConnection, "close")
		}
		return next(c)
	}
}

// hstsFor is the Strict-Transport-Security of a desk served at base: for a year, so that a
// browser that once reached it over https never tries plain http again, not even a first request
// a network could intercept; nothing on http, where browsers ignore it. Preloading also binds
// every subdomain, which only the operator can vouch for, so it is asked for (HSTS_PRELOAD) only.
func hstsFor(base *url.URL, preload bool) string {
	if base.Scheme != "https" {
		return ""
	}
	if preload {
		return "max-age=31536000; includeSubDomains; preload"
	}
	return "max-age=31536000"
}

// securityHeaders sets what every response carries. Pages may not be framed except where a
// handler says otherwise (the CRM sidebar). The opener policy cuts the tie to any window that
// opened the desk or that the desk opens; it applies only to top-level pages, so the sidebar in a
// CRM's iframe is as embeddable as before.
func (s *Server) securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		if s.hsts != "" {
			h.Set("Strict-Transport-Security", s.hsts)
		}
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Permissions-Policy", permissionsPolicy)
		return next(c)
	}
}

// private wraps the role check of the pages behind login: everything they answer is for one user
// and shows packages, contacts or queues, so no browser or proxy cache may keep it for the next
// person at a shared desk or behind the same proxy.
func private(requireRole echo.MiddlewareFunc) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		checked := requireRole(next)
		return func(c echo.Context) error {
			c.Response().Header().Set(echo.HeaderCacheControl, "no-store")
			return checked(c)
		}
	}
}

// checkCrossOrigin is the CSRF defence for every state-changing request from a browser: it refuses
// unsafe methods whose Sec-Fetch-Site or Origin shows another site. Bot API calls carry a bearer
// key, not a cookie, so they cannot be forged by a page and are not checked.
func (s *Server) checkCrossOrigin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if isAPI(c.Request()) {
			return next(c)
		}
		if err := s.csrf.Check(c.Request()); err != nil {
			return desk.Errorf(desk.Forbidden, "cross-site request refused: %v", err)
		}
		return next(c)
	}
}

// isAPI reports whether r is for the bot API, REST or MCP: a bearer key, never a cookie, says
// who sends it, so no other site can send it in a person's name.
func isAPI(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/api/") || r.URL.Path == mcpPath
}

// maxFormBytes caps a form's body. The largest form a desk page sends carries a reply of
// evals.MaxReplyChars characters: at most 40,000 bytes of UTF-8, 120,000 once percent-encoded.
// So no form a page sends is refused, and no one, logged in or not, makes the desk read
// megabytes (Go would read 10 MB of a urlencoded body, and a multipart one whole).
const maxFormBytes = 128 << 10

// checkInput reads the form, if any, up to maxFormBytes, and refuses text that no PostgreSQL
// text column holds (a NUL character, or bytes that are not UTF-8) in the path's parameters,
// the query and the form, before a handler hands it to the database. Bots' JSON is read by
// handoff.Reader, which checks its strings itself.
func (s *Server) checkInput(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		for i, name := range c.ParamNames() {
			if name != "*" { // the rest of a path (a static file's, or one no route took): no database sees it
				if err := checkText("the "+name+" in the path", c.ParamValues()[i]); err != nil {
					return err
				}
			}
		}
		if err := checkValues("query parameter", c.QueryParams()); err != nil {
			return err
		}
		if isAPI(c.Request()) {
			return next(c)
		}
		if err := readForm(c); err != nil {
			return err
		}
		if err := checkValues("form field", c.Request().PostForm); err != nil {
			return err
		}
		return next(c)
	}
}

// readForm parses the request's urlencoded or multipart form, refusing one over maxFormBytes.
func readForm(c echo.Context) error {
	r := c.Request()
	tooLarge := desk.Errorf(desk.TooLarge, "the form is over %d KiB", maxFormBytes>>10)
	if r.ContentLength > maxFormBytes {
		return tooLarge
	}
	r.Body = http.MaxBytesReader(c.Response().Writer, r.Body, maxFormBytes)
	err := r.ParseForm()
	if err == nil {
		// A urlencoded form is read by now; only a multipart one is read here.
		if err = r.ParseMultipartForm(maxFormBytes); errors.Is(err, http.ErrNotMultipart) {
			err = nil
		}
	}
	var over *http.MaxBytesError
	switch {
	case errors.As(err, &over):
		return tooLarge
	case err != nil:
		return desk.Errorf(desk.BadRequest, "the form cannot be read: %v", err)
	}
	return nil
}

// checkValues checks the text of each value, naming its kind and key in the error.
func checkValues(kind string, values url.Values) error {
	for _, key := range slices.Sorted(maps.Keys(values)) {
		for _, v := range values[key] {
			if err := checkText(fmt.Sprintf("%s %q", kind, key), v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkText refuses text that PostgreSQL cannot hold in a text column, naming what holds it.
func checkText(what, s string) error {
	switch {
	case strings.IndexByte(s, 0) >= 0:
		return desk.Errorf(desk.BadRequest, "%s contains a NUL character, which the desk does not store", what)
	case !utf8.ValidString(s):
		return desk.Errorf(desk.BadRequest, "%s is not valid UTF-8", what)
	}
	return nil
}

// loadSession puts the logged-in user, if any, on the request.
func (s *Server) loadSession(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		cookie, err := c.Cookie(sessionCookie)
		if err != nil || cookie.Value == "" || isAPI(c.Request()) {
			return next(c)
		}
		user, err := s.auth.SessionUser(c.Request().Context(), cookie.Value)
		switch desk.ErrorCode(err) {
		case desk.NotFound:
			s.clearSessionCookie(c)
		case desk.Internal:
			if err != nil {
				return err
			}
			c.Set(userKey, user)
		}
		return next(c)
	}
}

// requireRole lets through users whose role is at least min. A browser without a session is sent
// to the login page and brought back afterwards.
func (s *Server) requireRole(min auth.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			user, ok := c.Get(userKey).(auth.User)
			if !ok {
				if c.Request().Method == http.MethodGet && !wantsJSON(c) {
					return c.Redirect(http.StatusSeeOther, "/login?next="+url.QueryEscape(c.Request().URL.RequestURI()))
				}
				return desk.Errorf(desk.Unauthorized, "log in first")
			}
			if user.MustChangePassword && c.Path() != "/password" {
				// A temporary password opens only the page that replaces it.
				if c.Request().Method == http.MethodGet && !wantsJSON(c) {
					return c.Redirect(http.StatusSeeOther, "/password")
				}
				return desk.Errorf(desk.Forbidden, "choose a new password first, at /password")
			}
			if !user.Role.AtLeast(min) {
				return desk.Errorf(desk.Forbidden, "this needs the %s role; you are %s", min, user.Role)
			}
			return next(c)
		}
	}
}

func currentUser(c echo.Context) auth.User {
	user, _ := c.Get(userKey).(auth.User)
	return user
}

// viewer is who a page is rendered for, or nil before login.
func viewer(c echo.Context) *views.Viewer {
	user, ok := c.Get(userKey).(auth.User)
	if !ok {
		return nil
	}
	ring, _ := c.Get(ringKey).(views.RingSlotView)
	availability, _ := c.Get(availabilityKey).(string)
	holding, _ := c.Get(holdingKey).(int)
	unread, _ := c.Get(unreadKey).(int)
	waiting, _ := c.Get(approvalsKey).(int)
	return &views.Viewer{
		Holding:      holding,
		Unread:       unread,
		Approvals:    waiting,
		Name:         user.DisplayName,
		Email:        user.Email,
		Role:         string(user.Role),
		IsSupervisor: user.Role.AtLeast(auth.RoleSupervisor),
		Ring:         ring,
		IsAdmin:      user.Role.AtLeast(auth.RoleAdmin),
		Availability: availability,
		Path:         c.Request().URL.RequestURI(),
		Notice:       pageNotice(c),
	}
}

// sessionCookieFor sets the session cookie's flags. Lax keeps it off cross-site subrequests;
// when a CRM may embed the sidebar, the cookie must travel inside the CRM's iframe, so it becomes
// SameSite=None, Secure and Partitioned (kept apart per embedding site).
func (s *Server) sessionCookieFor(value string) *http.Cookie {
	ck := &http.Cookie{Name: sessionCookie, Value: value, Path: "/", HttpOnly: true, Secure: s.secureCookies, SameSite: http.SameSiteLaxMode}
	if len(s.cfg.FrameAncestors) > 0 {
		ck.SameSite, ck.Secure, ck.Partitioned = http.SameSiteNoneMode, true, true
	}
	return ck
}

func (s *Server) setSessionCookie(c echo.Context, sess auth.Session) {
	ck := s.sessionCookieFor(sess.Token) //nolint:gosec // G124: always HttpOnly and SameSite, Secure wherever a browser keeps it (https, loopback, embedded); see sessionCookieFor.
	ck.Expires = sess.ExpiresAt
	c.SetCookie(ck)
}

func (s *Server) clearSessionCookie(c echo.Context) {
	ck := s.sessionCookieFor("") //nolint:gosec // G124: the same flags as the cookie it clears, from sessionCookieFor.
	ck.MaxAge = -1
	c.SetCookie(ck)
}
