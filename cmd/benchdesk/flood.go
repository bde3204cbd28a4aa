package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// floodResult is scenario 6: another agent's queue page while one agent floods the desk with
// searches, against the same page loop with nobody searching, in the same run.
type floodResult struct {
	packages, searchers int
	query               string
	quiet               []time.Duration // the other agent's page, sorted
	floods              []floodRun
	searchP50           time.Duration // a search answered 200, alone
	errors              loadtest.ErrorLog
}

// floodRun is the page during one flood: its searches refused with 429 are sent again after
// their Retry-After, as the desk's pages and a well-made script do, or at once, as a hostile
// script would.
type floodRun struct {
	atOnce  bool
	page    []time.Duration // sorted
	answers map[int]int     // the flooder's answers by status
}

func (f floodRun) retry() string {
	if f.atOnce {
		return "429 sent again at once"
	}
	return "429 sent again after its Retry-After"
}

// floodQuery is the shape that cost an agent most (issue #30: 667 ms at 100,000 packages against
// 12 ms for a supervisor): digits found in every package's contact phone, which an agent may not
// see, so each match is checked against the package as the agent sees it.
const floodQuery = "/packages?q=555"

// floodSettle is how long a flood runs before the page is timed.
const floodSettle = time.Second

// flood fills a queue, times another agent's page over it alone, then again while the first agent
// keeps cfg.floodSearchers searches in flight, twice: retrying a 429 after its Retry-After, then
// at once. Each flood lasts as long as the page loop, and at most floodLimit.
func (b *bench) flood(ctx context.Context, out io.Writer, res *result) (*floodResult, error) {
	cfg := b.cfg
	r := &floodResult{packages: cfg.floodPackages, searchers: cfg.floodSearchers, query: floodQuery}
	t0 := time.Now()
	if err := b.fill(ctx, queueFlood, "flood", r.packages); err != nil {
		return nil, err
	}
	if _, err := b.drainOutbox(ctx, time.Minute); err != nil {
		return nil, err
	}
	if err := b.analyze(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  %d packages queued by intake.Intake.Submit, outbox drained, ANALYZE, in %s\n", r.packages, time.Since(t0).Round(time.Millisecond))
	base, flooder, other := b.a.url, b.session[1], b.session[2]
	page := "/queues/" + queueFlood
	check := func([]byte) error { return nil }
	loop := func() ([]time.Duration, error) {
		if _, err := b.getLoop(ctx, base, page, other, 10, 1, check, &r.errors); err != nil { // warm-up
			return nil, err
		}
		return b.getLoop(ctx, base, page, other, cfg.floodRequests, 1, check, &r.errors)
	}
	var searches []time.Duration
	for range 5 {
		t := time.Now()
		status, _, err := b.get(ctx, base, floodQuery, flooder)
		if err != nil {
			return nil, err
		}
		if status != http.StatusOK {
			return nil, fmt.Errorf("GET %s alone: status %d", floodQuery, status)
		}
		searches = append(searches, time.Since(t))
	}
	r.searchP50 = loadtest.Percentile(sorted(searches), 50)
	var err error
	if r.quiet, err = loop(); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  quiet: the other agent's page, %d GETs one at a time: p50 %s p90 %s (%s alone, p50 of 5: %s)\n", len(r.quiet),
		loadtest.Millis(loadtest.Percentile(r.quiet, 50)), loadtest.Millis(loadtest.Percentile(r.quiet, 90)), floodQuery, loadtest.Millis(r.searchP50))
	for _, atOnce := range []bool{false, true} {
		f := floodRun{atOnce: atOnce, answers: map[int]int{}}
		if f.page, err = b.floodWhile(ctx, base, flooder, f, loop); err != nil {
			return nil, err
		}
		r.floods = append(r.floods, f)
		fmt.Fprintf(out, "  flood (%s): the same loop while agent 2 keeps %d searches %s in flight: p50 %s p90 %s; the flooder's answers by status: %v\n",
			f.retry(), r.searchers, floodQuery, loadtest.Millis(loadtest.Percentile(f.page, 50)), loadtest.Millis(loadtest.Percentile(f.page, 90)), f.answers)
	}
	if r.errors.Count() > 0 {
		res.fail("6: %d of the other agent's GETs failed, first: %q", r.errors.Count(), r.errors.Samples())
	}
	return r, nil
}

// floodWhile runs loop while the flooder's searches are in flight, and returns what loop measured.
func (b *bench) floodWhile(ctx context.Context, base, flooder string, f floodRun, loop func() ([]time.Duration, error)) ([]time.Duration, error) {
	floodCtx, stop := context.WithTimeout(ctx, b.cfg.floodLimit)
	defer stop()
	var mu sync.Mutex
	var wg sync.WaitGroup
	var started atomic.Int64
	for range b.cfg.floodSearchers {
		wg.Go(func() {
			started.Add(1)
			for floodCtx.Err() == nil {
				status, retry, err := b.search(floodCtx, base, flooder)
				if err != nil {
					continue // the flood's end cuts its requests
				}
				mu.Lock()
				f.answers[status]++
				mu.Unlock()
				if status == http.StatusTooManyRequests && !f.atOnce {
					_ = loadtest.Sleep(floodCtx, retry)
				}
			}
		})
	}
	// The page is timed once the flood is steady: every searcher has started, and a second passed.
	for started.Load() < int64(b.cfg.floodSearchers) && floodCtx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	_ = loadtest.Sleep(floodCtx, floodSettle)
	page, err := loop()
	stop()
	wg.Wait()
	return page, err
}

// search sends floodQuery as the flooder and returns the status and the Retry-After.
func (b *bench) search(ctx context.Context, base, token string) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+floodQuery, nil)
	if err != nil {
		return 0, 0, err
	}
	req.Header.Set("Cookie", loadtest.SessionCookie+"="+token)
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = resp.Body.Close() }() // read to the end; a close error changes nothing
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return 0, 0, err
	}
	seconds, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	return resp.StatusCode, time.Duration(seconds) * time.Second, nil
}
