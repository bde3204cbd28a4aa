package actions

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/commit"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/tracing"
)

// hold is what this instance remembers of a package it reserved or accepted for an agent: the
// row and where it is, so that the agent's next action on it goes with its records in one round
// trip, without reading the row first. A hold goes stale when the sweeper takes a reservation
// back, a supervisor steps in or another instance moves the package; the fast update checks
// every field it relies on, so a stale hold costs only the slow path.
type hold struct {
	publicID                 string
	rowID, apiKeyID, queueID int64
	queue                    string
	userID                   int64 // the holder
	createdAt                time.Time
	// trace is the package's stored trace context, which the action's span links to without a
	// query of its own.
	trace *string
}

// to fills in the package's side of c.
func (hd hold) to(c events.Change) events.Change {
	c.HandoffID, c.PublicID, c.QueueID, c.Queue, c.APIKeyID = hd.rowID, hd.publicID, hd.queueID, hd.queue, hd.apiKeyID
	c.PackageTrace = hd.trace
	return c
}

// holdsMax bounds the holds an instance remembers; past it they start over rather than grow.
// Agents hold a few packages each, so it is only reached when holds are left behind (a package
// another instance closed), and forgetting one costs only a slow path.
const holdsMax = 10000

// holds are the packages this instance reserved or accepted for agents, by public id.
type holds struct {
	mu sync.Mutex
	m  map[string]hold
}

// get returns the hold on the package if the user is its holder.
func (hs *holds) get(publicID string, userID int64) (hold, bool) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	hd, ok := hs.m[publicID]
	return hd, ok && hd.userID == userID
}

func (hs *holds) put(hd hold) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	if len(hs.m) >= holdsMax {
		clear(hs.m)
	}
	hs.m[hd.publicID] = hd
}

func (hs *holds) drop(publicID string) {
	hs.mu.Lock()
	defer hs.mu.Unlock()
	delete(hs.m, publicID)
}

// notAsExpected is the SQLSTATE expect_change raises (migrations/00006) when a fast update
// changed no row.
const notAsExpected = "HD001"

// fast makes a change to a package the user holds as hd remembers, in one trip: the update,
// bound to the remembered row, queue and holder and to the user's right to act in that queue,
// travels with the change's records. set and where may use $6 onwards, from args. It reports
// false, with nothing written, when the package is no longer as remembered: the caller then takes
// the slow path, which says why, or succeeds when the change is still allowed.
func (a *Service) fast(ctx context.Context, user auth.User, hd hold, set, where string, args []any, c events.Change, outcomes ...evals.Outcome) (bool, error) {
	tracing.LinkPackage(ctx, hd.trace)
	b := &pgx.Batch{}
	b.Queue(`
		WITH changed AS (
			UPDATE handoffs h SET `+set+`
			WHERE h.id = $1 AND h.queue_id = $2 AND h.assignee_id = $4 AND `+where+`
				AND EXISTS (SELECT 1 FROM queues q WHERE q.id = $2 AND q.name = $3)
				AND ($5 OR EXISTS (SELECT 1 FROM queue_members m WHERE m.queue_id = $2 AND m.user_id = $4))
			RETURNING 1)
		SELECT expect_change(count(*)) FROM changed`,
		append([]any{hd.rowID, hd.queueID, hd.queue, user.ID, user.Role.AtLeast(auth.RoleSupervisor)}, args...)...)
	if err := record(ctx, b, c, outcomes); err != nil {
		return false, err
	}
	err := a.trips.Send(ctx, b, commit.ExecAll(b))
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == notAsExpected {
		a.holds.drop(hd.publicID)
		return false, nil
	}
	if err != nil {
		return false, err
	}
	a.changed()
	return true, nil
}
