package live

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/events"
)

// Presence timing: rows are refreshed every heartbeat and count as online while younger than
// Stale, so an instance that dies without cleaning up stops counting within Stale.
const (
	heartbeat     = 10 * time.Second
	Stale         = 30 * time.Second
	flushCoalesce = 200 * time.Millisecond
)

// Presence tracks who has the desk open on this instance (online while a socket is open, away
// when every open socket says so) and keeps the presence table current for every instance.
type Presence struct {
	db       *pgxpool.Pool
	logger   *slog.Logger
	instance string

	mu      sync.Mutex
	users   map[int64]*sockets
	dirty   chan struct{}
	changed func()
	gone    func(ctx context.Context, userIDs []int64)
}

// WhenGone has gone called, after each write, with the users whose last socket on this instance
// closed: a warm package ringing for one of them rings someone else at once. Call it before Run.
func (p *Presence) WhenGone(gone func(ctx context.Context, userIDs []int64)) { p.gone = gone }

type sockets struct {
	open, away int
}

// NewPresence returns a Presence for this instance; Run keeps the table current and calls
// changed after writing a presence event.
func NewPresence(db *pgxpool.Pool, logger *slog.Logger, changed func()) *Presence {
	return &Presence{db: db, logger: logger, instance: rand.Text(), users: map[int64]*sockets{},
		dirty: make(chan struct{}, 1), changed: changed}
}

func (p *Presence) change(userID int64, f func(*sockets)) {
	p.mu.Lock()
	s := p.users[userID]
	if s == nil {
		s = &sockets{}
		p.users[userID] = s
	}
	f(s)
	p.mu.Unlock()
	select {
	case p.dirty <- struct{}{}:
	default:
	}
}

// Connect counts a new socket of the user.
func (p *Presence) Connect(userID int64) { p.change(userID, func(s *sockets) { s.open++ }) }

// Disconnect counts a closed socket; the user goes offline here with their last one.
func (p *Presence) Disconnect(userID int64) {
	p.change(userID, func(s *sockets) {
		s.open--
		s.away = min(s.away, s.open)
	})
}

// SetAway records a socket's tab going idle or coming back.
func (p *Presence) SetAway(userID int64, away bool) {
	p.change(userID, func(s *sockets) {
		if away {
			s.away = min(s.away+1, s.open)
		} else {
			s.away = max(s.away-1, 0)
		}
	})
}

// Run writes presence on every change (coalesced) and every heartbeat, and removes this
// instance's rows when ctx is done.
func (p *Presence) Run(ctx context.Context) {
	ticker := time.NewTicker(heartbeat)
	defer ticker.Stop()
	for {
		announce := false
		select {
		case <-ctx.Done():
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = p.db.Exec(cleanup, `DELETE FROM presence WHERE instance_id = $1`, p.instance)
			cancel()
			return
		case <-p.dirty:
			time.Sleep(flushCoalesce)
			announce = true
		case <-ticker.C:
		}
		if err := p.flush(ctx, announce); err != nil && ctx.Err() == nil {
			p.logger.Warn("writing presence", "err", err)
		}
	}
}

// flush writes this instance's presence rows; announce also writes a presence event, so that
// every instance's hub refreshes the supervisors' rosters.
func (p *Presence) flush(ctx context.Context, announce bool) error {
	p.mu.Lock()
	var online, away, gone []int64
	var counts []int32
	for id, s := range p.users {
		if s.open <= 0 {
			gone = append(gone, id)
			delete(p.users, id)
			continue
		}
		online = append(online, id)
		counts = append(counts, int32(s.open)) //nolint:gosec // G115: one user's open sockets on this instance, bounded by its file descriptors.
		if s.away >= s.open {
			away = append(away, id)
		}
	}
	p.mu.Unlock()
	_, err := p.db.Exec(ctx, `
		WITH gone AS (DELETE FROM presence WHERE instance_id = $1 AND user_id = ANY($2))
		INSERT INTO presence (instance_id, user_id, sockets, away, seen_at)
		SELECT $1, u, c, coalesce(u = ANY($5::bigint[]), false), now() FROM unnest($3::bigint[], $4::int[]) AS t(u, c)
		ON CONFLICT (instance_id, user_id) DO UPDATE SET sockets = excluded.sockets, away = excluded.away, seen_at = now()`,
		p.instance, gone, online, counts, away)
	if err == nil && len(gone) > 0 && p.gone != nil {
		p.gone(ctx, gone)
	}
	if err != nil || !announce {
		return err
	}
	b := &pgx.Batch{}
	if err := events.Queue(b, events.Change{Kind: events.Presence, At: time.Now()}); err != nil {
		return err
	}
	err = p.db.SendBatch(ctx, b).Close()
	if err == nil {
		p.changed()
	}
	return err
}
