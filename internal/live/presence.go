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

// Presence timing: rows are refreshed every heartbeat, for the admin's "last seen" and for
// instances of the version before leases, which count rows younger than 30 s. What makes a row
// count is its instance's lease (the view live_presence): renewed every leaseEvery and good for
// LeaseFor. Once an instance killed without cleaning up has let it lapse, any live instance that
// has held its own lease for LeaseFor deletes the dead one's lease and rows and withdraws its
// agents' rings, within another leaseEvery: LeaseFor + leaseEvery after the death at most.
const (
	heartbeat     = 10 * time.Second
	flushCoalesce = 200 * time.Millisecond
	leaseEvery    = time.Second
	LeaseFor      = 3 * time.Second
	// legacyStale is how long a row without a lease counts (the view live_presence, migration
	// 00026), and after which the reaper deletes it.
	legacyStale = 30 * time.Second
)

// Presence tracks who has the desk open on this instance (online while a socket is open) and
// keeps the presence table current for every instance. Whether they may be rung is theirs to
// choose (Choose), not whether a tab is hidden: an agent working in a CRM with the desk in a
// background tab is rung.
type Presence struct {
	db       *pgxpool.Pool
	logger   *slog.Logger
	instance string

	mu      sync.Mutex
	users   map[int64]*sockets
	views   map[viewKey]int // package pages' sockets, by user and package (viewing.go)
	dirty   chan struct{}
	changed func()
	gone    func(ctx context.Context, userIDs []int64)
	// held is since when this instance has held its lease without a lapse; zero while it has
	// none. Only Run's goroutine touches it.
	held time.Time
}

// WhenGone has gone called, after each write, with the users whose last socket on this instance
// closed, and with the users of other instances whose lease lapsed: a warm package ringing for
// one of them rings someone else at once. Call it before Run.
func (p *Presence) WhenGone(gone func(ctx context.Context, userIDs []int64)) { p.gone = gone }

type sockets struct {
	open int
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
func (p *Presence) Disconnect(userID int64) { p.change(userID, func(s *sockets) { s.open-- }) }

// Run holds this instance's lease and writes presence on every change (coalesced) and every
// heartbeat, and removes this instance's rows and lease when ctx is done. A write that fails is
// tried again at the next lease tick, for as long as it fails: a user whose last socket closed
// during an outage is removed, and their ring withdrawn, once the database answers again.
func (p *Presence) Run(ctx context.Context) {
	beat := time.NewTicker(heartbeat)
	defer beat.Stop()
	lease := time.NewTicker(leaseEvery)
	defer lease.Stop()
	pending := !p.renew(ctx)
	for {
		announce := false
		select {
		case <-ctx.Done():
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			b := &pgx.Batch{}
			b.Queue(`DELETE FROM presence WHERE instance_id = $1`, p.instance)
			b.Queue(`DELETE FROM instances WHERE id = $1`, p.instance)
			_ = p.db.SendBatch(cleanup, b).Close()
			// The pages this instance served go with it: their viewers' names leave the others'.
			if viewed, err := p.reapViews(cleanup); err == nil {
				_ = p.announceViews(cleanup, viewed)
			}
			cancel()
			return
		case <-p.dirty:
			time.Sleep(flushCoalesce)
			announce = true
		case <-beat.C:
		case <-lease.C:
			// A lease that had lapsed may have been reaped with this instance's rows: they are
			// written again, as after a failed write.
			if !p.renew(ctx) {
				pending = true
			}
			p.reap(ctx)
			if !pending {
				continue
			}
			announce = true
		}
		err := p.flush(ctx, announce)
		pending = err != nil
		if err != nil && ctx.Err() == nil {
			p.logger.Warn("writing presence", "err", err)
		}
	}
}

// renew extends this instance's lease. It reports false when the lease had lapsed or could not be
// renewed: this instance was cut off, and so may every other have been (a database restart), so
// it reaps nobody until it has held its lease again for LeaseFor, time enough for the live ones
// to renew theirs.
func (p *Presence) renew(ctx context.Context) bool {
	var lapsed bool
	err := p.db.QueryRow(ctx, `
		WITH old AS (SELECT lease_until FROM instances WHERE id = $1)
		INSERT INTO instances (id, lease_until) VALUES ($1, clock_timestamp() + $2::interval)
		ON CONFLICT (id) DO UPDATE SET lease_until = excluded.lease_until
		RETURNING coalesce((SELECT lease_until FROM old) <= clock_timestamp(), true)`, p.instance, LeaseFor).Scan(&lapsed)
	if err != nil {
		if ctx.Err() == nil {
			p.logger.Warn("renewing this instance's lease", "err", err)
		}
		lapsed = true
	}
	if lapsed {
		p.held = time.Time{}
		if err == nil {
			p.held = time.Now()
		}
		return false
	}
	if p.held.IsZero() {
		p.held = time.Now()
	}
	return true
}

// reap deletes the leases that lapsed with their instances' presence rows, and the rows of
// instances of the version before leases that stopped refreshing them, and then withdraws the
// rings of the users who went offline with them.
func (p *Presence) reap(ctx context.Context) {
	if p.held.IsZero() || time.Since(p.held) < LeaseFor {
		return
	}
	defer func() {
		viewed, err := p.reapViews(ctx)
		if err == nil {
			err = p.announceViews(ctx, viewed)
		}
		if err != nil && ctx.Err() == nil {
			p.logger.Warn("reaping the viewers of instances whose lease lapsed", "err", err)
		}
	}()
	rows, err := p.db.Query(ctx, `
		WITH dead AS (
			DELETE FROM instances WHERE lease_until < clock_timestamp() RETURNING id
		), gone AS (
			DELETE FROM presence p WHERE p.instance_id IN (SELECT id FROM dead)
				OR (p.seen_at < now() - $1::interval AND NOT EXISTS (SELECT 1 FROM instances i WHERE i.id = p.instance_id))
			RETURNING p.user_id
		)
		SELECT DISTINCT user_id FROM gone`, legacyStale)
	if err != nil {
		if ctx.Err() == nil {
			p.logger.Warn("reaping the presence of instances whose lease lapsed", "err", err)
		}
		return
	}
	gone, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(gone) == 0 {
		if err != nil && ctx.Err() == nil {
			p.logger.Warn("reaping the presence of instances whose lease lapsed", "err", err)
		}
		return
	}
	p.logger.Info("removed the presence of instances whose lease lapsed", "users", len(gone))
	if err := p.announce(ctx); err != nil && ctx.Err() == nil {
		p.logger.Warn("announcing presence", "err", err)
	}
	if p.gone != nil {
		p.gone(ctx, gone)
	}
}

// flush writes this instance's presence rows; announce also writes a presence event, so that
// every instance's hub refreshes the supervisors' rosters. A user whose last socket closed is
// forgotten only once the write that deletes their row has committed.
func (p *Presence) flush(ctx context.Context, announce bool) error {
	p.mu.Lock()
	var online, gone []int64
	var counts []int32
	for id, s := range p.users {
		if s.open <= 0 {
			gone = append(gone, id)
			continue
		}
		online = append(online, id)
		counts = append(counts, int32(s.open)) //nolint:gosec // G115: one user's open sockets on this instance, bounded by its file descriptors.
	}
	p.mu.Unlock()
	_, err := p.db.Exec(ctx, `
		WITH gone AS (DELETE FROM presence WHERE instance_id = $1 AND user_id = ANY($2))
		INSERT INTO presence (instance_id, user_id, sockets, seen_at)
		SELECT $1, u, c, now() FROM unnest($3::bigint[], $4::int[]) AS t(u, c)
		ON CONFLICT (instance_id, user_id) DO UPDATE SET sockets = excluded.sockets, seen_at = now()`,
		p.instance, gone, online, counts)
	if err != nil {
		return err
	}
	viewed, err := p.flushViews(ctx)
	if err == nil {
		err = p.announceViews(ctx, viewed)
	}
	if err != nil {
		return err
	}
	if len(gone) > 0 {
		p.mu.Lock()
		for _, id := range gone {
			// Unless they came back while the row was being deleted: the next write has them.
			if s := p.users[id]; s != nil && s.open <= 0 {
				delete(p.users, id)
			}
		}
		p.mu.Unlock()
		if p.gone != nil {
			p.gone(ctx, gone)
		}
	}
	if !announce {
		return nil
	}
	return p.announce(ctx)
}

// announce writes a presence event: every instance's hub refreshes the supervisors' rosters.
func (p *Presence) announce(ctx context.Context) error {
	b := &pgx.Batch{}
	if err := events.Queue(b, events.Change{Kind: events.Presence, At: time.Now()}); err != nil {
		return err
	}
	err := p.db.SendBatch(ctx, b).Close()
	if err == nil {
		p.changed()
	}
	return err
}
