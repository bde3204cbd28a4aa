package server

import (
	"fmt"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/auth"
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
	// refusalPause is how long a refusal waits before it is sent. A script that sent a refused
	// search again at once, on 16 connections, made thousands of refusals a second, each a
	// session look-up and a response: another agent's queue page went from 3 to 41 ms (p50, two
	// cores; make bench-desk BENCH_FLAGS="-scenarios 6"). A refusal that takes half a second
	// bounds that to 32 a second, for the price of a waiting goroutine.
	refusalPause = 500 * time.Millisecond
)

// costlyReads counts each person's costly reads in flight on this instance.
type costlyReads struct {
	mu       sync.Mutex
	inFlight map[int64]int
}

// costlyRoutes are the routes of those reads, each with what the refusal calls it.
var costlyRoutes = map[string]string{
	"/packages":            "search",
	"/packages/export.csv": "export",
	"/audit":               "audit page",
	"/audit/export.csv":    "export",
	"/audit/export.jsonl":  "export",
	"/evals/export.jsonl":  "export",
}

// capCostly lets a person's request for a costly route through while they have fewer than
// maxCostlyReads of them in flight, and refuses it otherwise with 429, a Retry-After and what is
// running: the person's own to wait for. It runs right after the session is loaded, before the
// pages' other look-ups (the ring, what the person holds), so that a refusal costs the desk one
// query however fast a script sends them. A request without a session goes on to be refused by
// its route's role check.
func (s *Server) capCostly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		what, costly := costlyRoutes[c.Path()]
		user, signedIn := c.Get(userKey).(auth.User)
		if !costly || !signedIn {
			return next(c)
		}
		if !s.costly.take(user.ID) {
			pause := time.NewTimer(refusalPause)
			select {
			case <-pause.C:
			case <-c.Request().Context().Done():
				pause.Stop()
			}
			return &desk.Error{Code: desk.RateLimited, Reason: "too_many_reads", RetryAfter: retryCostly,
				Message: fmt.Sprintf("this %s was not started: you have %d searches, audit pages or exports running already, "+
					"the most one person may run at once; try again when one has finished", what, maxCostlyReads)}
		}
		defer s.costly.give(user.ID)
		return next(c)
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
