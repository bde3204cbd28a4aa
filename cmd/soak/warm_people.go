package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// What agents do with a ring, and with what they hold. The rest of the rings they let run out.
const (
	acceptShare  = 0.45
	declineShare = 0.3
	refundShare  = 0.4 // of the packages an agent holds, those whose refund they ask a supervisor for
	// breakShare of the packages an agent resolves are followed by a break of about breakFor: the
	// desk withdraws a ring they have, and rings them no more until they are available again.
	breakShare = 0.1
	breakFor   = 3 * time.Second
	// workFor is how long an agent works a package before its next step.
	workFor = 2 * time.Second
	// pollEvery is how often an agent waiting for a supervisor looks at the package's page, and how
	// often an idle agent looks again for a cold package.
	pollEvery = 500 * time.Millisecond
	// noticeAfter is how long a person takes to notice the desk set them away.
	noticeAfter = 300 * time.Millisecond
	// A page whose socket ended dials again after 250 ms, doubling, as desk.js does, but to 2 s
	// rather than 10 s, so that the figures are not the backoff's.
	firstPageBackoff = 250 * time.Millisecond
	maxPageBackoff   = 2 * time.Second
	// socketIdle is how long a socket may stay silent: the desk pings every 54 s.
	socketIdle = 2 * time.Minute
	// decideSpread is how far apart the supervisors decide the same request.
	decideSpread = 100 * time.Millisecond
)

var (
	ringCard    = regexp.MustCompile(`data-testid="ring" data-handoff="([^"]+)"`)
	setAwayCard = regexp.MustCompile(`data-testid="set-away"`)
	approvalRow = regexp.MustCompile(`data-approval="(\d+)"`)
	decisionTag = regexp.MustCompile(`data-testid="approval-decision" data-state="(\w+)"`)
	pendingLine = regexp.MustCompile(`data-testid="approval-line" data-state="pending"`)
)

// page is one browser tab of the desk: its session, the instance it is on, and its websocket,
// which the tab keeps open, dialing again when it ends, and reading the page afresh each time,
// as a reload does.
type page struct {
	r      *warmRun
	token  string
	query  string // what the socket watches
	path   string // the page the socket belongs to
	on     atomic.Int32
	mover  bool // when its instance dies: to another instance after -warm-move, rather than waiting for it
	agent  int  // the agent whose page it is, -1 for a supervisor's
	show   func(ctx context.Context, html string)
	connMu sync.Mutex
	conn   *websocket.Conn
}

// instance is the instance the tab is on now: its own, or, once that has been dead -warm-move, the
// next, as a load balancer that noticed would send it there. Only one instance is ever killed.
func (p *page) instance() int {
	on := int(p.on.Load())
	if killed, down := p.r.down(on); down && p.mover && time.Since(killed) >= p.r.cfg.warmMove {
		on = (on + 1) % warmInstances
		p.on.Store(int32(on)) //nolint:gosec // G115: an instance's index.
	}
	return on
}

func (p *page) base() string { return p.r.apps[p.instance()].base }

// keepOpen holds the tab's socket open until ctx is done.
func (p *page) keepOpen(ctx context.Context) {
	stop := context.AfterFunc(ctx, p.hangUp)
	defer stop()
	backoff := firstPageBackoff
	for ctx.Err() == nil {
		on := p.instance()
		began := time.Now()
		conn, err := p.r.s.dialSocket(ctx, p.r.apps[on].base, p.token, p.query)
		if err != nil {
			p.r.tally.add(p.r.phases.at(time.Now()), "socket: "+answer{err: err}.kind())
			_ = loadtest.Sleep(ctx, jitter(backoff)) // a cancelled sleep ends the loop
			backoff = min(2*backoff, maxPageBackoff)
			continue
		}
		backoff = firstPageBackoff
		p.connMu.Lock()
		p.conn = conn
		p.connMu.Unlock()
		if ctx.Err() != nil {
			p.hangUp()
			return
		}
		if p.agent >= 0 {
			p.r.connected(p.agent, on, began)
		}
		p.reload(ctx)
		p.read(ctx, conn)
	}
}

// reload reads the tab's page, as a reload shows it.
func (p *page) reload(ctx context.Context) {
	status, html, err := p.r.s.page(ctx, p.base(), p.path, p.token)
	if err == nil && status == http.StatusOK {
		p.show(ctx, html)
	}
}

// read applies the socket's frames until it ends, or says the page must be loaded afresh.
func (p *page) read(ctx context.Context, conn *websocket.Conn) {
	defer func() { _ = conn.Close() }() // the socket is done with either way
	for {
		_ = conn.SetReadDeadline(time.Now().Add(socketIdle))
		var f socketFrame
		if err := conn.ReadJSON(&f); err != nil || f.Type == "reload" || f.Type == "error" {
			return
		}
		for _, fr := range f.Fragments {
			if fr.Target == "ring" || fr.Target == "approvals" {
				p.show(ctx, fr.HTML)
			}
		}
	}
}

func (p *page) hangUp() {
	p.connMu.Lock()
	defer p.connMu.Unlock()
	if p.conn != nil {
		_ = p.conn.Close() // ends the read
	}
}

// post sends a form from the tab to the instance it is on, again while no instance answers (a
// dead one, or one whose database is down: 503), until the desk answers or ctx ends. ambiguous
// says whether an earlier try may have reached the desk: its answer, not its effect, was lost.
func (p *page) post(ctx context.Context, action, path string, values url.Values) (a answer, ambiguous bool) {
	for ctx.Err() == nil {
		reqCtx, cancel := context.WithTimeout(ctx, pageTimeout)
		a = p.r.s.form(reqCtx, p.base(), path, p.token, values)
		cancel()
		p.r.tally.add(p.r.phases.at(time.Now()), action+" "+a.kind())
		switch {
		case ctx.Err() != nil:
		case a.err != nil:
			ambiguous = ambiguous || !strings.Contains(a.err.Error(), "connection refused")
			_ = loadtest.Sleep(ctx, jitter(100*time.Millisecond)) // a cancelled sleep ends the loop
		case a.status == http.StatusServiceUnavailable:
			_ = loadtest.Sleep(ctx, jitter(250*time.Millisecond)) // a cancelled sleep ends the loop
		default:
			return a, ambiguous
		}
	}
	return a, ambiguous
}

// deskAgent is an agent's browser: one desk page, whose ring slot shows the package that rings
// them, and their hands: answering rings, pulling cold packages with Next, working what they hold
// and asking a supervisor to approve some refunds.
type deskAgent struct {
	*page
	i   int
	rng *rand.Rand

	mu      sync.Mutex
	ringing string // the package the page shows ringing, "" for none
	setAway bool   // the page shows that the desk set the agent away
	changed chan struct{}

	// The worker's own.
	answered map[string]bool
	held     []*heldPackage
	nextPull time.Time
}

// heldPackage is a package in the agent's hands and where its work stands.
type heldPackage struct {
	id        string
	due       time.Time // its next step
	refund    bool      // the agent asks a supervisor for its refund
	awaiting  bool      // the request is pending
	ambiguous bool      // the accept's answer was lost: resolving tells whether it is the agent's
}

// newAgent logs the agent in on their instance (a third of the agents on each); those of the
// instance the run kills alternate between moving elsewhere and waiting for it.
func (r *warmRun) newAgent(ctx context.Context, i int, email string) (*deskAgent, error) {
	home := i % warmInstances
	token, err := r.s.login(ctx, r.apps[home].base, email)
	if err != nil {
		return nil, err
	}
	a := &deskAgent{i: i, rng: r.seed(), changed: make(chan struct{}, 1), answered: map[string]bool{}}
	a.page = &page{r: r, token: token, query: "queues=" + warmQueue, path: "/queues/" + warmQueue,
		mover: (i/warmInstances)%2 == 0, agent: i, show: a.show}
	a.on.Store(int32(home)) //nolint:gosec // G115: an instance's index.
	return a, nil
}

// show takes what the page shows of the ring slot.
func (a *deskAgent) show(_ context.Context, html string) {
	ringing := ""
	if m := ringCard.FindStringSubmatch(html); m != nil {
		ringing = m[1]
	}
	a.mu.Lock()
	a.ringing, a.setAway = ringing, setAwayCard.MatchString(html)
	a.mu.Unlock()
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

func (a *deskAgent) seen() (ringing string, setAway bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ringing, a.setAway
}

func (a *deskAgent) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { a.keepOpen(ctx) })
	a.work(ctx)
	wg.Wait()
}

// work is the agent: available, then each moment the first of answering a ring, working a
// package whose next step is due, or pulling a cold package when they have room for it and one
// more, so that they can still be rung.
func (a *deskAgent) work(ctx context.Context) {
	a.post(ctx, "status", "/me/status", url.Values{"status": {"available"}, "next": {a.path}})
	for ctx.Err() == nil {
		ringing, setAway := a.seen()
		switch {
		case setAway:
			_ = loadtest.Sleep(ctx, jitter(noticeAfter)) // a cancelled sleep ends the loop
			if ans, _ := a.post(ctx, "status", "/me/status", url.Values{"status": {"available"}, "next": {a.path}}); ans.status == http.StatusSeeOther {
				a.r.count("set away, back", 1)
				a.reload(ctx) // the form's redirect loads the page again
			}
		case ringing != "" && !a.answered[ringing]:
			a.answer(ctx, ringing)
		case a.due() != nil:
			a.step(ctx, a.due())
		case !a.r.draining.Load() && len(a.held) < max(a.r.cfg.warmCapacity-1, 1) && !time.Now().Before(a.nextPull):
			a.pull(ctx)
		default:
			select {
			case <-ctx.Done():
			case <-a.changed:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
}

// answer does what the agent chose with a ring: accept it, decline it or let it run out.
func (a *deskAgent) answer(ctx context.Context, id string) {
	a.answered[id] = true
	a.r.count("rings shown", 1)
	switch c := a.rng.Float64(); {
	case c < acceptShare:
		ans, ambiguous := a.post(ctx, "ring accept", "/handoffs/"+id+"/accept", nil)
		switch {
		case ans.status == http.StatusSeeOther:
			a.r.count("ring accepted", 1)
			a.took(id, false)
		case ambiguous:
			a.took(id, true)
		case ans.status == http.StatusConflict:
			a.r.count("ring accept refused", 1) // the ring ended as the agent clicked
		case ctx.Err() == nil:
			a.r.errs.Add(fmt.Errorf("ring accept %s: %s", id, ans.kind()))
		}
	case c < acceptShare+declineShare:
		ans, _ := a.post(ctx, "decline", "/handoffs/"+id+"/decline", url.Values{"next": {a.path}})
		if ans.status == http.StatusSeeOther {
			a.r.count("ring declined", 1)
		}
	default:
		a.r.count("ring let run out", 1)
	}
}

// pull takes the next package with Next and accepts it.
func (a *deskAgent) pull(ctx context.Context) {
	ans, _ := a.post(ctx, "next", "/queues/"+warmQueue+"/next", nil)
	id, ok := strings.CutPrefix(ans.location, "/handoffs/")
	switch {
	case ans.status == http.StatusSeeOther && ok:
		acc, ambiguous := a.post(ctx, "accept", "/handoffs/"+id+"/accept", nil)
		switch {
		case acc.status == http.StatusSeeOther:
			a.r.count("next accepted", 1)
			a.took(id, false)
		case ambiguous:
			a.took(id, true)
		case acc.status == http.StatusConflict:
			// The reservation ran out while a kill held the answer, and someone else has it now.
		case ctx.Err() == nil:
			a.r.errs.Add(fmt.Errorf("accept %s after next: %s", id, acc.kind()))
		}
	case ans.status == http.StatusNotFound, ans.status == http.StatusConflict:
		a.nextPull = time.Now().Add(jitter(pollEvery)) // nothing waits, or no room: look again later
	case ctx.Err() == nil:
		a.r.errs.Add(fmt.Errorf("next: %s", ans.kind()))
		a.nextPull = time.Now().Add(jitter(pollEvery))
	}
}

func (a *deskAgent) took(id string, ambiguous bool) {
	if !ambiguous {
		a.r.accepted(id, a.i)
	}
	a.held = append(a.held, &heldPackage{id: id, due: time.Now().Add(jitter(workFor)), refund: a.rng.Float64() < refundShare, ambiguous: ambiguous})
}

// due is the first held package whose next step is due.
func (a *deskAgent) due() *heldPackage {
	now := time.Now()
	for _, h := range a.held {
		if !now.Before(h.due) {
			return h
		}
	}
	return nil
}

func (a *deskAgent) drop(h *heldPackage) {
	for i, x := range a.held {
		if x == h {
			a.held = append(a.held[:i], a.held[i+1:]...)
			return
		}
	}
}

// step takes a held package one step on: an accept whose answer was lost is resolved, which
// tells whether it was the agent's; a refund is asked for, and its page looked at until a
// supervisor decided or the request expired; then the package is resolved, as refunded if granted.
func (a *deskAgent) step(ctx context.Context, h *heldPackage) {
	switch {
	case h.ambiguous:
		if ans, _ := a.post(ctx, "resolve", "/handoffs/"+h.id+"/resolve", url.Values{"code": {"solved"}}); ans.status == http.StatusSeeOther {
			a.r.accepted(h.id, a.i)
			a.r.mu.Lock()
			a.r.lateCommits++
			a.r.mu.Unlock()
		}
		a.drop(h)
	case h.awaiting:
		status, html, err := a.r.s.page(ctx, a.base(), "/handoffs/"+h.id, a.token)
		switch m := decisionTag.FindStringSubmatch(html); {
		case err != nil || status != http.StatusOK:
			h.due = time.Now().Add(pollEvery) // the instance or its database is down: look again
		case m != nil:
			a.r.count("approval "+m[1]+" seen", 1)
			a.resolve(ctx, h, m[1] == "granted")
		case pendingLine.MatchString(html):
			h.due = time.Now().Add(jitter(pollEvery))
		default:
			a.resolve(ctx, h, false) // a request whose answer was lost never committed
		}
	case h.refund:
		ans, ambiguous := a.post(ctx, "approval", "/handoffs/"+h.id+"/approval", url.Values{"note": {"Duplicate charge; policy §4.2"}})
		switch {
		case ans.status == http.StatusSeeOther, ans.status == http.StatusConflict && ambiguous:
			h.awaiting, h.due = true, time.Now().Add(jitter(pollEvery))
		case ctx.Err() == nil:
			a.r.errs.Add(fmt.Errorf("request approval %s: %s", h.id, ans.kind()))
			a.resolve(ctx, h, false)
		}
	default:
		a.resolve(ctx, h, false)
	}
}

// resolve closes a held package: as refunded when a supervisor granted its refund.
func (a *deskAgent) resolve(ctx context.Context, h *heldPackage, refunded bool) {
	code, counted := "solved", "resolved"
	if refunded {
		code, counted = "refunded", "resolved refunded"
	}
	ans, ambiguous := a.post(ctx, "resolve", "/handoffs/"+h.id+"/resolve", url.Values{"code": {code}})
	switch {
	case ans.status == http.StatusSeeOther, ans.status == http.StatusConflict && ambiguous:
		a.r.count(counted, 1)
	case ctx.Err() == nil:
		a.r.errs.Add(fmt.Errorf("resolve %s as %s: %s", h.id, code, ans.kind()))
	}
	a.drop(h)
	if a.rng.Float64() < breakShare {
		a.takeBreak(ctx)
	}
}

// takeBreak is a short break: the agent says so, and says they are available again after it.
func (a *deskAgent) takeBreak(ctx context.Context) {
	if ans, _ := a.post(ctx, "status", "/me/status", url.Values{"status": {"break"}, "next": {a.path}}); ans.status != http.StatusSeeOther {
		return
	}
	a.r.count("breaks", 1)
	_ = loadtest.Sleep(ctx, jitter(breakFor)) // a cancelled sleep ends the loop
	a.post(ctx, "status", "/me/status", url.Values{"status": {"available"}, "next": {a.path}})
	a.reload(ctx)
}

// deskSupervisor is a supervisor's /approvals page, live, on an instance the run does not kill.
// Each request it shows is granted, denied or left to expire, by its id, at a time spread over
// the approval timeout from when it showed; every supervisor decides the same requests the same
// way at about the same time, so their decisions race each other, and those that come late race
// the expiry.
type deskSupervisor struct {
	*page
	i    int
	seen map[int64]bool
	mu   sync.Mutex
	wg   sync.WaitGroup
}

func (r *warmRun) newSupervisor(ctx context.Context, i int, email string) (*deskSupervisor, error) {
	on := i % killedInstance
	token, err := r.s.login(ctx, r.apps[on].base, email)
	if err != nil {
		return nil, err
	}
	sv := &deskSupervisor{i: i, seen: map[int64]bool{}}
	sv.page = &page{r: r, token: token, query: "approvals=true", path: "/approvals", agent: -1, show: sv.show}
	sv.on.Store(int32(on)) //nolint:gosec // G115: an instance's index.
	return sv, nil
}

func (sv *deskSupervisor) run(ctx context.Context) {
	sv.keepOpen(ctx)
	sv.wg.Wait()
}

// show schedules a decision for each request the page shows for the first time, until ctx ends.
func (sv *deskSupervisor) show(ctx context.Context, html string) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	for _, m := range approvalRow.FindAllStringSubmatch(html, -1) {
		id, err := strconv.ParseInt(m[1], 10, 64)
		if err != nil || sv.seen[id] {
			continue
		}
		sv.seen[id] = true
		verdict, after := approvalPlan(id, sv.r.cfg.warmApproval)
		if verdict == "" {
			continue
		}
		// Within a tenth of a second of each other: the supervisors' decisions race for the row.
		after += time.Duration(rand.Int64N(int64(decideSpread))) //nolint:gosec // G404: the soak's choices need no secure randomness.
		sv.wg.Go(func() {
			if loadtest.Sleep(ctx, after) == nil {
				sv.decide(ctx, id, verdict)
			}
		})
	}
}

func (sv *deskSupervisor) decide(ctx context.Context, id int64, verdict string) {
	ans, ambiguous := sv.post(ctx, "decide", fmt.Sprintf("/approvals/%d/%s", id, verdict), url.Values{"note": {"soak: " + verdict}})
	switch {
	case ans.status == http.StatusSeeOther:
		sv.r.decided(id, sv.i, verdict)
	case ans.status == http.StatusConflict && ambiguous:
		// The lost answer may have been this supervisor's own decision: the log tells.
	case ans.status == http.StatusConflict:
		sv.r.count("decision refused", 1)
	case ctx.Err() == nil:
		sv.r.errs.Add(fmt.Errorf("%s approval %d: %s", verdict, id, ans.kind()))
	}
}

// approvalPlan is what the supervisors do with request id: approve two in three and deny the
// rest of those, or leave it to expire (""), and after how long: spread over 0.3 to 1.2 of the
// approval timeout, so that about a fifth of the decisions come once the request expired.
func approvalPlan(id int64, timeout time.Duration) (verdict string, after time.Duration) {
	switch id % 3 {
	case 0:
		verdict = "approve"
	case 1:
		verdict = "deny"
	}
	spread := math.Mod(float64(id)*0.6180339887, 1) // the golden ratio's steps cover the range evenly
	return verdict, time.Duration((0.3 + 0.9*spread) * float64(timeout))
}
