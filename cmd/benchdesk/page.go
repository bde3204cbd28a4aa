package main

import (
	"bytes"
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/loadtest"
)

// pageResult is scenario 5: an agent's queue page (page 1, and page 2 through the page's own
// "more" link) over a queue of many open packages; against GET /healthz in the same loop with
// the same session cookie (every route loads the session, so the baseline has that query too).
type pageResult struct {
	packages, requests, concurrency int
	healthz, page1, page2           []loopStats   // one per round
	waiting                         time.Duration // board.Board.Waiting in-process, p50: SQL and decoding
	planStale, plan                 string        // EXPLAIN ANALYZE of the Waiting query's shape before and after ANALYZE
	page2Path                       string
	cards1, cards2                  int
	errors                          loadtest.ErrorLog
}

// loopStats are a loop's latencies, and the database round trips per GET that the requests' own
// source (tripSources' last) counted on the instance's pool meanwhile: the page's reads, as
// background work has sources of its own.
type loopStats struct {
	p50, p95, p99 time.Duration
	trips         float64
}

// moreLink finds the href of the page's data-testid="more" link.
func moreLink(page []byte) string {
	m := regexp.MustCompile(`<a href="([^"]*)"[^>]*data-testid="more"`).FindSubmatch(page)
	if m == nil {
		return ""
	}
	return html.UnescapeString(string(m[1]))
}

func countCards(page []byte) int { return bytes.Count(page, []byte(`data-testid="card"`)) }

func firstCard(page []byte) string {
	m := regexp.MustCompile(`data-testid="card" data-handoff="([^"]*)"`).FindSubmatch(page)
	if m == nil {
		return ""
	}
	return string(m[1])
}

func (b *bench) queuePage(ctx context.Context, out io.Writer, res *result) (*pageResult, error) {
	cfg := b.cfg
	r := &pageResult{packages: cfg.pagePackages, requests: cfg.pageRequests, concurrency: cfg.pageConcurrency}
	t0 := time.Now()
	if err := b.fill(ctx, queuePage, "page", r.packages); err != nil {
		return nil, err
	}
	fill := time.Since(t0)
	left, err := b.drainOutbox(ctx, time.Minute)
	if err != nil {
		return nil, err
	}
	if r.planStale, err = b.explainPage(ctx); err != nil {
		return nil, err
	}
	if err := b.analyze(ctx); err != nil {
		return nil, err
	}
	if r.plan, err = b.explainPage(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  %d packages queued by intake.Intake.Submit in %s; webhook outbox drained to %d pending, ANALYZE, in %s\n",
		r.packages, fill.Round(time.Millisecond), left, (time.Since(t0) - fill).Round(time.Millisecond))
	fmt.Fprintf(out, "  page 1's query (EXPLAIN ANALYZE, custom plan): with the statistics left by the fill: %s\n", r.planStale)
	fmt.Fprintf(out, "                                                 after ANALYZE:                        %s\n", r.plan)

	base, token := b.a.url, b.session[0]
	status, page, err := b.get(ctx, base, "/queues/"+queuePage, token)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /queues/%s: status %d", queuePage, status)
	}
	r.cards1, r.page2Path = countCards(page), moreLink(page)
	first1 := firstCard(page)
	wantCards := min(r.packages, board.PageSize)
	if r.cards1 != wantCards {
		res.fail("5: page 1 shows %d cards, want %d", r.cards1, wantCards)
	}
	if r.packages > board.PageSize && r.page2Path == "" {
		res.fail(`5: page 1 of %d packages has no data-testid="more" link`, r.packages)
	}
	checkPage1 := func(body []byte) error {
		if n := countCards(body); n != r.cards1 {
			return fmt.Errorf("page 1: %d cards, want %d", n, r.cards1)
		}
		return nil
	}
	var checkPage2 func([]byte) error
	if r.page2Path != "" {
		status, page2, err := b.get(ctx, base, r.page2Path, token)
		if err != nil {
			return nil, err
		}
		r.cards2 = countCards(page2)
		if status != http.StatusOK || r.cards2 != min(r.packages-board.PageSize, board.PageSize) || firstCard(page2) == first1 {
			res.fail("5: page 2 (%s): status %d, %d cards, first card %q (page 1's first: %q)", r.page2Path, status, r.cards2, firstCard(page2), first1)
		}
		checkPage2 = func(body []byte) error {
			if n := countCards(body); n != r.cards2 {
				return fmt.Errorf("page 2: %d cards, want %d", n, r.cards2)
			}
			return nil
		}
	}
	fmt.Fprintf(out, "  page 1: %d cards; page 2 via the more link %s: %d cards\n", r.cards1, r.page2Path, r.cards2)

	checkHealth := func(body []byte) error {
		if string(body) != "ok\n" {
			return fmt.Errorf("healthz answered %q", body)
		}
		return nil
	}
	loop := func(path string, check func([]byte) error) (loopStats, error) {
		// A warm-up tenth, not recorded: connections and caches are paid before the clock starts.
		if _, err := b.getLoop(ctx, base, path, token, max(r.requests/10, r.concurrency), r.concurrency, check, &r.errors); err != nil {
			return loopStats{}, err
		}
		requests := &b.a.trips.by[len(tripSources)-1]
		trips0 := requests.Load()
		d, err := b.getLoop(ctx, base, path, token, r.requests, r.concurrency, check, &r.errors)
		trips := float64(requests.Load()-trips0) / float64(r.requests)
		return loopStats{loadtest.Percentile(d, 50), loadtest.Percentile(d, 95), loadtest.Percentile(d, 99), trips}, err
	}
	for round := range cfg.runs {
		h, err := loop("/healthz", checkHealth)
		if err != nil {
			return nil, err
		}
		p1, err := loop("/queues/"+queuePage, checkPage1)
		if err != nil {
			return nil, err
		}
		r.healthz, r.page1 = append(r.healthz, h), append(r.page1, p1)
		line := fmt.Sprintf("  round %d/%d, %d GETs × %d concurrent: healthz p50 %s p95 %s (%.1f round trips) | page 1 p50 %s p95 %s (%.1f)",
			round+1, cfg.runs, r.requests, r.concurrency, loadtest.Millis(h.p50), loadtest.Millis(h.p95), h.trips, loadtest.Millis(p1.p50), loadtest.Millis(p1.p95), p1.trips)
		if checkPage2 != nil {
			p2, err := loop(r.page2Path, checkPage2)
			if err != nil {
				return nil, err
			}
			r.page2 = append(r.page2, p2)
			line += fmt.Sprintf(" | page 2 p50 %s p95 %s (%.1f)", loadtest.Millis(p2.p50), loadtest.Millis(p2.p95), p2.trips)
		}
		fmt.Fprintln(out, line)
	}
	if r.waiting, err = b.timeWaiting(ctx, max(r.requests/4, 10)); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "  where page 1's time goes: board.Board.Waiting in-process, one at a time (the query and decoding %d stored packages): p50 %s\n",
		board.PageSize+1, loadtest.Millis(r.waiting))
	if r.errors.Count() > 0 {
		res.fail("5: %d GETs failed, first: %q", r.errors.Count(), r.errors.Samples())
	}
	return r, nil
}

// pageQuery has the shape of handoff's Waiting query for page 1 (board.go), for EXPLAIN.
const pageQuery = `
	SELECT h.id, h.handoff_id, h.queue_id, q.name, h.status, h.priority_rank, h.enqueued_at, h.expires_at,
		h.reserved_until, h.assignee_id, coalesce(u.display_name, ''), h.rejections, h.rejected_by, h.needs_supervisor,
		coalesce(h.outcome, ''), q.sla, q.pii_min_role, q.pii_entity_keys, h.package
	FROM handoffs h JOIN queues q ON q.id = h.queue_id LEFT JOIN users u ON u.id = h.assignee_id
	WHERE h.queue_id = $1 AND h.status IN ('queued', 'reserved')
	ORDER BY h.priority_rank, h.enqueued_at, h.id LIMIT $2`

// timeWaiting times the real board.Board.Waiting call in-process, n times one after
// another: the query plus decoding the packages, without HTTP, session or rendering.
func (b *bench) timeWaiting(ctx context.Context, n int) (time.Duration, error) {
	reads := board.New(b.a.db)
	var d []time.Duration
	for range n {
		t := time.Now()
		if _, _, err := reads.Waiting(ctx, b.queues[queuePage], nil); err != nil {
			return 0, err
		}
		d = append(d, time.Since(t))
	}
	return loadtest.Percentile(sorted(d), 50), nil
}

// explainPage runs EXPLAIN ANALYZE on page 1's query shape (a custom plan, as every new
// connection's first five executions of the prepared statement get) and condenses it to how
// handoffs is read and how long the query took.
func (b *bench) explainPage(ctx context.Context) (string, error) {
	rows, err := b.db.Query(ctx, `EXPLAIN (ANALYZE, COSTS OFF) `+pageQuery, b.queues[queuePage], board.PageSize+1)
	if err != nil {
		return "", err
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return "", err
	}
	var scan, sort, exec string
	for _, l := range lines {
		l = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(l), "->"))
		switch {
		case scan == "" && strings.Contains(l, " on handoffs h"):
			scan = l
		case sort == "" && strings.HasPrefix(l, "Sort Method:"):
			sort = "then " + strings.ToLower(strings.TrimPrefix(l, "Sort Method: "))
		case strings.HasPrefix(l, "Execution Time:"):
			exec = strings.TrimSpace(strings.TrimPrefix(l, "Execution Time:"))
		}
	}
	if sort == "" {
		sort = "no sort"
	}
	return fmt.Sprintf("%s; %s; execution %s", scan, sort, exec), nil
}

// get fetches a page as a logged-in browser does.
func (b *bench) get(ctx context.Context, base, path, token string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Cookie", loadtest.SessionCookie+"="+token)
	resp, err := b.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }() // the body has been read; a close error cannot change the answer
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// getLoop sends n GETs, c at a time, and returns their sorted latencies; answers other than 200
// or that fail check are counted in errs.
func (b *bench) getLoop(ctx context.Context, base, path, token string, n, c int, check func([]byte) error, errs *loadtest.ErrorLog) ([]time.Duration, error) {
	latencies := make([]time.Duration, n)
	err := parallel(ctx, c, n, func(i int) error {
		t := time.Now()
		status, body, err := b.get(ctx, base, path, token)
		latencies[i] = time.Since(t)
		switch {
		case err != nil:
			errs.Add(err)
		case status != http.StatusOK:
			errs.Add(fmt.Errorf("GET %s: status %d", path, status))
		default:
			if err := check(body); err != nil {
				errs.Add(err)
			}
		}
		return nil
	})
	return sorted(latencies), err
}
