package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/desk"
)

// The reads whose cost a person's words decide: a search and its drill-down counts, the audit,
// and the exports. One person's flood of them must not slow everyone's desk, so each person may
// have a few in flight on an instance at once (what they hold, connections and CPU, is the
// instance's and its database's), and a search or an audit page runs on the reads pool, whose
// statements the database cuts after a quarter of REQUEST_TIMEOUT (postgres.Reads).
const (
	// maxCostlyReads is how many of those reads one person may have in flight on an instance: a
	// search page and an export in another tab, not sixteen searches.
	maxCostlyReads = 2
	// retryCostly is the Retry-After of a refused one: a search ends in well under a second as
	// a rule.
	retryCostly = 2 * time.Second
)

// costlyReads counts each person's costly reads in flight on this instance.
type costlyReads struct {
	mu       sync.Mutex
	inFlight map[int64]int
}

// capCostly lets a person's request through while they have fewer than maxCostlyReads costly
// reads in flight, and refuses it otherwise with 429, a Retry-After and what is running: what is
// the person's own to wait for. what names the read, e.g. "search".
func (s *Server) capCostly(what string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			userID := currentUser(c).ID
			if !s.costly.take(userID) {
				return &desk.Error{Code: desk.RateLimited, Reason: "too_many_reads", RetryAfter: retryCostly,
					Message: fmt.Sprintf("this %s was not started: you have %d searches, audit pages or exports running already, "+
						"the most one person may run at once; try again when one has finished", what, maxCostlyReads)}
			}
			defer s.costly.give(userID)
			return next(c)
		}
	}
}

func (r *costlyReads) take(userID int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight[userID] >= maxCostlyReads {
		return false
	}
	if r.inFlight == nil {
		r.inFlight = map[int64]int{}
	}
	r.inFlight[userID]++
	return true
}

func (r *costlyReads) give(userID int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.inFlight[userID]--; r.inFlight[userID] <= 0 {
		delete(r.inFlight, userID)
	}
}
