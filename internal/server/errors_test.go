package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/puddle/v2"
	"github.com/labstack/echo/v4"
)

// R2: what says the database is out of reach, going away or too busy is answered 503 with a
// Retry-After, so clients come back; anything else that is not the desk's own error is a bug,
// answered 500.
func TestOutagesAre503AndBugs500(t *testing.T) {
	t.Parallel()
	s := &Server{logger: slog.New(slog.DiscardHandler)}
	cases := []struct {
		name   string
		err    error
		status int
	}{
		{"connection failure", &pgconn.PgError{Code: "08006"}, http.StatusServiceUnavailable},
		{"connection does not exist", fmt.Errorf("query: %w", &pgconn.PgError{Code: "08003"}), http.StatusServiceUnavailable},
		{"admin shutdown", &pgconn.PgError{Code: "57P01"}, http.StatusServiceUnavailable},
		{"crash shutdown", &pgconn.PgError{Code: "57P02"}, http.StatusServiceUnavailable},
		{"cannot connect now", &pgconn.PgError{Code: "57P03"}, http.StatusServiceUnavailable},
		{"too many connections", &pgconn.PgError{Code: "53300"}, http.StatusServiceUnavailable},
		{"connection closed", pgconn.ErrConnClosed, http.StatusServiceUnavailable},
		{"closed pool", puddle.ErrClosedPool, http.StatusServiceUnavailable},
		{"acquire timeout", fmt.Errorf("acquire: %w", context.DeadlineExceeded), http.StatusServiceUnavailable},
		{"unique violation", &pgconn.PgError{Code: "23505"}, http.StatusInternalServerError},
		{"undefined column", &pgconn.PgError{Code: "42703"}, http.StatusInternalServerError},
		{"a bug", errors.New("assignment to entry in nil map"), http.StatusInternalServerError},
	}
	for _, c := range cases {
		e := echo.New()
		e.HTTPErrorHandler = s.handleError
		e.GET("/api/v1/x", func(echo.Context) error { return c.err })
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/api/v1/x", nil))
		retryAfter := rec.Header().Get("Retry-After")
		if rec.Code != c.status || (c.status == http.StatusServiceUnavailable) != (retryAfter != "") {
			t.Errorf("%s: %d with Retry-After %q, want %d with a Retry-After only on 503", c.name, rec.Code, retryAfter, c.status)
		}
	}
}
