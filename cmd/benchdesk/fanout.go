package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// fanoutResult is scenarios 2 and 3: thousands of sockets on one instance, one event at a time
// (one package posted to that instance), and the time until the last socket has its card;
// against the same number of sockets on the bare gorilla server broadcasting a frame of the same
// size. The memory figures are taken around opening the sockets, idle.
type fanoutResult struct {
	sockets, users, events int
	frameBytes             int
	desk, bare             side
	deskPost               []time.Duration // sorted intake POST answers
}

// side is one server's figures.
type side struct {
	last, first      []time.Duration // per event, sorted
	spread           []time.Duration // per event, sorted: last minus first arrival, the fan-out alone
	missing, lost    int
	before, idle     memSnap
	afterEvents      memSnap
	dialed           time.Duration
	connectedSockets int
}

// arrived counts what the sockets received of the event key sent at sent; a recorded event (not
// the warm-up) adds its arrival times.
func (s *side) arrived(reply farmReply, key string, sent time.Time, recorded bool) {
	last, first, missing := spread(reply.Arrivals[key], sent.UnixNano())
	s.missing += missing
	s.lost = reply.Lost
	if recorded {
		s.last, s.first = append(s.last, last), append(s.first, first)
		s.spread = append(s.spread, last-first)
	}
}

// perSocket is the idle server-side cost of one socket: (HeapInuse+StackInuse) after opening
// them minus before, divided by their number.
func (s side) perSocket(n int) float64 {
	return (float64(s.idle.inuse()) - float64(s.before.inuse())) / float64(n)
}

func (s side) rssPerSocket(n int) float64 {
	return (float64(s.idle.rss) - float64(s.before.rss)) / float64(n)
}

// idleWait lets the sockets go quiet before the idle snapshot: the desk's presence flush
// (coalesced over 200ms) and the handshake's garbage are behind it.
const idleWait = 2 * time.Second

// eventGap separates two events, so each one is measured alone.
const eventGap = 200 * time.Millisecond

func (b *bench) fanout(ctx context.Context, out io.Writer, res *result) (*fanoutResult, error) {
	cfg := b.cfg
	r := &fanoutResult{sockets: cfg.fanoutSockets, users: min(cfg.users, cfg.fanoutSockets), events: cfg.fanoutEvents}

	// Desk: sockets on B, packages posted to B, so the figure is the fan-out, not the NOTIFY hop (1).
	settle(ctx)
	r.desk.before = snapshot()
	t0 := time.Now()
	if err := b.farm.dialDesk(b.b.url, queueFanout, b.session[:r.users], r.sockets); err != nil {
		return nil, err
	}
	r.desk.dialed = time.Since(t0)
	if err := loadtest.SleepUntil(ctx, time.Now().Add(idleWait)); err != nil {
		return nil, err
	}
	r.desk.idle = snapshot()
	if cfg.memProfile != "" {
		if err := writeHeapProfile(cfg.memProfile); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(out, "  desk: %d sockets on B (%d agents × %d) ready in %s; server %s\n",
		r.sockets, r.users, (r.sockets+r.users-1)/r.users, r.desk.dialed.Round(time.Millisecond), r.desk.growth(r.sockets))
	var sizes []int
	var posts []time.Duration
	errs := &loadtest.ErrorLog{}
	for i := range r.events + 1 { // event 0 warms up and is not recorded
		id := handoffID("fanout", i)
		body, err := b.bodyFor(queueFanout, id)
		if err != nil {
			return nil, err
		}
		t := time.Now()
		if err := b.post(ctx, b.b.url, body); err != nil {
			errs.Add(err)
			continue
		}
		post := time.Since(t)
		reply, err := b.farm.collect([]string{id}, cfg.collectTimeout)
		if err != nil {
			return nil, err
		}
		r.desk.arrived(reply, id, t, i > 0)
		if i > 0 {
			posts = append(posts, post)
			sizes = append(sizes, reply.Sizes[id])
		}
		if err := loadtest.SleepUntil(ctx, time.Now().Add(eventGap)); err != nil {
			return nil, err
		}
	}
	r.desk.afterEvents = snapshot()
	r.desk.last, r.desk.first, r.desk.spread, r.deskPost = sorted(r.desk.last), sorted(r.desk.first), sorted(r.desk.spread), sorted(posts)
	r.frameBytes = loadtest.Median(sizes)
	if _, err := b.farm.closeSockets(); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  desk: %d events, frame %d bytes: last arrival median %s p99 %s; first arrival median %s; POST median %s\n",
		len(r.desk.last), r.frameBytes, loadtest.Millis(loadtest.Median(r.desk.last)), loadtest.Millis(loadtest.Percentile(r.desk.last, 99)), loadtest.Millis(loadtest.Median(r.desk.first)), loadtest.Millis(loadtest.Median(r.deskPost)))

	// Bare gorilla: the same number of sockets, the same frame size, the same client.
	settle(ctx)
	r.bare.before = snapshot()
	t0 = time.Now()
	if err := b.farm.dialBare(b.bare.url, r.sockets); err != nil {
		return nil, err
	}
	r.bare.dialed = time.Since(t0)
	if err := loadtest.SleepUntil(ctx, time.Now().Add(idleWait)); err != nil {
		return nil, err
	}
	r.bare.idle = snapshot()
	r.bare.connectedSockets = b.bare.connections()
	fmt.Fprintf(out, "  bare: %d sockets ready in %s; server %s\n", r.sockets, r.bare.dialed.Round(time.Millisecond), r.bare.growth(r.sockets))
	size := r.frameBytes
	if size == 0 {
		size = 3000 // no desk event arrived; the failure is reported, the baseline still runs
	}
	for i := range r.events + 1 {
		key := fmt.Sprintf("bare_%06d", i)
		msg := bareFrame(key, size)
		t := time.Now()
		b.bare.broadcast(msg)
		reply, err := b.farm.collect([]string{key}, cfg.collectTimeout)
		if err != nil {
			return nil, err
		}
		r.bare.arrived(reply, key, t, i > 0)
		if err := loadtest.SleepUntil(ctx, time.Now().Add(eventGap)); err != nil {
			return nil, err
		}
	}
	r.bare.afterEvents = snapshot()
	r.bare.last, r.bare.first, r.bare.spread = sorted(r.bare.last), sorted(r.bare.first), sorted(r.bare.spread)
	if _, err := b.farm.closeSockets(); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  bare: %d broadcasts of %d bytes: last arrival median %s p99 %s; first arrival median %s\n",
		len(r.bare.last), size, loadtest.Millis(loadtest.Median(r.bare.last)), loadtest.Millis(loadtest.Percentile(r.bare.last, 99)), loadtest.Millis(loadtest.Median(r.bare.first)))

	if errs.Count() > 0 {
		res.fail("2: %d intake POSTs failed, first: %q", errs.Count(), errs.Samples())
	}
	if r.desk.missing > 0 || r.desk.lost > 0 {
		res.fail("2: desk: %d (event, socket) cards never arrived within %s; %d sockets closed by the server", r.desk.missing, cfg.collectTimeout, r.desk.lost)
	}
	if r.bare.missing > 0 || r.bare.lost > 0 {
		res.fail("2: bare: %d (broadcast, socket) frames never arrived; %d sockets closed", r.bare.missing, r.bare.lost)
	}
	settle(ctx)
	return r, nil
}

// spread returns when the last and the first socket received a key, relative to sent (Unix ns),
// and how many never did.
func spread(arrivals []int64, sent int64) (last, first time.Duration, missing int) {
	var lo, hi int64
	for _, at := range arrivals {
		if at == 0 {
			missing++
			continue
		}
		if lo == 0 || at < lo {
			lo = at
		}
		hi = max(hi, at)
	}
	if hi == 0 {
		return 0, 0, missing
	}
	return time.Duration(hi - sent), time.Duration(lo - sent), missing
}

// bareFrame is a frame shaped like the desk's (one card upserted, the rest html) of exactly size
// bytes, so that the client scans it the same way.
func bareFrame(key string, size int) []byte {
	head := `{"type":"events","mark":"0","fragments":[{"target":"card-` + key + `","op":"upsert","list":"cards","sort":"0","html":"`
	const tail = `"}]}`
	pad := max(size-len(head)-len(tail), 0)
	return []byte(head + strings.Repeat("x", pad) + tail)
}

// growth describes what opening n idle sockets added to the server process.
func (s side) growth(n int) string {
	d := func(after, before uint64) float64 { return (float64(after) - float64(before)) / float64(n) }
	return fmt.Sprintf("per socket: heap in use %s (live objects %s), stacks %s, RSS %s, goroutines %.1f",
		kb(d(s.idle.heapInuse, s.before.heapInuse)), kb(d(s.idle.heapAlloc, s.before.heapAlloc)),
		kb(d(s.idle.stackInuse, s.before.stackInuse)), kb(d(s.idle.rss, s.before.rss)),
		float64(s.idle.goroutines-s.before.goroutines)/float64(n))
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path) //nolint:gosec // G304: the path is the operator's own -memprofile flag.
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		return errors.Join(err, f.Close())
	}
	return f.Close()
}

// kb formats bytes per socket.
func kb(bytes float64) string { return fmt.Sprintf("%.1f KB", bytes/1024) }
