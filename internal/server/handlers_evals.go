package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/evals"
)

// handleEvalsExport streams the eval records the query selects as JSON lines, masked for the
// exporting user's role (or redacted, with redact=true).
func (s *Server) handleEvalsExport(c echo.Context) error {
	f, err := evals.ParseFilter(c.QueryParams())
	if err != nil {
		return err
	}
	w := &startOnWrite{c: c}
	n, err := evals.Export(c.Request().Context(), s.db, currentUser(c).Role, f, w)
	if err != nil && !w.started {
		return err
	}
	if err != nil {
		// The 200 and some lines are gone: a clean end would pass the cut export for a whole one.
		// A client that left is no failure of the desk's.
		switch ctx := c.Request().Context(); {
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			s.logger.Warn("export cut at REQUEST_TIMEOUT: export by since/until or with web evals export", "lines", n)
		case ctx.Err() == nil:
			s.logger.Error("export cut short", "lines", n, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	if !w.started {
		w.start()
	}
	return nil
}

// startOnWrite sends the export's headers with its first line, so that an error found before
// any line (a queue that does not exist) can still be answered with its own status.
type startOnWrite struct {
	c       echo.Context
	started bool
}

func (w *startOnWrite) start() {
	w.started = true
	h := w.c.Response().Header()
	h.Set(echo.HeaderContentType, "application/x-ndjson; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.c.Response().WriteHeader(http.StatusOK)
}

func (w *startOnWrite) Write(p []byte) (int, error) {
	if !w.started {
		w.start()
	}
	return w.c.Response().Write(p)
}
