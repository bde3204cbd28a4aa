package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// maxSamples bounds the violations a report names one by one.
const maxSamples = 5

// warmAudit is what the fifth run's invariants read: the event log, the approvals, what the
// bot heard and what the people were told.
type warmAudit struct {
	acceptedPackages, doubleAccepts, doubleTold, misattributed int
	claimBad                                                   map[string]bool

	offers, overlapsByTime, overlapsBySeq int

	deadAgents, deadViolations int
	deadRings, deadWithdrawn   int           // rings live between the kill and the agent's return; of those, live at the kill
	deadLastEnd                time.Duration // the last of them ended this long after the kill

	warmPackages, warmViolations, stillWarm int
	ends                                    map[string]int // accepted, or warm_timeout:reason, as the bot heard them

	approvals, approvalLog, approvalHooks, approvalTold int
	approvalBad                                         map[int64]bool
	states                                              map[string]int

	samples []string
}

func (a *warmAudit) sample(format string, args ...any) {
	if len(a.samples) < maxSamples {
		a.samples = append(a.samples, fmt.Sprintf(format, args...))
	}
}

func (a *warmAudit) claimViolations() int    { return len(a.claimBad) }
func (a *warmAudit) approvalViolations() int { return len(a.approvalBad) }

func (a *warmAudit) warmTimeouts() int {
	n := 0
	for k, v := range a.ends {
		if strings.HasPrefix(k, "warm_timeout") {
			n += v
		}
	}
	return n
}

func (a *warmAudit) endsLine() string {
	keys := slices.SortedFunc(maps.Keys(a.ends), func(x, y string) int { return cmp.Or(a.ends[y]-a.ends[x], strings.Compare(x, y)) })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, a.ends[k])
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func (a *warmAudit) lastDeadEnd() string {
	if a.deadRings == 0 {
		return "none rang"
	}
	return "the last ended +" + seconds(a.deadLastEnd) + " after the kill"
}

// audit reads the run's invariants once everything has drained and the instances have stopped.
func (r *warmRun) audit(ctx context.Context, db *pgxpool.Pool, agentEmails, supervisorEmails []string, arrivals []arrival) (warmAudit, error) {
	a := warmAudit{claimBad: map[string]bool{}, approvalBad: map[int64]bool{}, ends: map[string]int{}, states: map[string]int{}}
	if err := r.auditClaims(ctx, db, &a, agentEmails); err != nil {
		return a, err
	}
	if err := r.auditOffers(ctx, db, &a, agentEmails); err != nil {
		return a, err
	}
	if err := auditWarmEnds(ctx, db, &a, arrivals); err != nil {
		return a, err
	}
	return a, r.auditApprovals(ctx, db, &a, supervisorEmails, arrivals)
}

// auditClaims: no package has two accepts in the log, was told accepted to two agents, or is
// credited in the log to another agent than the one told.
func (r *warmRun) auditClaims(ctx context.Context, db *pgxpool.Pool, a *warmAudit, agentEmails []string) error {
	rows, err := db.Query(ctx, `
		SELECT h.handoff_id, u.email FROM events e JOIN handoffs h ON h.id = e.handoff_id JOIN users u ON u.id = e.actor_user
		WHERE e.kind = 'accepted'`)
	if err != nil {
		return err
	}
	acceptedBy := map[string][]string{}
	var id, email string
	if _, err := pgx.ForEachRow(rows, []any{&id, &email}, func() error {
		acceptedBy[id] = append(acceptedBy[id], email)
		return nil
	}); err != nil {
		return err
	}
	a.acceptedPackages = len(acceptedBy)
	for id, by := range acceptedBy {
		if len(by) > 1 {
			a.doubleAccepts++
			a.claimBad[id] = true
			a.sample("%s accepted %d times in the log: %v", id, len(by), by)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a.doubleTold = r.doubleTold
	for id, agent := range r.acceptedBy {
		if by := acceptedBy[id]; len(by) != 1 || by[0] != agentEmails[agent] {
			a.misattributed++
			a.claimBad[id] = true
			a.sample("%s: %s was told it accepted it; the log's accepts name %v", id, agentEmails[agent], by)
		}
	}
	if r.doubleTold > 0 {
		a.claimBad["(told to two agents)"] = true
	}
	return nil
}

// offerEvent is an offered or offer_ended row of the log.
type offerEvent struct {
	seq     int64
	at      time.Time
	started bool
	pkg     string
	agent   int64
}

// offerSpan is one offer, from its offered row to its offer_ended row (zero: never ended).
type offerSpan struct {
	agent    int64
	pkg      string
	from, to time.Time
}

// auditOffers: at no instant, in the order of the offers' time stamps nor in the log's sequence,
// does a package or an agent have two live offers; and the killed instance's agents have none
// from deadInstanceBound after the kill until their page is back on a live instance.
func (r *warmRun) auditOffers(ctx context.Context, db *pgxpool.Pool, a *warmAudit, agentEmails []string) error {
	rows, err := db.Query(ctx, `
		SELECT e.seq, e.at, e.kind = 'offered', h.handoff_id, e.subject_user
		FROM events e JOIN handoffs h ON h.id = e.handoff_id
		WHERE e.kind IN ('offered', 'offer_ended') ORDER BY e.seq`)
	if err != nil {
		return err
	}
	evs, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (offerEvent, error) {
		var e offerEvent
		return e, row.Scan(&e.seq, &e.at, &e.started, &e.pkg, &e.agent)
	})
	if err != nil {
		return err
	}
	bySeq := evs
	byTime := slices.Clone(evs)
	slices.SortStableFunc(byTime, func(x, y offerEvent) int { return cmp.Or(x.at.Compare(y.at), cmp.Compare(x.seq, y.seq)) })
	var samples []string
	a.offers, a.overlapsBySeq, samples = offerOverlaps(bySeq)
	for _, s := range samples {
		a.sample("by sequence: %s", s)
	}
	_, a.overlapsByTime, samples = offerOverlaps(byTime)
	for _, s := range samples {
		a.sample("by time: %s", s)
	}

	ids := map[int64]int{}
	rows, err = db.Query(ctx, `SELECT id, email FROM users WHERE email = ANY($1)`, agentEmails)
	if err != nil {
		return err
	}
	var uid int64
	var email string
	if _, err := pgx.ForEachRow(rows, []any{&uid, &email}, func() error {
		ids[uid] = slices.Index(agentEmails, email)
		return nil
	}); err != nil {
		return err
	}
	killAt := time.Unix(0, r.killAt.Load())
	r.mu.Lock()
	dead, back := killedAgents(r.connections, killAt)
	r.mu.Unlock()
	byAgent := map[int64]time.Time{}
	for uid, i := range ids {
		if dead[i] {
			byAgent[uid] = back[i]
		}
	}
	d := deadRings(offerSpans(bySeq), killAt, byAgent)
	a.deadAgents, a.deadViolations, a.deadRings, a.deadWithdrawn, a.deadLastEnd = len(byAgent), d.violations, d.rings, d.atKill, d.lastEnd
	for _, s := range d.samples {
		a.sample("%s", s)
	}
	return nil
}

// offerOverlaps replays offer starts and ends in the order given and counts the events that
// break "one live offer per package and one per agent": a start while the package or the agent
// has a live offer, and an end that matches no live offer.
func offerOverlaps(evs []offerEvent) (offers, violations int, samples []string) {
	byPkg := map[string]int64{}
	byAgent := map[int64]string{}
	bad := func(format string, args ...any) {
		violations++
		if len(samples) < maxSamples {
			samples = append(samples, fmt.Sprintf(format, args...))
		}
	}
	for _, e := range evs {
		if e.started {
			offers++
			switch {
			case byPkg[e.pkg] != 0:
				bad("%s rang user %d at %s while it rang user %d", e.pkg, e.agent, e.at.Format(time.StampMicro), byPkg[e.pkg])
			case byAgent[e.agent] != "":
				bad("user %d was rung for %s at %s while %s rang them", e.agent, e.pkg, e.at.Format(time.StampMicro), byAgent[e.agent])
			}
			byPkg[e.pkg], byAgent[e.agent] = e.agent, e.pkg
			continue
		}
		if byPkg[e.pkg] != e.agent {
			bad("%s's offer to user %d ended at %s, but it had no such live offer", e.pkg, e.agent, e.at.Format(time.StampMicro))
		}
		if byPkg[e.pkg] == e.agent {
			delete(byPkg, e.pkg)
		}
		if byAgent[e.agent] == e.pkg {
			delete(byAgent, e.agent)
		}
	}
	return offers, violations, samples
}

// offerSpans pairs each offered row with the offer_ended row of its package that follows it in
// the log.
func offerSpans(evs []offerEvent) []offerSpan {
	var spans []offerSpan
	open := map[string]int{}
	for _, e := range evs {
		if e.started {
			open[e.pkg] = len(spans)
			spans = append(spans, offerSpan{agent: e.agent, pkg: e.pkg, from: e.at})
			continue
		}
		if i, ok := open[e.pkg]; ok && spans[i].agent == e.agent {
			spans[i].to = e.at
			delete(open, e.pkg)
		}
	}
	return spans
}

// killedAgents are the agents whose page was on the killed instance when it died (the last socket
// they opened before the kill was there), and when each began to open one again: on the instance
// started again, or on another.
func killedAgents(conns []connection, killAt time.Time) (dead map[int]bool, back map[int]time.Time) {
	last := map[int]connection{}
	back = map[int]time.Time{}
	for _, c := range conns {
		if !c.began.After(killAt) {
			if l, ok := last[c.agent]; !ok || c.began.After(l.began) {
				last[c.agent] = c
			}
		} else if b, ok := back[c.agent]; !ok || c.began.Before(b) {
			back[c.agent] = c.began
		}
	}
	dead = map[int]bool{}
	for agent, c := range last {
		if c.instance == killedInstance {
			dead[agent] = true
		}
	}
	return dead, back
}

// deadCheck is what deadRings found.
type deadCheck struct {
	violations, rings, atKill int
	lastEnd                   time.Duration
	samples                   []string
}

// deadRings looks at the offers of the agents of the killed instance (agent → when their page
// began to come back; zero: never): none may be live from deadInstanceBound after the kill until
// then. It counts the agents with one that is, the offers live at any time between the kill and
// their return, those of them live at the kill, and when the last of them ended.
func deadRings(spans []offerSpan, killAt time.Time, back map[int64]time.Time) deadCheck {
	var d deadCheck
	bound := killAt.Add(deadInstanceBound)
	bad := map[int64]bool{}
	for _, s := range spans {
		returned, dead := back[s.agent]
		if !dead {
			continue
		}
		beforeReturn := returned.IsZero() || s.from.Before(returned)
		if !beforeReturn || (!s.to.IsZero() && !s.to.After(killAt)) {
			continue
		}
		d.rings++
		if !s.from.After(killAt) {
			d.atKill++
		}
		if s.to.IsZero() || s.to.After(bound) {
			bad[s.agent] = true
			if len(d.samples) < maxSamples {
				d.samples = append(d.samples, fmt.Sprintf("user %d of the killed instance was rung for %s from +%s to %s after the kill (back at %s)",
					s.agent, s.pkg, seconds(s.from.Sub(killAt)), endAfter(s.to, killAt), endAfter(returned, killAt)))
			}
			continue
		}
		d.lastEnd = max(d.lastEnd, s.to.Sub(killAt))
	}
	d.violations = len(bad)
	return d
}

func endAfter(t, killAt time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return "+" + seconds(t.Sub(killAt))
}

// auditWarmEnds: every warm package's bot heard exactly one end of its warm phase, and no package
// is still warm. The end is a warm_timeout, or, when there is none, an accepted: an accepted after
// a warm_timeout is the package taken later, as a cold one (the spec: "the package waits as a
// cold one"), and tells every bot, warm or cold, of the accept. So the bot hears at most one
// warm_timeout, at most one accepted, and never an accepted before a warm_timeout (by the
// events' occurred_at; each event once however often it was delivered).
func auditWarmEnds(ctx context.Context, db *pgxpool.Pool, a *warmAudit, arrivals []arrival) error {
	rows, err := db.Query(ctx, `
		SELECT h.handoff_id, h.warm_until IS NOT NULL OR EXISTS (SELECT 1 FROM offers o WHERE o.handoff_id = h.id AND o.ended_at IS NULL)
		FROM handoffs h WHERE h.package->>'transfer_mode' = 'warm'`)
	if err != nil {
		return err
	}
	warm := map[string]bool{}
	var id string
	var still bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &still}, func() error {
		warm[id] = still
		return nil
	}); err != nil {
		return err
	}
	heard := warmEndsHeard(arrivals)
	a.warmPackages = len(warm)
	for id, still := range warm {
		end, ok := warmPhaseEnd(heard[id])
		if ok {
			a.ends[end]++
		}
		if len(heard[id]) == 2 && ok {
			a.ends["accepted later, cold"]++
		}
		if still {
			a.stillWarm++
		}
		if !ok || still {
			a.warmViolations++
			a.sample("warm package %s: its bot heard %v; still warm at the end: %t", id, heard[id], still)
		}
	}
	return nil
}

// warmEndsHeard is, per package, the accepted and warm_timeout events its bot heard, in the
// order they happened, each once however often it was delivered: accepted, or
// warm_timeout:reason.
func warmEndsHeard(arrivals []arrival) map[string][]string {
	seen := map[string]bool{}
	var kept []arrival
	for _, h := range arrivals {
		if !seen[h.eventID] && (h.event == "accepted" || h.event == "warm_timeout") {
			seen[h.eventID] = true
			kept = append(kept, h)
		}
	}
	slices.SortStableFunc(kept, func(x, y arrival) int { return x.occurred.Compare(y.occurred) })
	heard := map[string][]string{}
	for _, h := range kept {
		end := h.event
		if h.event == "warm_timeout" {
			end += ":" + h.reason
		}
		heard[h.handoffID] = append(heard[h.handoffID], end)
	}
	return heard
}

// warmPhaseEnd is how a warm package's warm phase ended, from what its bot heard of it in order,
// and whether that is exactly one end: one warm_timeout, or one accepted, or a warm_timeout then
// the accepted of the package taken cold.
func warmPhaseEnd(heard []string) (string, bool) {
	switch {
	case len(heard) == 1:
		return heard[0], true
	case len(heard) == 2 && strings.HasPrefix(heard[0], "warm_timeout") && heard[1] == "accepted":
		return heard[0], true
	}
	return "", false
}

// approvalEnds are the events that end a request.
var approvalEnds = []string{"approval_granted", "approval_denied", "approval_expired", "approval_withdrawn"}

// auditApprovals: every request ended, with exactly one ending in the log and one webhook of it
// heard, and every decision a supervisor was told of is the request's ending, theirs.
func (r *warmRun) auditApprovals(ctx context.Context, db *pgxpool.Pool, a *warmAudit, supervisorEmails []string, arrivals []arrival) error {
	rows, err := db.Query(ctx, `SELECT a.id, a.state, coalesce(d.email, '') FROM approvals a LEFT JOIN users d ON d.id = a.decided_by`)
	if err != nil {
		return err
	}
	type row struct{ state, decider string }
	approvals := map[int64]row{}
	var id int64
	var state, decider string
	if _, err := pgx.ForEachRow(rows, []any{&id, &state, &decider}, func() error {
		approvals[id] = row{state, decider}
		return nil
	}); err != nil {
		return err
	}
	rows, err = db.Query(ctx, `
		SELECT (detail->>'approval_id')::bigint, count(*) FROM events WHERE kind = ANY($1) GROUP BY 1`, approvalEnds)
	if err != nil {
		return err
	}
	logged := map[int64]int{}
	var n int
	if _, err := pgx.ForEachRow(rows, []any{&id, &n}, func() error {
		logged[id] = n
		return nil
	}); err != nil {
		return err
	}
	hooks := map[int64]int{}
	seen := map[string]bool{}
	for _, h := range arrivals {
		if !seen[h.eventID] && slices.Contains(approvalEnds, h.event) {
			seen[h.eventID] = true
			hooks[h.approvalID]++
		}
	}
	a.approvals = len(approvals)
	for id, ap := range approvals {
		a.states[ap.state]++
		if ap.state == "pending" || logged[id] != 1 {
			a.approvalLog++
			a.approvalBad[id] = true
			a.sample("approval %d is %s with %d endings in the log", id, ap.state, logged[id])
		}
		if hooks[id] != 1 {
			a.approvalHooks++
			a.approvalBad[id] = true
			a.sample("approval %d (%s): its bot heard %d endings", id, ap.state, hooks[id])
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	want := map[string]string{"approve": "granted", "deny": "denied"}
	for id, d := range r.decidedBy {
		if ap := approvals[id]; ap.state != want[d.verdict] || ap.decider != supervisorEmails[d.supervisor] {
			a.approvalTold++
			a.approvalBad[id] = true
			a.sample("approval %d: %s was told they could %s it; it is %s by %q", id, supervisorEmails[d.supervisor], d.verdict, ap.state, ap.decider)
		}
	}
	if r.doubleDecid > 0 {
		a.approvalTold += r.doubleDecid
		a.approvalBad[-1] = true
		a.sample("%d approvals two supervisors were both told they decided", r.doubleDecid)
	}
	return nil
}
