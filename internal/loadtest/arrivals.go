package loadtest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Arrivals records when each awaited thing happened (a socket's frame, a bot's webhook), for a
// waiter that may come before or after it.
type Arrivals struct {
	mu   sync.Mutex
	at   map[string]time.Time
	wake chan struct{}
}

func NewArrivals() *Arrivals {
	return &Arrivals{at: map[string]time.Time{}, wake: make(chan struct{}, 1)}
}

// Mark records that what happened now, unless it happened before.
func (a *Arrivals) Mark(what string) {
	now := time.Now()
	a.mu.Lock()
	if _, ok := a.at[what]; !ok {
		a.at[what] = now
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Wait returns when what happened, waiting up to 10 s for it.
func (a *Arrivals) Wait(ctx context.Context, what string) (time.Time, error) {
	timeout := time.After(10 * time.Second)
	for {
		a.mu.Lock()
		at, ok := a.at[what]
		a.mu.Unlock()
		if ok {
			return at, nil
		}
		select {
		case <-a.wake:
		case <-time.After(time.Millisecond):
		case <-timeout:
			return time.Time{}, fmt.Errorf("%s did not arrive within 10s", what)
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		}
	}
}

// Post sends body to u and insists on the status want; bearer, when set, is the bot's key.
func Post(ctx context.Context, client *http.Client, u, contentType, body, bearer string, want int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != want {
		return fmt.Errorf("POST %s: %d, want %d: %s", u, resp.StatusCode, want, answer)
	}
	return nil
}

// WaitReady waits until every instance at urls answers /readyz.
func WaitReady(ctx context.Context, urls ...string) error {
	for _, u := range urls {
		for {
			resp, err := http.Get(u + "/readyz") //nolint:gosec // G107: our own instance on loopback.
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if err := Sleep(ctx, 20*time.Millisecond); err != nil {
				return err
			}
		}
	}
	return nil
}

// WaitOnline waits for the agent's presence, which the instance of their socket writes.
func WaitOnline(ctx context.Context, db *pgxpool.Pool, userID int64) error {
	for range 500 {
		var online bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM presence WHERE user_id = $1)`, userID).Scan(&online); err != nil {
			return err
		}
		if online {
			return nil
		}
		if err := Sleep(ctx, 20*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("the agent was not online after 10s")
}
