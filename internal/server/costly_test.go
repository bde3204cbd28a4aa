package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/server"
)

// holdSearches locks the table a word search reads, so that searches started now wait in the
// database until release: requests that stay in flight for as long as the test needs.
func holdSearches(t *testing.T, app *testApp) (release func()) {
	t.Helper()
	tx, err := app.DB.Begin(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(context.Background(), `LOCK TABLE package_search IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	release = func() { _ = tx.Rollback(context.Background()) }
	t.Cleanup(release)
	return release
}

// waitingSearches is how many statements wait for holdSearches' lock.
func waitingSearches(t *testing.T, app *testApp) int {
	t.Helper()
	var n int
	if err := app.DB.QueryRow(context.Background(),
		`SELECT count(*) FROM pg_locks WHERE NOT granted AND relation = 'package_search'::regclass`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

type costlyAnswer struct {
	status int
	body   string
	err    error
}

func getAnswer(c *http.Client, u string) costlyAnswer {
	resp, err := c.Get(u)
	if err != nil {
		return costlyAnswer{err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return costlyAnswer{status: resp.StatusCode, body: string(body), err: err}
}

// One person may have two searches, audit pages or exports in flight on an instance; a third is
// refused at once with 429, a Retry-After and what is running, while another person's search
// still goes through.
func TestCostlyReadsAreCappedPerPerson(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "flood@example.com", auth.RoleSupervisor, "billing_t2")
	app.user(t, "other@example.com", auth.RoleAgent, "billing_t2")
	flood, other := app.client(t), app.client(t)
	app.login(t, flood, "flood@example.com")
	app.login(t, other, "other@example.com")

	release := holdSearches(t, app)
	inFlight := make(chan costlyAnswer, 2)
	for range 2 {
		go func() { inFlight <- getAnswer(flood, app.URL+"/packages?q=refund") }()
	}
	waitFor(t, "two searches waiting in the database", func() bool { return waitingSearches(t, app) >= 2 })

	for _, path := range []string{"/packages?q=refund", "/packages/export.csv?q=refund", "/audit", "/audit/export.jsonl", "/evals/export.jsonl"} {
		resp, err := flood.Get(app.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
			!strings.Contains(string(body), "you have 2 searches, audit pages or exports running already") {
			t.Errorf("a third costly read %s = %d, Retry-After %q:\n%s\nwant 429 that says what is running", path,
				resp.StatusCode, resp.Header.Get("Retry-After"), body)
		}
	}
	// Another person is not refused for it: their search waits for the lock like the others.
	theirs := make(chan costlyAnswer, 1)
	go func() { theirs <- getAnswer(other, app.URL+"/packages?q=refund") }()
	waitFor(t, "the other person's search waiting in the database", func() bool { return waitingSearches(t, app) >= 3 })
	release()
	for range 2 {
		if a := <-inFlight; a.err != nil || a.status != http.StatusOK {
			t.Errorf("a search within the cap = %d, %v", a.status, a.err)
		}
	}
	if a := <-theirs; a.err != nil || a.status != http.StatusOK {
		t.Errorf("another person's search during the flood = %d, %v", a.status, a.err)
	}
	// Once they ended, the person may search again.
	if a := getAnswer(flood, app.URL+"/packages?q=refund"); a.status != http.StatusOK {
		t.Errorf("a search after the two ended = %d", a.status)
	}
}

// A search is cut by the database at a quarter of REQUEST_TIMEOUT and answered 503 with what to
// do, well before the request's own deadline; the connection it held is the reads pool's.
func TestSlowSearchIsCutAndSaysSo(t *testing.T) {
	t.Parallel()
	app := setupWith(t, server.Config{RequestTimeout: 4 * time.Second})
	app.user(t, "agent@example.com", auth.RoleAgent, "billing_t2")
	c := app.client(t)
	app.login(t, c, "agent@example.com")
	holdSearches(t, app)
	a := getAnswer(c, app.URL+"/packages?q=refund")
	if a.err != nil || a.status != http.StatusServiceUnavailable || !strings.Contains(a.body, "took longer than the desk gives one search") {
		t.Errorf("a search held past the statement timeout = %d, %v:\n%s\nwant 503 that says to narrow it", a.status, a.err, a.body)
	}
	// The queue page, on the main pool, still answers while the lock is held.
	if a := getAnswer(c, app.URL+"/queues/billing_t2"); a.status != http.StatusOK {
		t.Errorf("the queue page while a search is stuck = %d", a.status)
	}
}

// A search of more than search.MaxWords words is refused with a 400 that says so, before it
// reaches the database.
func TestSearchWordsAreCapped(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "agent@example.com", auth.RoleAgent, "billing_t2")
	c := app.client(t)
	app.login(t, c, "agent@example.com")
	q := strings.Repeat("a ", 11)
	a := getAnswer(c, app.URL+"/packages?q="+strings.ReplaceAll(q, " ", "+"))
	if a.status != http.StatusBadRequest || !strings.Contains(a.body, "the search has 11 words; at most 10 are read") {
		t.Errorf("a search of 11 words = %d:\n%s\nwant 400 that says how many are read", a.status, a.body)
	}
	if a := getAnswer(c, app.URL+"/packages?q="+strings.Repeat("ab+", 10)); a.status != http.StatusOK {
		t.Errorf("a search of 10 words = %d, want 200", a.status)
	}
}
