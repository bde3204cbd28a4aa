package server

import (
	"errors"
	"net/http"
	"strings"

	"github.com/a-h/templ"
	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/desk"
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

// apiError is the JSON body of every error the API answers.
type apiError struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// handleError turns any error a handler returns into a response. Only internal errors are
// logged, and their text never reaches the client.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	status, code, message := http.StatusInternalServerError, desk.Internal, desk.ErrorMessage(err)
	var he *echo.HTTPError
	if errors.As(err, &he) {
		status = he.Code
		code = strings.ToLower(strings.ReplaceAll(http.StatusText(status), " ", "_"))
		if m, ok := he.Message.(string); ok {
			message = m
		}
	} else {
		code = desk.ErrorCode(err)
		status = statusOf[code]
	}
	if status >= 500 {
		s.logger.Error("request failed", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	if wantsJSON(c) {
		err = c.JSON(status, apiError{Error: message, Code: code})
	} else {
		err = s.render(c, status, views.ErrorPage(views.ErrorView{Viewer: viewer(c), Status: status, Title: titleFor(status), Message: message}))
	}
	if err != nil {
		s.logger.Error("writing error response", "err", err)
	}
}

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

// render is the one place where echo meets templ.
func (s *Server) render(c echo.Context, status int, component templ.Component) error {
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(status)
	return component.Render(c.Request().Context(), c.Response())
}
