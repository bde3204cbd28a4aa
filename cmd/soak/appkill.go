package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/loadtest"
)

const (
	claimsQueue = "claims"
	// sweepEvery is the desk's sweeper interval (instance.SweepInterval; not configurable).
	sweepEvery = 5 * time.Second
	// actionAttempts bounds one action's retries, so that an agent whose instances are both gone
	// stops rather than spins.
	actionAttempts = 100
)

// appKill: agents on two instances take, accept and resolve packages; one instance is killed with
// SIGKILL mid-run, its agents move to the other one (as a load balancer would move them), and it
// is started again. No package may be claimed twice, and every accept an agent was told of must be
// that agent's in the event log.
func (s *soak) appKill(ctx context.Context) (*section, error) {
	cfg := s.cfg
	dbURL, db, err := s.newDatabase(ctx, "soak_appkill", claimsQueue, "--reservation-timeout", cfg.reservation.String())
	if err != nil {
		return nil, err
	}
	defer db.Close()
	key, err := s.apiKey(dbURL, "appkill-bot", claimsQueue, "")
	if err != nil {
		return nil, err
	}
	emails, err := s.addAgents(dbURL, cfg.appkillAgents)
	if err != nil {
		return nil, err
	}
	var apps [2]*app
	for i, name := range []string{"appkill-a", "appkill-b"} {
		if apps[i], err = s.startApp(ctx, name, dbURL); err != nil {
			return nil, err
		}
	}
	t := time.Now()
	if err := s.fill(ctx, apps, key, cfg.appkillPkgs); err != nil {
		return nil, err
	}
	fmt.Fprintf(s.out, "  %d packages queued through both instances in %s\n", cfg.appkillPkgs, seconds(time.Since(t)))
	r := &claimRun{s: s, agents: len(emails), apps: apps, phases: newPhases("before the kill", "B down", "B back"),
		ackedBy: map[string]int{}, firstAfter: map[int]time.Time{}, cycles: map[string][]time.Duration{}, blockedAgents: map[int]bool{}}
	r.tally = newTally(r.phases.names...)
	tokens := make([]string, len(emails))
	for i, email := range emails {
		if tokens[i], err = s.login(ctx, apps[i%2].base, email); err != nil {
			return nil, err
		}
	}

	start := time.Now()
	stopAt := start.Add(cfg.appkillRun)
	var wg sync.WaitGroup
	for i := range emails {
		wg.Go(func() { r.agent(ctx, i, tokens[i], stopAt) })
	}
	fmt.Fprintf(s.out, "  %d agents working, %d on each instance (A %s, B %s)\n", len(emails), len(emails)/2, apps[0].base, apps[1].base)
	var reviveTook time.Duration
	err = func() error {
		if err := loadtest.Sleep(ctx, cfg.appkillRun/3); err != nil {
			return err
		}
		r.killAt = time.Now()
		r.phases.mark(0, r.killAt)
		if err := apps[1].kill9(); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "  +%s kill -9 instance B (pid %d)\n", seconds(r.killAt.Sub(start)), apps[1].pid())
		if err := loadtest.SleepUntil(ctx, r.killAt.Add(cfg.appkillRevive)); err != nil {
			return err
		}
		if reviveTook, err = s.restartApp(ctx, apps[1]); err != nil {
			return err
		}
		r.revivedAt = time.Now()
		r.phases.mark(1, r.revivedAt)
		r.revived.Store(true)
		fmt.Fprintf(s.out, "  +%s instance B started again, ready in %s; its agents go back to it\n", seconds(r.revivedAt.Sub(start)), seconds(reviveTook))
		return nil
	}()
	wg.Wait()
	end := time.Now()
	if err != nil {
		return nil, err
	}
	// Reservations whose answers the kill lost are the sweeper's to return.
	swept, err := waitNoReservations(ctx, db, cfg.reservation+2*sweepEvery+2*time.Second)
	if err != nil {
		return nil, err
	}
	_, logs, err := wrapUp(ctx, db, apps[:])
	if err != nil {
		return nil, err
	}
	audit, err := r.audit(ctx, db, emails)
	if err != nil {
		return nil, err
	}

	sec := &section{n: 2}
	sec.info("timeline", fmt.Sprintf("%d packages, %d agents; B killed at +%s, back at +%s (ready %s after its start); agents until +%s",
		cfg.appkillPkgs, len(emails), seconds(r.killAt.Sub(start)), seconds(r.revivedAt.Sub(start)), seconds(reviveTook), seconds(end.Sub(start))))
	sec.info("accepts acknowledged (303)", fmt.Sprint(r.acks.Load()))
	sec.invariant("packages with more than one 'accepted' event", fmt.Sprint(audit.double), "0", audit.double == 0)
	sec.invariant("packages two agents were both told they accepted", fmt.Sprint(r.harnessDouble), "0", r.harnessDouble == 0)
	sec.invariant("acknowledged accepts the event log gives to no one or another agent", fmt.Sprint(audit.misattributed), "0",
		audit.misattributed == 0 && r.acks.Load() > 0)
	sec.info("accepts that committed though their answer was lost (found by resolving)", fmt.Sprint(r.lateCommits.Load()))
	sec.info("reservations the sweeper released after the kill (reservation timeout "+cfg.reservation.String()+")",
		releasedLine(audit, r.killAt))
	sec.expect("packages left reserved or accepted once the agents stopped and the sweeper ran", fmt.Sprintf("%d reserved, %d accepted (waited %s)",
		audit.reserved, audit.held, seconds(swept)), "0, 0", audit.reserved == 0 && audit.held == 0)
	sec.info("B's agents: first acknowledged accept after the kill (median / max)", r.recovery(func(i int) bool { return i%2 == 1 }))
	if len(r.blocked) > 0 {
		b := durations(r.blocked)
		sec.info("agents kept from next (409) by a reservation they never heard of", fmt.Sprintf("%d agents; longest %s; %d still kept when they stopped",
			len(r.blockedAgents), seconds(b[len(b)-1]), r.stillBlocked))
	}
	first := r.firstOnRevived.Load()
	if first > 0 {
		sec.info("first acknowledged accept on B after its restart", "+"+seconds(time.Unix(0, first).Sub(r.revivedAt)))
	} else {
		sec.expect("an acknowledged accept on B after its restart", "none", "some", false)
	}
	before := rate(r.acksIn(r.phases.names[0]), r.killAt.Sub(start))
	down := rate(r.acksIn(r.phases.names[1]), r.revivedAt.Sub(r.killAt))
	back := rate(r.acksIn(r.phases.names[2]), end.Sub(r.revivedAt))
	sec.info("accepts/s before the kill / while B was down / after (ratios to before)",
		fmt.Sprintf("%.0f / %.0f / %.0f (%s, %s)", before, down, back, ratio(down, before), ratio(back, before)))
	for _, p := range r.phases.names {
		sec.info("next→accept→resolve cycle, "+p, p50p90max(r.cycles[p]))
	}
	sec.unexpected("actions with unexpected answers", &r.errs)
	sec.answers("answers", r.tally)
	sec.note("the instances logged: %s", logs.warningLine())
	return sec, nil
}

// addAgents creates n agents of the claims queue through the CLI and returns their emails.
func (s *soak) addAgents(dbURL string, n int) ([]string, error) {
	return s.addUsers(dbURL, "agent", claimsQueue, n, 0)
}

// addUsers creates n users of role working queue through the CLI, four at a time (each hashes a
// password), with capacity (0: the desk's default), and returns their emails: role001@soak.example
// and on.
func (s *soak) addUsers(dbURL, role, queue string, n, capacity int) ([]string, error) {
	emails := make([]string, n)
	errs := make([]error, n)
	limit := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i := range n {
		emails[i] = fmt.Sprintf("%s%03d@soak.example", role, i)
		wg.Go(func() {
			limit <- struct{}{}
			defer func() { <-limit }()
			args := []string{"user", "add", "--email", emails[i], "--name", fmt.Sprintf("%s %03d", strings.ToUpper(role[:1])+role[1:], i),
				"--role", role, "--password", password, "--queues", queue}
			if capacity > 0 {
				args = append(args, "--capacity", fmt.Sprint(capacity))
			}
			_, errs[i] = s.cli(dbURL, args...)
		})
	}
	wg.Wait()
	return emails, errors.Join(errs...)
}

// fill queues n packages through both instances, each retried until it is answered 201.
func (s *soak) fill(ctx context.Context, apps [2]*app, key string, n int) error {
	var next atomic.Int64
	errs := &loadtest.ErrorLog{}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1)
				if i > int64(n) {
					return
				}
				id := fmt.Sprintf("ho_claim_%07d", i)
				body, err := s.body(id, claimsQueue)
				if err != nil {
					errs.Add(err)
					return
				}
				for attempt := 0; ; attempt++ {
					a := s.submit(ctx, apps[w%2].base, key, body, patience)
					if a.ok() {
						break
					}
					if !a.retryable() || attempt == 20 {
						errs.Add(fmt.Errorf("%s: %s", id, a.kind()))
						return
					}
					if loadtest.Sleep(ctx, jitter(firstBackoff)) != nil {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if errs.Count() > 0 {
		return fmt.Errorf("queueing the packages: %d failed, first: %q", errs.Count(), errs.Samples())
	}
	return ctx.Err()
}

// claimRun is the agents' side of appKill.
type claimRun struct {
	s                 *soak
	agents            int
	apps              [2]*app
	phases            *phases
	tally             *tally
	killAt, revivedAt time.Time
	revived           atomic.Bool
	acks, lateCommits atomic.Int64
	firstOnRevived    atomic.Int64 // UnixNano of the first accept acknowledged by B after its restart
	errs              loadtest.ErrorLog
	mu                sync.Mutex
	ackedBy           map[string]int    // handoff id → the agent told it accepted
	ackedAt           []phaseAck        // every acknowledged accept
	firstAfter        map[int]time.Time // agent → its first acknowledged accept after the kill
	cycles            map[string][]time.Duration
	harnessDouble     int
	blocked           []time.Duration // spells of next answering 409
	blockedAgents     map[int]bool
	stillBlocked      int // agents still kept from next when they stopped
}

type phaseAck struct {
	phase string
	agent int
}

// agent is one agent's browser: POST next (303 to the reserved package), accept, resolve, until
// stopAt or the queue is empty. An agent whose instance does not answer moves to the other one,
// as a load balancer would move it, and goes back to its own once that is started again.
func (r *claimRun) agent(ctx context.Context, i int, token string, stopAt time.Time) {
	home := i % 2
	on := home
	// act sends an action until the desk answers it, moving on when the instance is gone and
	// waiting out 503s. ambiguous says whether an earlier try may have reached the desk: its
	// answer, not its effect, was lost.
	act := func(path string, values url.Values) (a answer, ambiguous bool) {
		for range actionAttempts {
			a = r.s.form(ctx, r.apps[on].base, path, token, values)
			now := time.Now()
			r.tally.add(r.phases.at(now), a.kind())
			switch {
			case ctx.Err() != nil:
				return a, ambiguous
			case a.err != nil:
				ambiguous = ambiguous || !strings.Contains(a.err.Error(), "connection refused")
				on = 1 - on
				_ = loadtest.Sleep(ctx, 20*time.Millisecond) // both instances may be down a moment; a cancelled sleep ends the loop
			case a.status == http.StatusServiceUnavailable:
				_ = loadtest.Sleep(ctx, jitter(200*time.Millisecond)) // a cancelled sleep ends the loop above
			default:
				return a, ambiguous
			}
		}
		return a, ambiguous
	}
	// blockedSince is when next began to answer 409: the agent holds a reservation whose answer
	// the kill lost (or as many packages as it may), and cannot take another until the sweeper
	// returns it.
	var blockedSince time.Time
	defer func() {
		if !blockedSince.IsZero() {
			r.blockedFor(i, time.Since(blockedSince), true)
		}
	}()
	for ctx.Err() == nil && time.Now().Before(stopAt) {
		if r.revived.Load() {
			on = home
		}
		t := time.Now()
		a, _ := act("/queues/"+claimsQueue+"/next", nil)
		id, reserved := strings.CutPrefix(a.location, "/handoffs/")
		switch {
		case a.status == http.StatusNotFound:
			return // nothing is waiting
		case a.status == http.StatusConflict:
			if blockedSince.IsZero() {
				blockedSince = t
			}
			_ = loadtest.Sleep(ctx, jitter(250*time.Millisecond)) // a cancelled sleep ends the loop
			continue
		case a.status != http.StatusSeeOther || !reserved:
			r.errs.Add(fmt.Errorf("next: %s", a.kind()))
			_ = loadtest.Sleep(ctx, jitter(250*time.Millisecond)) // a cancelled sleep ends the loop
			continue
		}
		if !blockedSince.IsZero() {
			r.blockedFor(i, time.Since(blockedSince), false)
			blockedSince = time.Time{}
		}
		a, ambiguous := act("/handoffs/"+id+"/accept", nil)
		switch {
		case a.status == http.StatusSeeOther:
			r.acked(id, i, on, time.Now())
		case a.status == http.StatusConflict && ambiguous:
			// An earlier try may have committed: resolving tells, and frees the agent's hands.
			if p, _ := act("/handoffs/"+id+"/resolve", url.Values{"code": {"solved"}}); p.status == http.StatusSeeOther {
				r.lateCommits.Add(1)
			}
			continue
		case a.status == http.StatusConflict:
			continue // the reservation ran out before the accept and someone else took the package
		default:
			r.errs.Add(fmt.Errorf("accept %s: %s", id, a.kind()))
			continue
		}
		a, ambiguous = act("/handoffs/"+id+"/resolve", url.Values{"code": {"solved"}})
		if a.status != http.StatusSeeOther && (a.status != http.StatusConflict || !ambiguous) {
			r.errs.Add(fmt.Errorf("resolve %s: %s", id, a.kind()))
			continue
		}
		r.mu.Lock()
		phase := r.phases.at(t)
		r.cycles[phase] = append(r.cycles[phase], time.Since(t))
		r.mu.Unlock()
	}
}

func (r *claimRun) acked(id string, agent, on int, at time.Time) {
	r.acks.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, taken := r.ackedBy[id]; taken {
		r.harnessDouble++
	}
	r.ackedBy[id] = agent
	r.ackedAt = append(r.ackedAt, phaseAck{phase: r.phases.at(at), agent: agent})
	if phase := r.phases.at(at); phase != r.phases.names[0] {
		if _, seen := r.firstAfter[agent]; !seen {
			r.firstAfter[agent] = at
		}
	}
	if on == 1 && r.revived.Load() {
		r.firstOnRevived.CompareAndSwap(0, at.UnixNano())
	}
}

func (r *claimRun) blockedFor(agent int, d time.Duration, stillAtEnd bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.blocked = append(r.blocked, d)
	r.blockedAgents[agent] = true
	if stillAtEnd {
		r.stillBlocked++
	}
}

func (r *claimRun) acksIn(phase string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, a := range r.ackedAt {
		if a.phase == phase {
			n++
		}
	}
	return n
}

// recovery shows how long after the kill the chosen agents were told of an accept again.
func (r *claimRun) recovery(chosen func(agent int) bool) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var d []time.Duration
	for agent, t := range r.firstAfter {
		if chosen(agent) {
			d = append(d, t.Sub(r.killAt))
		}
	}
	n := 0
	for agent := range r.agents {
		if chosen(agent) {
			n++
		}
	}
	if len(d) == 0 {
		return fmt.Sprintf("none of %d agents", n)
	}
	s := durations(d)
	return fmt.Sprintf("+%s / +%s (%d of %d agents)", seconds(loadtest.Median(s)), seconds(s[len(s)-1]), len(s), n)
}

// claimAudit is what the event log and the packages say after the run.
type claimAudit struct {
	double        int // packages with more than one 'accepted' event
	misattributed int // acknowledged accepts whose event is missing or names another agent
	released      int // 'released' events after the kill
	lastRelease   time.Time
	reserved      int // packages still reserved
	held          int // packages still accepted: an agent's hands were never freed
}

func (r *claimRun) audit(ctx context.Context, db *pgxpool.Pool, emails []string) (claimAudit, error) {
	var a claimAudit
	err := db.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE n > 1) FROM (
			SELECT count(*) AS n FROM events WHERE kind = 'accepted' GROUP BY handoff_id) per_package`).Scan(&a.double)
	if err != nil {
		return a, err
	}
	var last *time.Time
	err = db.QueryRow(ctx, `SELECT count(*), max(at) FROM events WHERE kind = 'released' AND at >= $1`, r.killAt).Scan(&a.released, &last)
	if err != nil {
		return a, err
	}
	if last != nil {
		a.lastRelease = *last
	} else {
		a.lastRelease = r.killAt
	}
	err = db.QueryRow(ctx, `SELECT count(*) FILTER (WHERE status = 'reserved'), count(*) FILTER (WHERE status = 'accepted') FROM handoffs`).
		Scan(&a.reserved, &a.held)
	if err != nil {
		return a, err
	}
	rows, err := db.Query(ctx, `
		SELECT h.handoff_id, u.email FROM events e JOIN handoffs h ON h.id = e.handoff_id JOIN users u ON u.id = e.actor_user
		WHERE e.kind = 'accepted'`)
	if err != nil {
		return a, err
	}
	acceptedBy := map[string][]string{}
	for rows.Next() {
		var id, email string
		if err := rows.Scan(&id, &email); err != nil {
			return a, err
		}
		acceptedBy[id] = append(acceptedBy[id], email)
	}
	if err := rows.Err(); err != nil {
		return a, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for id, agent := range r.ackedBy {
		if got := acceptedBy[id]; len(got) != 1 || got[0] != emails[agent] {
			a.misattributed++
		}
	}
	return a, nil
}

// waitNoReservations waits until no package is reserved, at most limit, and returns how long it
// waited.
func waitNoReservations(ctx context.Context, db *pgxpool.Pool, limit time.Duration) (time.Duration, error) {
	t := time.Now()
	for {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM handoffs WHERE status = 'reserved'`).Scan(&n); err != nil {
			return 0, err
		}
		if n == 0 || time.Since(t) > limit {
			return time.Since(t), nil
		}
		if err := loadtest.Sleep(ctx, 250*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

func releasedLine(a claimAudit, killAt time.Time) string {
	if a.released == 0 {
		return "0"
	}
	return fmt.Sprintf("%d, the last at +%s after the kill", a.released, seconds(a.lastRelease.Sub(killAt)))
}
