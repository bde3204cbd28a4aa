package server

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/views"
)

// statusOf maps the desk's error codes to HTTP: the one table that does so.
var statusOf = map[string]int{
	desk.BadRequest:   http.StatusBadRequest,
	desk.Invalid:      http.StatusUnprocessableEntity,
	desk.Unauthorized: http.StatusUnauthorized,
	desk.Forbidden:    http.StatusForbidden,
	desk.NotFound:     http.StatusNotFound,
	desk.Conflict:     http.StatusConflict,
	desk.TooLarge:     http.StatusRequestEntityTooLarge,
	desk.RateLimited:  http.StatusTooManyRequests,
	desk.Internal:     http.StatusInternalServerError,
	desk.Unavailable:  http.StatusServiceUnavailable,
	desk.Unsupported:  http.StatusUnsupportedMediaType,
}

// Reasons of the 503s that say the desk itself cannot answer now, whatever was asked.
const (
	ReasonDatabaseUnavailable = "database_unavailable" // the database cannot be reached, or is shutting down
	ReasonBusy                = "busy"                 // no answer within the deadline, or no free connection in time
	ReasonTooSlow             = "too_slow"             // a search or audit page cut at the reads pool's statement timeout
)

// retryOutage is the Retry-After of those 503s: long enough for a restarting database or a
// drained burst, short enough that a bot keeping its customer waiting tries again soon.
const retryOutage = 5 * time.Second

// statusClientLeft is logged for a request whose client went away before its answer (nginx's
// code for it); nobody receives it.
const statusClientLeft = 499

// unavailable turns an error that says the database cannot answer now (it is down, going away,
// or too busy to answer in time) into a desk error the client can retry on. For other errors,
// bugs among them, it returns nil.
func unavailable(err error) *desk.Error {
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		// The request's deadline, or the pool's acquire timeout.
		return &desk.Error{Code: desk.Unavailable, Reason: ReasonBusy, RetryAfter: retryOutage,
			Message: "the desk is too busy to answer in time; try again in a few seconds"}
	case postgres.OutOfReach(err):
		return databaseUnavailable()
	case postgres.StatementTimedOut(err):
		// The same read would be cut again: what helps is a narrower one, not a retry.
		return &desk.Error{Code: desk.Unavailable, Reason: ReasonTooSlow,
			Message: "this read took longer than the desk gives one search or audit page, and was stopped; narrow it (fewer or longer words, a queue, a shorter time span) and try again"}
	}
	return nil
}

func databaseUnavailable() *desk.Error {
	return &desk.Error{Code: desk.Unavailable, Reason: ReasonDatabaseUnavailable, RetryAfter: retryOutage,
		Message: "the desk cannot reach its database just now; try again in a few seconds"}
}

var titleOf = map[int]string{
	http.StatusBadRequest:          "Bad request",
	http.StatusUnauthorized:        "Please log in",
	http.StatusForbidden:           "Not allowed",
	http.StatusNotFound:            "Not found",
	http.StatusConflict:            "Conflict",
	http.StatusUnprocessableEntity: "Invalid input",
	http.StatusTooManyRequests:     "Too many requests",
	http.StatusServiceUnavailable:  "Unavailable",
}

// apiError is the JSON body of every error the API answers. Details are written as members of
// the body itself (e.g. "open_handoff_id"), as the OpenAPI description shows them.
type apiError struct {
	Error   string               `json:"error"`
	Code    string               `json:"code"`
	Reason  string               `json:"reason,omitempty"`
	Fields  []handoff.FieldError `json:"fields,omitempty"`
	Details map[string]string    `json:"-"`
}

func (e apiError) MarshalJSON() ([]byte, error) {
	type plain apiError
	body, err := json.Marshal(plain(e))
	if err != nil || len(e.Details) == 0 {
		return body, err
	}
	merged := map[string]any{}
	if err := json.Unmarshal(body, &merged); err != nil {
		return nil, err
	}
	for k, v := range e.Details {
		if _, taken := merged[k]; !taken {
			merged[k] = v
		}
	}
	return json.Marshal(merged)
}

// handleError turns any error a handler returns into a response. Internal errors are logged as
// errors, and their text never reaches the client; an outage is logged as a warning and answered
// 503, and a client that left is answered nothing.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	if errors.Is(err, context.Canceled) && c.Request().Context().Err() != nil {
		// Whatever the request was doing stopped because its client went away; logRequests says so.
		c.Response().WriteHeader(statusClientLeft)
		return
	}
	status, body, retry := apiAnswer(err)
	outage := unavailable(err)
	if retry > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(retrySeconds(retry)))
	}
	message := body.Error
	switch {
	case outage != nil:
		s.logger.Warn("unavailable", "method", c.Request().Method, "path", c.Request().URL.Path, "reason", outage.Reason, "err", err)
	case status >= 500 && status != http.StatusServiceUnavailable:
		s.logger.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	switch {
	case wantsJSON(c):
		err = c.JSON(status, body)
	case framed(c):
		// Inside a CRM's frame: a page the frame may show, with a way back that stays in it.
		s.allowFraming(c)
		err = s.render(c, status, views.FramedErrorPage(views.ErrorView{Viewer: viewer(c), Status: status, Title: titleFor(status), Message: message}))
	default:
		err = s.render(c, status, views.ErrorPage(views.ErrorView{Viewer: viewer(c), Status: status, Title: titleFor(status), Message: message}))
	}
	if err != nil {
		s.logger.Error("writing error response", "err", err)
	}
}

// apiAnswer is the one mapping of an error to what a client of the bot API reads: the status, the
// JSON body and when to try again (0: not said). REST answers it as it is; MCP gives the body as a
// refused tool call's structured content.
func apiAnswer(err error) (status int, body apiError, retryAfter time.Duration) {
	if outage := unavailable(err); outage != nil {
		err = outage
	}
	body = apiError{Code: errorCode(err), Error: desk.ErrorMessage(err)}
	var he *echo.HTTPError
	var de *desk.Error
	var syntax *handoff.SyntaxError
	var invalid *handoff.ValidationError
	switch {
	case errors.As(err, &he):
		body.Code = strings.ToLower(strings.ReplaceAll(http.StatusText(he.Code), " ", "_"))
		if m, ok := he.Message.(string); ok {
			body.Error = m
		}
		return he.Code, body, 0
	case errors.As(err, &syntax):
		body.Error = syntax.Error() // it says what is malformed, and where
	case errors.As(err, &invalid):
		body.Fields = invalid.Fields
		body.Error = fmt.Sprintf("the %s is invalid: %d field(s) break the rules, listed in fields", cmp.Or(invalid.Subject, "package"), len(invalid.Fields))
	case errors.As(err, &de):
		body.Reason, body.Details, retryAfter = de.Reason, de.Details, de.RetryAfter
	}
	return statusOf[body.Code], body, retryAfter
}

// errorCode is the desk's code for err, as its answer gives it: a package that is not JSON is a
// bad request, and one that breaks the package's rules is invalid.
func errorCode(err error) string {
	switch {
	case errors.As(err, new(*handoff.SyntaxError)):
		return desk.BadRequest
	case errors.As(err, new(*handoff.ValidationError)):
		return desk.Invalid
	}
	return desk.ErrorCode(err)
}

// setRetryAfter tells a refused client, in whole seconds rounded up, when to try again.
func setRetryAfter(c echo.Context, e *desk.Error) {
	if e.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(retrySeconds(e.RetryAfter)))
	}
}

// retrySeconds is a Retry-After in whole seconds, rounded up.
func retrySeconds(d time.Duration) int { return int(math.Ceil(d.Seconds())) }

func titleFor(status int) string {
	if t, ok := titleOf[status]; ok {
		return t
	}
	return "Something went wrong"
}

func wantsJSON(c echo.Context) bool {
	r := c.Request()
	return strings.HasPrefix(r.URL.Path, "/api/") || strings.Contains(r.Header.Get("Accept"), "application/json")
}

// render is the one place where echo meets templ. A page rendered in answer to a form's POST
// names the page it shows (answersAt), which takes the form's place in the address bar.
func (s *Server) render(c echo.Context, status int, component templ.Component) error {
	ctx := c.Request().Context()
	if method := c.Request().Method; method != http.MethodGet && method != http.MethodHead {
		if address, ok := c.Get(addressKey).(string); ok {
			ctx = views.WithAddress(ctx, address)
		}
	}
	buf := pages.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledPage {
			buf.Reset()
			pages.Put(buf)
		}
	}()
	// Rendered whole before it is sent: written through, a queue page of 50 cards went out in a
	// write (a system call) per few KB, a fifth of its rendering's CPU; and a page that fails half
	// way is answered with the error's page rather than half a page.
	if err := component.Render(ctx, buf); err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	h.Set(echo.HeaderContentLength, strconv.Itoa(buf.Len()))
	c.Response().WriteHeader(status)
	_, err := c.Response().Write(buf.Bytes())
	return err
}

// pages are the buffers pages are rendered into; one grown by a rare huge page is left to the
// collector rather than kept.
var pages = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledPage = 1 << 20

// addressKey is where answersAt leaves the address of the page a form's answer shows.
const addressKey = "address"

// answersAt says that the page about to be rendered stands at address, a page a GET loads: when
// it answers a form's POST (a refusal shown with the form as it was sent, a confirmation step, a
// secret shown once), the browser shows that address instead of the form's, and a reload loads
// the page instead of sending the form again. Every POST from a form either redirects or renders
// a page that says where it stands; answering a GET, the page is where it stands already.
func answersAt(c echo.Context, address string) { c.Set(addressKey, address) }
