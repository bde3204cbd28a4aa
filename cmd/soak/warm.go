package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/loadtest"
)

const (
	warmQueue     = "warm"
	warmInstances = 3
	// killedInstance is the instance the run kills: the last, so that the supervisors, on the
	// others, stay up through it.
	killedInstance = warmInstances - 1
	// deadInstanceBound is the spec's promise: an agent whose instance dies is rung no more
	// within it.
	deadInstanceBound = 5 * time.Second
	// settle is how long after the killed instance is back PostgreSQL is killed at the earliest,
	// so that what each fault does is told apart.
	settle = 5 * time.Second
	// warmRefundThreshold is below the example's refund (49.99 USD): every refund needs a
	// supervisor's approval.
	warmRefundThreshold = "20.00"
	// warmReservation is the queue's reservation timeout: a reservation whose answer a kill lost
	// goes back within the run.
	warmReservation = 5 * time.Second
	// warmMissedRings is the queue's rings run out in a row before the desk sets an agent away:
	// agents who let rings run out meet it, and choose available again.
	warmMissedRings = 2
)

// warmTimeline is when, from the bots' start, an instance is killed and when PostgreSQL is.
func (c config) warmTimeline() (instanceKill, pgKill time.Duration) {
	instanceKill = c.warmRun / 5
	return instanceKill, max(instanceKill+c.warmRevive+settle, c.warmRun/2)
}

// warmRun is the fifth run's shared state: the instances, what the people in it were told, and
// when the faults came.
type warmRun struct {
	s      *soak
	cfg    config
	apps   [warmInstances]*app
	phases *phases
	tally  *tally // the agents' and supervisors' answers, by phase and action
	errs   loadtest.ErrorLog

	killAt, revivedAt atomic.Int64 // UnixNano; 0 before
	draining          atomic.Bool  // the bots stopped: agents pull no more packages
	rng               *rand.Rand   // seeds each person's own

	mu          sync.Mutex
	acceptedBy  map[string]int // package → the agent told its accept (303), or who found it theirs by resolving
	doubleTold  int            // packages two agents were told they accepted
	lateCommits int            // accepts whose answer was lost that resolving found committed
	decidedBy   map[int64]decision
	doubleDecid int // approvals two supervisors were both told they decided
	connections []connection
	counts      map[string]int // what the people did, for the table
}

// decision is what a supervisor was told they decided.
type decision struct {
	supervisor int
	verdict    string // "approve" or "deny"
}

// connection is a page's socket opening: whose, on which instance, and when its dial began.
type connection struct {
	agent    int
	instance int
	began    time.Time
}

func (r *warmRun) count(what string, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.counts[what] += n
}

func (r *warmRun) counted(what string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts[what]
}

// accepted records that agent was told it accepted id, or found it theirs.
func (r *warmRun) accepted(id string, agent int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.acceptedBy[id]; ok && prev != agent {
		r.doubleTold++
	}
	r.acceptedBy[id] = agent
}

func (r *warmRun) decided(id int64, supervisor int, verdict string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.decidedBy[id]; ok {
		r.doubleDecid++
	}
	r.decidedBy[id] = decision{supervisor: supervisor, verdict: verdict}
}

func (r *warmRun) connected(agent, instance int, began time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.connections = append(r.connections, connection{agent: agent, instance: instance, began: began})
}

// down reports whether instance i is the killed one and not started again, and since when.
func (r *warmRun) down(i int) (time.Time, bool) {
	killed := r.killAt.Load()
	if i != killedInstance || killed == 0 || r.revivedAt.Load() != 0 {
		return time.Time{}, false
	}
	return time.Unix(0, killed), true
}

// seed is a new seed for one person's choices.
func (r *warmRun) seed() *rand.Rand {
	r.mu.Lock()
	defer r.mu.Unlock()
	return rand.New(rand.NewPCG(r.rng.Uint64(), r.rng.Uint64())) //nolint:gosec // G404: the soak's choices need no secure randomness.
}

// warm: three instances on one database; agents on websockets (a third on each) set themselves
// available, answer the rings their pages show (accept, decline, or let run out), pull cold
// packages with Next, and work what they hold, asking supervisors to approve some refunds;
// supervisors, on the two instances that stay up, decide two approvals in three, racing each
// other and the approval timeout, and leave the third to expire. Bots post warm and cold packages
// with a webhook receiver. One instance is killed with SIGKILL (half its agents reconnect to
// another instance after -warm-move, the others wait for it to be started again) and later
// PostgreSQL is. Then the run drains: every warm phase and every approval ends, every webhook is
// delivered, and the invariants are read from what the people were told, the event log and what
// the bots heard.
func (s *soak) warm(ctx context.Context) (*section, error) {
	cfg := s.cfg
	hooks, err := startReceiver(0)
	if err != nil {
		return nil, err
	}
	defer func() { _ = hooks.close() }() // closed again below; the first close's error is the one reported
	dbURL, db, err := s.newDatabase(ctx, "soak_warm", warmQueue, "--accept-window", cfg.warmWindow.String(), "--warm-wait", cfg.warmWait.String(),
		"--refund-threshold", warmRefundThreshold, "--reservation-timeout", warmReservation.String(), "--missed-rings", fmt.Sprint(warmMissedRings))
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// The desk refuses approval timeouts under a minute; the run's own database takes a shorter one,
	// so that requests expire, and race the supervisors' decisions, within the run.
	if _, err := db.Exec(ctx, `UPDATE queues SET approval_timeout = $1 WHERE name = $2`, cfg.warmApproval, warmQueue); err != nil {
		return nil, err
	}
	key, err := s.apiKey(dbURL, "warm-bot", warmQueue, hooks.url)
	if err != nil {
		return nil, err
	}
	agentEmails, err := s.addUsers(dbURL, "agent", warmQueue, cfg.warmAgents, cfg.warmCapacity)
	if err != nil {
		return nil, err
	}
	supervisorEmails, err := s.addUsers(dbURL, "supervisor", warmQueue, cfg.warmSupervisors, 0)
	if err != nil {
		return nil, err
	}
	r := &warmRun{s: s, cfg: cfg, phases: newPhases("before the kills", "instance C down", "C back", "PostgreSQL down", "after", "the end"),
		acceptedBy: map[string]int{}, decidedBy: map[int64]decision{}, counts: map[string]int{},
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 0))} //nolint:gosec // G404, G115: a seed for the soak's choices.
	r.tally = newTally(r.phases.names...)
	bases := make([]string, warmInstances)
	for i := range warmInstances {
		if r.apps[i], err = s.startApp(ctx, "warm-"+string(rune('a'+i)), dbURL); err != nil {
			return nil, err
		}
		bases[i] = r.apps[i].base
	}
	agents := make([]*deskAgent, len(agentEmails))
	for i, email := range agentEmails {
		if agents[i], err = r.newAgent(ctx, i, email); err != nil {
			return nil, err
		}
	}
	supervisors := make([]*deskSupervisor, len(supervisorEmails))
	for i, email := range supervisorEmails {
		if supervisors[i], err = r.newSupervisor(ctx, i, email); err != nil {
			return nil, err
		}
	}

	people, stopPeople := context.WithCancel(ctx)
	defer stopPeople()
	var wg sync.WaitGroup
	for _, a := range agents {
		wg.Go(func() { a.run(people) })
	}
	for _, sv := range supervisors {
		wg.Go(func() { sv.run(people) })
	}
	ids := make([]int64, 0, len(agents))
	if err := db.QueryRow(ctx, `SELECT array_agg(id) FROM users WHERE email = ANY($1)`, agentEmails).Scan(&ids); err != nil {
		return nil, err
	}
	online, err := waitFor(ctx, db, cfg.warmDrain, `SELECT count(*) FROM ringable WHERE user_id = ANY($1)`, len(ids), ids)
	if err != nil {
		return nil, err
	}
	if online < 0 {
		stopPeople()
		wg.Wait()
		return nil, fmt.Errorf("the agents were not all available with a desk page open within %s", cfg.warmDrain)
	}
	fmt.Fprintf(s.out, "  %d agents available with a desk page open (%s), %d supervisors on /approvals; instances A %s, B %s, C %s\n",
		len(agents), seconds(online), len(supervisors), bases[0], bases[1], bases[2])

	giveUp := cfg.pgkillGiveUp
	warmIn := s.newIntake("", key, warmQueue, "ho_warm", r.phases, giveUp)
	coldIn := s.newIntake("", key, warmQueue, "ho_cold", r.phases, giveUp)
	warmIn.bases, warmIn.mode = bases, "warm"
	coldIn.bases, coldIn.mode = bases, "cold"
	start := time.Now()
	waitWarm := warmIn.bots(ctx, cfg.warmBots/2, cfg.warmPace)
	waitCold := coldIn.bots(ctx, cfg.warmBots-cfg.warmBots/2, cfg.warmPace)
	fmt.Fprintf(s.out, "  %d bots posting warm packages and %d cold, one each every %s, through all three instances\n",
		cfg.warmBots/2, cfg.warmBots-cfg.warmBots/2, cfg.warmPace)
	tl, err := r.faults(ctx, start)
	warmIn.stop()
	coldIn.stop()
	waitWarm()
	waitCold()
	tl.stopped = time.Now()
	r.phases.mark(4, tl.stopped)
	r.draining.Store(true)
	if err != nil {
		stopPeople()
		wg.Wait()
		return nil, err
	}
	fmt.Fprintf(s.out, "  +%s bots stopped; waiting for every warm phase and approval to end\n", seconds(tl.stopped.Sub(start)))

	var drained drain
	if drained.warm, err = waitFor(ctx, db, cfg.warmDrain, `
		SELECT count(*) FROM handoffs h WHERE h.warm_until IS NOT NULL
			OR EXISTS (SELECT 1 FROM offers o WHERE o.handoff_id = h.id AND o.ended_at IS NULL)`, 0); err != nil {
		return nil, err
	}
	if drained.approvals, err = waitFor(ctx, db, cfg.warmDrain, `SELECT count(*) FROM approvals WHERE state = 'pending'`, 0); err != nil {
		return nil, err
	}
	stopPeople()
	wg.Wait()
	if drained.webhooks, err = waitFor(ctx, db, cfg.warmDrain, `SELECT count(*) FROM webhook_outbox WHERE state = 'pending'`, 0); err != nil {
		return nil, err
	}
	ds, logs, err := wrapUp(ctx, db, r.apps[:], warmIn, coldIn)
	if err != nil {
		return nil, err
	}
	if err := hooks.close(); err != nil {
		return nil, err
	}
	arrivals, _ := hooks.snapshot()
	audit, err := r.audit(ctx, db, agentEmails, supervisorEmails, arrivals)
	if err != nil {
		return nil, err
	}
	sec := r.report(tl, drained, ds, audit, warmIn, coldIn)
	// An outage the desk rides out is a warning; an ERROR says something really failed.
	sec.expect("ERROR lines the instances logged", fmt.Sprint(logs.errorLines()), "0", logs.errorLines() == 0)
	sec.note("the instances logged: %s", logs.warningLine())
	return sec, nil
}

// timeline is when the run's faults came.
type timeline struct {
	start, killAt, revivedAt, pgKillAt, pgRestartAt, pgBackAt, stopped time.Time
	reviveTook                                                         time.Duration
	pgStarts                                                           int
}

// drain is how long each step of the end waited; a negative wait ran out.
type drain struct {
	warm, approvals, webhooks time.Duration
}

// faults kills instance C and starts it again, then kills PostgreSQL and starts it again, and
// returns when the bots' run is over.
func (r *warmRun) faults(ctx context.Context, start time.Time) (timeline, error) {
	cfg, s := r.cfg, r.s
	tl := timeline{start: start}
	instanceKill, pgKill := cfg.warmTimeline()
	if err := loadtest.SleepUntil(ctx, start.Add(instanceKill)); err != nil {
		return tl, err
	}
	c := r.apps[killedInstance]
	tl.killAt = time.Now()
	r.phases.mark(0, tl.killAt)
	r.killAt.Store(tl.killAt.UnixNano())
	if err := c.kill9(); err != nil {
		return tl, err
	}
	fmt.Fprintf(s.out, "  +%s kill -9 instance C (pid %d)\n", seconds(tl.killAt.Sub(start)), c.pid())
	if err := loadtest.SleepUntil(ctx, tl.killAt.Add(cfg.warmRevive)); err != nil {
		return tl, err
	}
	var err error
	if tl.reviveTook, err = s.restartApp(ctx, c); err != nil {
		return tl, err
	}
	tl.revivedAt = time.Now()
	r.phases.mark(1, tl.revivedAt)
	r.revivedAt.Store(tl.revivedAt.UnixNano())
	fmt.Fprintf(s.out, "  +%s instance C started again, ready in %s\n", seconds(tl.revivedAt.Sub(start)), seconds(tl.reviveTook))
	if err := loadtest.SleepUntil(ctx, start.Add(pgKill)); err != nil {
		return tl, err
	}
	tl.pgKillAt = time.Now()
	r.phases.mark(2, tl.pgKillAt)
	if err := s.pg.kill9(); err != nil {
		return tl, err
	}
	fmt.Fprintf(s.out, "  +%s kill -9 postmaster (pid %d)\n", seconds(tl.pgKillAt.Sub(start)), s.pg.proc.pid())
	if err := loadtest.Sleep(ctx, cfg.warmOutage); err != nil {
		return tl, err
	}
	tl.pgRestartAt = time.Now()
	starts := s.pg.starts
	if err := s.pg.start(ctx); err != nil {
		return tl, err
	}
	tl.pgBackAt, tl.pgStarts = time.Now(), s.pg.starts-starts
	r.phases.mark(3, tl.pgBackAt)
	fmt.Fprintf(s.out, "  +%s PostgreSQL accepting connections again after %s of crash recovery\n",
		seconds(tl.pgBackAt.Sub(start)), seconds(tl.pgBackAt.Sub(tl.pgRestartAt)))
	return tl, loadtest.SleepUntil(ctx, start.Add(cfg.warmRun))
}

// waitFor polls query until it counts want, at most limit, and returns how long it waited: the
// limit's negative when it ran out, which the report shows.
func waitFor(ctx context.Context, db *pgxpool.Pool, limit time.Duration, query string, want int, args ...any) (time.Duration, error) {
	t := time.Now()
	for {
		var n int
		err := db.QueryRow(ctx, query, args...).Scan(&n)
		if err == nil && n == want {
			return time.Since(t), nil
		}
		if time.Since(t) > limit {
			if err != nil {
				return 0, err
			}
			return -limit, nil
		}
		if err := loadtest.Sleep(ctx, 200*time.Millisecond); err != nil {
			return 0, err
		}
	}
}

// report is the fifth run's table.
func (r *warmRun) report(tl timeline, drained drain, ds []durability, a warmAudit, warmIn, coldIn *intake) *section {
	cfg := r.cfg
	sec := &section{n: 5, counts: map[string]int{}}
	at := func(t time.Time) string { return "+" + seconds(t.Sub(tl.start)) }
	sec.info("timeline", fmt.Sprintf("%d agents, %d supervisors, %d bots; C killed at %s, back at %s (ready in %s); PostgreSQL killed at %s, "+
		"accepting again at %s (%d start(s)); bots until %s", cfg.warmAgents, cfg.warmSupervisors, cfg.warmBots, at(tl.killAt), at(tl.revivedAt),
		seconds(tl.reviveTook), at(tl.pgKillAt), at(tl.pgBackAt), tl.pgStarts, at(tl.stopped)))
	sec.info("queue", fmt.Sprintf("accept window %s, warm wait %s, approval timeout %s, reservation timeout %s, missed rings before away %d; "+
		"agents hold %d at once", cfg.warmWindow, cfg.warmWait, cfg.warmApproval, warmReservation, warmMissedRings, cfg.warmCapacity))

	warmD, coldD := ds[0], ds[1]
	lost, acked, twice := warmD.lost+coldD.lost, warmD.acked+coldD.acked, warmD.twice+coldD.twice
	sec.info("packages acknowledged: warm / cold (of which 200: a retry's first try had committed)",
		fmt.Sprintf("%d / %d (%d)", warmD.acked, coldD.acked, warmD.replays+coldD.replays))
	sec.invariant("nothing acknowledged lost: acknowledged but not stored, or stored twice", fmt.Sprintf("%d of %d; %d twice", lost, acked, twice),
		"0 of > 0; 0", lost == 0 && twice == 0 && warmD.acked > 0 && coldD.acked > 0)
	sec.invariant("no package claimed twice: two accepts in the log, told to two agents, or credited to another agent",
		fmt.Sprintf("%d of %d accepted packages (%d, %d, %d)", a.claimViolations(), a.acceptedPackages, a.doubleAccepts, a.doubleTold, a.misattributed),
		"0 of > 0", a.claimViolations() == 0 && a.acceptedPackages > 0)
	sec.invariant("one live offer per package and per agent at every instant (the log's offered/offer_ended, by time; by sequence)",
		fmt.Sprintf("%d of %d offers; %d", a.overlapsByTime, a.offers, a.overlapsBySeq), "0 of > 0; 0",
		a.overlapsByTime == 0 && a.overlapsBySeq == 0 && a.offers > 0)
	sec.invariant(fmt.Sprintf("no ring to an agent of the killed instance from %s after its death until they are back", deadInstanceBound),
		fmt.Sprintf("%d of %d agents (%d rings live at or after the kill)", a.deadViolations, a.deadAgents, a.deadRings),
		"0 of > 0", a.deadViolations == 0 && a.deadAgents > 0)
	sec.invariant("every warm package: exactly one end of its warm phase heard, accepted or warm_timeout (an accepted after a warm_timeout is the package taken cold)",
		fmt.Sprintf("%d of %d warm packages (%d still warm at the end)", a.warmViolations, a.warmPackages, a.stillWarm),
		"0 of > 0", a.warmViolations == 0 && a.warmPackages > 0)
	sec.invariant("every approval expires or is decided exactly once (the log; the bot's webhooks; the deciders told)",
		fmt.Sprintf("%d of %d approvals (%d, %d, %d)", a.approvalViolations(), a.approvals, a.approvalLog, a.approvalHooks, a.approvalTold),
		"0 of > 0", a.approvalViolations() == 0 && a.approvals > 0)
	for _, s := range a.samples {
		sec.note("violation: %s", s)
	}

	sec.info("rings the agents' pages showed: accepted / declined / let run out; accepts refused (the ring had ended)",
		fmt.Sprintf("%d: %d / %d / %d; %d", r.counted("rings shown"), r.counted("ring accepted"), r.counted("ring declined"),
			r.counted("ring let run out"), r.counted("ring accept refused")))
	sec.info("packages pulled with next; agents set away by missed rings, who chose available again; breaks",
		fmt.Sprintf("%d; %d; %d", r.counted("next accepted"), r.counted("set away, back"), r.counted("breaks")))
	sec.info("how warm phases ended, as the bot heard (and the warm_timeouts accepted later, cold)", a.endsLine())
	sec.info("approvals: requested / granted / denied / expired; decisions refused (409: the other supervisor's, or expired)",
		fmt.Sprintf("%d / %d / %d / %d; %d", a.approvals, a.states["granted"], a.states["denied"], a.states["expired"], r.counted("decision refused")))
	sec.info("resolved as refunded / otherwise; accepts whose lost answer resolving found committed",
		fmt.Sprintf("%d / %d; %d", r.counted("resolved refunded"), r.counted("resolved"), r.lateCommits))
	sec.info("C's agents: rings withdrawn after the kill (the last at); half came back elsewhere after, the rest with C",
		fmt.Sprintf("%d (%s); %s, %s", a.deadWithdrawn, a.lastDeadEnd(), cfg.warmMove, cfg.warmRevive))
	sec.refusals("bots' refusals while PostgreSQL was down that were 503 with Retry-After",
		func(k string) bool { return !strings.HasPrefix(k, "20") }, []*tally{warmIn.tally, coldIn.tally}, r.phases.names[3])
	sec.info("the end: every warm phase over / every approval ended / every webhook delivered, after",
		fmt.Sprintf("%s / %s / %s", waited(drained.warm), waited(drained.approvals), waited(drained.webhooks)))
	for _, d := range []time.Duration{drained.warm, drained.approvals, drained.webhooks} {
		if d < 0 {
			sec.expect("the end drained within -warm-drain", "no", "yes", false)
			break
		}
	}
	sec.info("load average (1, 5, 15 min) at the end", loadtest.LoadAverage())
	sec.unexpected("actions with unexpected answers", &r.errs)
	sec.unexpected("bots: answers neither 2xx nor retryable", &warmIn.unexpected)
	sec.answers("people", r.tally)

	for k, v := range map[string]int{"rings": r.counted("rings shown"), "ring accepted": r.counted("ring accepted"),
		"ring declined": r.counted("ring declined"), "ring let run out": r.counted("ring let run out"),
		"granted": a.states["granted"], "denied": a.states["denied"], "expired": a.states["expired"],
		"accepted": a.ends["accepted"], "warm_timeout": a.warmTimeouts(), "accepted cold": a.ends["accepted later, cold"], "dead agents": a.deadAgents, "dead withdrawn": a.deadWithdrawn} {
		sec.counts[k] = v
	}
	return sec
}

func waited(d time.Duration) string {
	if d < 0 {
		return "not within " + seconds(-d)
	}
	return seconds(d)
}
