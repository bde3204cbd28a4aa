// Command benchconversation measures the conversation after the handoff across two desk
// instances on one fresh database, each figure beside a baseline measured in the same run:
//
//  1. message → agent: a bot POSTs a customer message to instance A; the clock stops when a frame
//     carrying its text reaches the agent's socket on instance B, which has the package open.
//     Baseline: a bare PostgreSQL NOTIFY reaching a LISTEN connection on the same database.
//  2. relays: 8 and 64 bots post messages at once, each to a package of its own, for a fixed
//     time. Baseline: the same number of connections INSERTing the same rows into the messages
//     table directly, one statement each.
//
// Message rounds and NOTIFY rounds alternate, so each pair shares the machine's state. The
// database is dropped at exit.
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
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/loadtest"
	"github.com/handoffdesk/desk/internal/loadtest/desks"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/queue"
)

const (
	queueName = "bench_chat"
	email     = "chatter@example.com"
	password  = "bench-password-not-secret"
	example   = "internal/handoff/testdata/harbor-v1.json"
)

func main() {
	loadtest.Main("benchconversation", func(ctx context.Context) error { return run(ctx, os.Args, os.Getenv, os.Stdout) })
}

func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	var adminURL string
	fs := loadtest.NewFlagSet("benchconversation", getenv, &adminURL)
	rounds := fs.Int("rounds", 200, "messages timed to the agent's socket, each followed by a NOTIFY round")
	duration := fs.Duration("duration", 4*time.Second, "how long each relay run posts")
	relayList := fs.String("relays", "8,64", "relays posting at once, one run each")
	if err := loadtest.ParseFlags(fs, args[1:]); err != nil {
		return err
	}
	relays, err := loadtest.ParseInts(*relayList)
	if err != nil {
		return err
	}
	loadtest.PrintHeader(out, loadtest.CommandLine(fs), "two desk instances, the agent's socket and PostgreSQL")
	cleanup := &loadtest.Cleanup{}
	defer func() {
		if err := cleanup.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "teardown: %v\n", err)
		}
	}()
	_, dbURL, err := cleanup.ScratchDatabase(ctx, adminURL, "bench_chat_")
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
	key, err := people.CreateAPIKey(ctx, auth.NewAPIKey{Name: "bench-bot", QueueIDs: []int64{q.ID}})
	if err != nil {
		return err
	}
	agent, err := people.CreateUser(ctx, auth.NewUser{Email: email, DisplayName: "Chatter", Role: auth.RoleAgent, Password: password, Capacity: 5})
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
	raw, err := os.ReadFile(example)
	if err != nil {
		return err
	}
	pkg := func(i int) (string, string, error) {
		var p map[string]any
		if err := json.Unmarshal(raw, &p); err != nil {
			return "", "", err
		}
		id := fmt.Sprintf("ho_chat_%d", i)
		p["handoff_id"], p["target_profile"], p["transfer_mode"] = id, queueName, "cold"
		p["contact"].(map[string]any)["id"] = fmt.Sprintf("cust_chat_%d", i)
		delete(p, "preferred_agent")
		body, err := json.Marshal(p)
		return id, string(body), err
	}
	// The agent holds the timed package and has it open on B.
	id, body, err := pkg(0)
	if err != nil {
		return err
	}
	if err := loadtest.Post(ctx, client, a+"/api/v1/handoffs", "application/json", body, key.Key, http.StatusCreated); err != nil {
		return err
	}
	if err := loadtest.Post(ctx, client, b+"/handoffs/"+id+"/accept", "application/x-www-form-urlencoded", "", "", http.StatusSeeOther); err != nil {
		return err
	}
	frames, err := watch(ctx, client, b, id)
	if err != nil {
		return err
	}
	cleanup.Add(frames.close)
	if err := loadtest.WaitOnline(ctx, db, agent.ID); err != nil {
		return err
	}
	listen, err := newListener(ctx, dbURL)
	if err != nil {
		return err
	}
	cleanup.Add(listen.close)

	var chat, notify []time.Duration
	for i := range *rounds {
		token := fmt.Sprintf("bench-msg-%d-", i)
		msg := fmt.Sprintf(`{"message_id":"m%d","role":"user","text":"%s"}`, i, token)
		started := time.Now()
		if err := loadtest.Post(ctx, client, a+"/api/v1/handoffs/"+id+"/messages", "application/json", msg, key.Key, http.StatusCreated); err != nil {
			return err
		}
		at, err := frames.Wait(ctx, token)
		if err != nil {
			return fmt.Errorf("round %d: %w", i, err)
		}
		chat = append(chat, at.Sub(started))
		took, err := listen.round(ctx, db, i)
		if err != nil {
			return err
		}
		notify = append(notify, took)
		// A customer sends a line every ~0.3 s at most here: the thread's per-minute cap is a
		// customer's, and this run must stay under it.
		if err := loadtest.Sleep(ctx, 250*time.Millisecond-at.Sub(started)); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%d customer messages posted to A, each timed to the frame carrying its text on B's socket\n\n", *rounds)
	slices.Sort(chat)
	slices.Sort(notify)
	p50, b50 := loadtest.Percentile(chat, 50), loadtest.Percentile(notify, 50)
	fmt.Fprintf(out, "%-34s p50 %7s  p99 %7s   baseline NOTIFY→LISTEN p50 %7s  p99 %7s   ×%.1f   target p50 ≤ 15 ms, p99 ≤ 50 ms\n\n",
		"message POST on A → frame on B", loadtest.Millis(p50), loadtest.Millis(loadtest.Percentile(chat, 99)),
		loadtest.Millis(b50), loadtest.Millis(loadtest.Percentile(notify, 99)), float64(p50)/float64(b50))

	next := 1
	for _, n := range relays {
		ids := make([]string, n)
		for i := range ids {
			pid, body, err := pkg(next)
			next++
			if err != nil {
				return err
			}
			if err := loadtest.Post(ctx, client, a+"/api/v1/handoffs", "application/json", body, key.Key, http.StatusCreated); err != nil {
				return err
			}
			ids[i] = pid
		}
		got, err := relayRun(ctx, a, key.Key, ids, *duration)
		if err != nil {
			return err
		}
		base, err := insertRun(ctx, dbURL, ids, *duration)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%2d relays, one package each    %7.0f messages/s   raw INSERT of the same rows (%d connections) %7.0f rows/s   ×%.2f   target ≥ 0.3×\n",
			n, got, min(n, maxRawConns), base, got/base)
	}
	fmt.Fprintf(out, "\nload average %s\n", loadtest.LoadAverage())
	return nil
}

// perRelay bounds each relay's messages to what a package takes in a minute, whatever the speed
// of the machine: the bench measures the desk, not its cap.
const perRelay = 250

// relayRun has a relay per package post customer messages to A for d, and answers messages/s.
func relayRun(ctx context.Context, base, key string, ids []string, d time.Duration) (float64, error) {
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: len(ids)}}
	var sent atomic.Int64
	var failed atomic.Value
	deadline := time.Now().Add(d)
	started := time.Now()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			for i := 0; i < perRelay && time.Now().Before(deadline); i++ {
				msg := fmt.Sprintf(`{"message_id":"r%d","role":"user","text":"relayed line %d"}`, i, i)
				if err := loadtest.Post(ctx, client, base+"/api/v1/handoffs/"+id+"/messages", "application/json", msg, key, http.StatusCreated); err != nil {
					failed.Store(err)
					return
				}
				sent.Add(1)
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return 0, err
	}
	return float64(sent.Load()) / time.Since(started).Seconds(), nil
}

// maxRawConns bounds the baseline's connections: PostgreSQL here takes 100 clients in all, and
// past the machine's two cores more connections only queue.
const maxRawConns = 16

// insertRun inserts the rows a relay run writes, straight into the messages table, one statement
// each, a writer per package over at most maxRawConns connections, for d; it answers rows/s.
func insertRun(ctx context.Context, dbURL string, ids []string, d time.Duration) (float64, error) {
	u, err := loadtest.PoolURL(dbURL, min(len(ids), maxRawConns))
	if err != nil {
		return 0, err
	}
	pool, err := pgxpool.New(ctx, u.String())
	if err != nil {
		return 0, err
	}
	defer pool.Close()
	var rows atomic.Int64
	var failed atomic.Value
	deadline := time.Now().Add(d)
	started := time.Now()
	var wg sync.WaitGroup
	for _, id := range ids {
		wg.Go(func() {
			var rowID, last int
			if err := pool.QueryRow(ctx, `SELECT h.id, coalesce(max(m.seq), 0) FROM handoffs h LEFT JOIN messages m ON m.handoff_id = h.id
				WHERE h.handoff_id = $1 GROUP BY h.id`, id).Scan(&rowID, &last); err != nil {
				failed.Store(err)
				return
			}
			for i := 1; i <= perRelay && time.Now().Before(deadline); i++ {
				if _, err := pool.Exec(ctx, `INSERT INTO messages (handoff_id, seq, message_id, role, text, at, received_at, body_sha256)
					VALUES ($1, $2, $3, 'user', $4, now(), now(), '\x00')`, rowID, last+i, fmt.Sprintf("raw%d", i), fmt.Sprintf("relayed line %d", i)); err != nil {
					failed.Store(err)
					return
				}
				rows.Add(1)
			}
		})
	}
	wg.Wait()
	if err, ok := failed.Load().(error); ok {
		return 0, err
	}
	return float64(rows.Load()) / time.Since(started).Seconds(), nil
}

// socket is the agent's websocket on B with the package open: each text seen in its frames'
// fragments is marked as it arrives.
type socket struct {
	*loadtest.Arrivals
	conn *websocket.Conn
}

func (s *socket) close() error { return s.conn.Close() }

var tokenOf = regexp.MustCompile(`bench-msg-[0-9]+-`)

func watch(ctx context.Context, client *http.Client, base, id string) (*socket, error) {
	u, _ := url.Parse(base)
	header := http.Header{"Origin": {base}}
	for _, c := range client.Jar.Cookies(u) {
		header.Add("Cookie", c.Name+"="+c.Value)
	}
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, "ws://"+u.Host+"/ws?handoff="+url.QueryEscape(id), header)
	if err != nil {
		return nil, err
	}
	s := &socket{Arrivals: loadtest.NewArrivals(), conn: conn}
	go func() {
		for {
			var f struct {
				Fragments []struct{ HTML string } `json:"fragments"`
			}
			if err := conn.ReadJSON(&f); err != nil {
				return
			}
			for _, fr := range f.Fragments {
				for _, token := range tokenOf.FindAllString(fr.HTML, -1) {
					s.Mark(token)
				}
			}
		}
	}()
	return s, nil
}

// listener is the baseline: a connection LISTENing on a channel of its own, timed from another
// connection's NOTIFY to the notification's arrival.
type listener struct {
	conn *pgx.Conn
}

func newListener(ctx context.Context, dbURL string) (*listener, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN bench_chat"); err != nil {
		return nil, err
	}
	return &listener{conn: conn}, nil
}

func (l *listener) close() error { return l.conn.Close(context.Background()) }

func (l *listener) round(ctx context.Context, db *pgxpool.Pool, i int) (time.Duration, error) {
	payload := fmt.Sprint(i)
	started := time.Now()
	if _, err := db.Exec(ctx, "SELECT pg_notify('bench_chat', $1)", payload); err != nil {
		return 0, err
	}
	wait, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		n, err := l.conn.WaitForNotification(wait)
		if err != nil {
			return 0, err
		}
		if strings.TrimSpace(n.Payload) == payload {
			return time.Since(started), nil
		}
	}
}
