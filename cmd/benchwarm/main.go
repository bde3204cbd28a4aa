// Command benchwarm measures the warm bridge end to end, across two desk instances on
// one fresh database, each figure beside a baseline measured in the same run:
//
//  1. intake → ring: a bot POSTs a warm package to instance A; the clock stops when the ring
//     frame reaches the agent's socket on instance B. Baseline: a cold package's queue card
//     reaching the same socket the same way.
//  2. click → accepted: the agent POSTs accept on B; the clock stops when the bot's receiver on
//     loopback has the accepted webhook. Baseline: the same for a cold package accepted from
//     the list.
//
// Warm and cold rounds alternate, one package at a time, so each pair shares the machine's state.
// The database is dropped at exit.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"slices"
	"time"

	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/internal/loadtest/desks"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/queue"
)

const (
	queueName = "bench_warm"
	email     = "ringer@example.com"
	password  = "bench-password-not-secret"
	example   = "internal/handoff/testdata/harbor-v1.json"
)

func main() {
	loadtest.Main("benchwarm", func(ctx context.Context) error { return run(ctx, os.Args, os.Getenv, os.Stdout) })
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	var adminURL string
	fs := loadtest.NewFlagSet("benchwarm", getenv, &adminURL)
	rounds := fs.Int("rounds", 200, "warm rounds, each followed by a cold one")
	if err := loadtest.ParseFlags(fs, args[1:]); err != nil {
		return err
	}
	loadtest.PrintHeader(out, loadtest.CommandLine(fs), "two desk instances, the agent's socket, the bot's receiver and PostgreSQL")
	cleanup := &loadtest.Cleanup{}
	defer func() {
		if err := cleanup.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "teardown: %v\n", err)
		}
	}()
	_, dbURL, err := cleanup.ScratchDatabase(ctx, adminURL, "bench_warm_")
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	db, err := postgres.Open(ctx, dbURL, postgres.DefaultAcquireTimeout)
	if err != nil {
		return err
	}
	cleanup.Add(func() error { db.Close(); return nil })
	if err := postgres.Migrate(ctx, db, logger); err != nil {
		return err
	}

	// The bot's receiver: when each webhook arrived, by handoff and event.
	hooks := loadtest.NewArrivals()
	hookLn, hookURL, err := loadtest.Listen()
	if err != nil {
		return err
	}
	hookSrv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var h struct{ Event, HandoffID string }
		body, _ := io.ReadAll(r.Body)
		if json.Unmarshal(body, &struct {
			Event     *string `json:"event"`
			HandoffID *string `json:"handoff_id"`
		}{&h.Event, &h.HandoffID}) == nil {
			hooks.Mark(h.Event + " " + h.HandoffID)
		}
	})}
	go func() { _ = hookSrv.Serve(hookLn) }()
	cleanup.Add(hookSrv.Close)

	urls, err := desks.Serve(ctx, cleanup, dbURL, logger, "A", "B")
	if err != nil {
		return err
	}
	a, b := urls[0], urls[1]

	people, queues := auth.NewService(db), queue.NewService(db)
	q, err := queues.Create(ctx, queue.New{Name: queueName})
	if err != nil {
		return err
	}
	key, err := people.CreateAPIKey(ctx, auth.NewAPIKey{Name: "bench-bot", QueueIDs: []int64{q.ID}, WebhookURL: hookURL, AllowPrivateWebhook: true})
	if err != nil {
		return err
	}
	agent, err := people.CreateUser(ctx, auth.NewUser{Email: email, DisplayName: "Ringer", Role: auth.RoleAgent, Password: password, Capacity: 5})
	if err != nil {
		return err
	}
	if err := queues.AddMembers(ctx, agent.ID, []string{queueName}); err != nil {
		return err
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	if _, err := loadtest.Login(ctx, client, b, email, password); err != nil {
		return err
	}
	frames, err := watch(ctx, client, b)
	if err != nil {
		return err
	}
	cleanup.Add(frames.close)
	if err := loadtest.WaitOnline(ctx, db, agent.ID); err != nil {
		return err
	}

	raw, err := os.ReadFile(example)
	if err != nil {
		return err
	}
	var ring, card, warmAccept, coldAccept []time.Duration
	for i := range *rounds * 2 {
		warm := i%2 == 0
		var pkg map[string]any
		if err := json.Unmarshal(raw, &pkg); err != nil {
			return err
		}
		id := fmt.Sprintf("ho_bench_%d", i)
		pkg["handoff_id"], pkg["target_profile"] = id, queueName
		pkg["contact"].(map[string]any)["id"] = fmt.Sprintf("cust_bench_%d", i)
		delete(pkg, "preferred_agent")
		pkg["transfer_mode"] = map[bool]string{true: "warm", false: "cold"}[warm]
		body, _ := json.Marshal(pkg)

		seen := "card-" + id
		if warm {
			seen = "ring " + id
		}
		started := time.Now()
		if err := loadtest.Post(ctx, client, a+"/api/v1/handoffs", "application/json", string(body), key.Key, http.StatusCreated); err != nil {
			return err
		}
		at, err := frames.Wait(ctx, seen)
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		clicked := time.Now()
		if err := loadtest.Post(ctx, client, b+"/handoffs/"+id+"/accept", "application/x-www-form-urlencoded", "", "", http.StatusSeeOther); err != nil {
			return err
		}
		hooked, err := hooks.Wait(ctx, "accepted "+id)
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		if warm {
			ring, warmAccept = append(ring, at.Sub(started)), append(warmAccept, hooked.Sub(clicked))
		} else {
			card, coldAccept = append(card, at.Sub(started)), append(coldAccept, hooked.Sub(clicked))
		}
		if err := loadtest.Post(ctx, client, b+"/handoffs/"+id+"/resolve", "application/x-www-form-urlencoded", "code=solved", "", http.StatusSeeOther); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%d warm and %d cold rounds, one package at a time; intake on A, the agent's socket and clicks on B\n\n", *rounds, *rounds)
	line := func(what string, got, base []time.Duration, target string) {
		slices.Sort(got)
		slices.Sort(base)
		p50, b50 := loadtest.Percentile(got, 50), loadtest.Percentile(base, 50)
		fmt.Fprintf(out, "%-34s p50 %7s  p99 %7s   baseline p50 %7s  p99 %7s   ×%.2f   target %s\n", what,
			loadtest.Millis(p50), loadtest.Millis(loadtest.Percentile(got, 99)),
			loadtest.Millis(b50), loadtest.Millis(loadtest.Percentile(base, 99)), float64(p50)/float64(b50), target)
	}
	line("intake → ring on B's socket", ring, card, "p50 ≤ 50 ms (baseline: a cold card)")
	line("click → accepted webhook", warmAccept, coldAccept, "p50 ≤ 100 ms (baseline: a cold accept)")
	return nil
}

// socket is the agent's websocket on B, its frames' fragments recorded as they arrive.
type socket struct {
	*loadtest.Arrivals
	conn *websocket.Conn
}

func (s *socket) close() error { return s.conn.Close() }

var ringOf = regexp.MustCompile(`data-testid="ring" data-handoff="([^"]+)"`)

// watch opens the agent's socket on the queue, as the queue page does.
func watch(ctx context.Context, client *http.Client, base string) (*socket, error) {
	u, _ := url.Parse(base)
	header := http.Header{"Origin": {base}}
	for _, c := range client.Jar.Cookies(u) {
		header.Add("Cookie", c.Name+"="+c.Value)
	}
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+u.Host+"/ws?queues="+queueName, header)
	if err != nil {
		return nil, err
	}
	s := &socket{Arrivals: loadtest.NewArrivals(), conn: conn}
	go func() {
		for {
			var f struct {
				Fragments []struct{ Target, Op, HTML string } `json:"fragments"`
			}
			if err := conn.ReadJSON(&f); err != nil {
				return
			}
			for _, fr := range f.Fragments {
				if m := ringOf.FindStringSubmatch(fr.HTML); fr.Target == "ring" && m != nil {
					s.Mark("ring " + m[1])
				} else if fr.Op == "upsert" {
					s.Mark(fr.Target)
				}
			}
		}
	}()
	return s, nil
}
