package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/postgres/pgtest"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/tracing"
)

// BenchmarkMessageToFrame measures what an agent waits for a customer's message: from the bot's
// POST on one instance to the frame carrying the message on the agent's socket on the other,
// against bare NOTIFY → LISTEN on the same PostgreSQL in the same run. Messages go one at a time,
// each waited for. It reports the medians and the 99th percentiles, and the median of the POST's
// 201 alone. Run with:
//
//	go test ./internal/server -run '^$' -bench MessageToFrame -benchtime 300x
func BenchmarkMessageToFrame(b *testing.B) {
	dbURL := pgtest.URL(b)
	agentSide, botSide := benchInstance(b, dbURL, tracing.Off()), benchInstance(b, dbURL, tracing.Off())
	db := openBenchPool(b, dbURL, tracing.Off())
	ctx := b.Context()
	q, err := queue.NewService(db).Create(ctx, queue.New{Name: "billing_t2"})
	if err != nil {
		b.Fatal(err)
	}
	people := auth.NewService(db)
	k, err := people.CreateAPIKey(ctx, auth.NewAPIKey{Name: "tier1", QueueIDs: []int64{q.ID}})
	if err != nil {
		b.Fatal(err)
	}
	u, err := people.CreateUser(ctx, auth.NewUser{Email: "dana@example.com", DisplayName: "dana", Role: auth.RoleAgent, Password: testPassword})
	if err != nil {
		b.Fatal(err)
	}
	if err := queue.NewService(db).AddMembers(ctx, u.ID, []string{q.Name}); err != nil {
		b.Fatal(err)
	}
	raw, err := os.ReadFile("../handoff/testdata/harbor-v1.json")
	if err != nil {
		b.Fatal(err)
	}
	var pkg map[string]any
	if err := json.Unmarshal(raw, &pkg); err != nil {
		b.Fatal(err)
	}
	id := pkg["handoff_id"].(string)
	bot := func(path string, body any) int {
		data, _ := json.Marshal(body)
		req, _ := http.NewRequest(http.MethodPost, botSide+path, bytes.NewReader(data))
		req.Header.Set("Authorization", "Bearer "+k.Key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if status := bot("/api/v1/handoffs", pkg); status != http.StatusCreated {
		b.Fatalf("submit: %d", status)
	}
	jar, _ := cookiejar.New(nil)
	agent := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, step := range []struct{ path string }{{"/login"}, {"/handoffs/" + id + "/accept"}} {
		resp, err := agent.PostForm(agentSide+step.path, url.Values{"email": {"dana@example.com"}, "password": {testPassword}})
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			b.Fatalf("%s: %d", step.path, resp.StatusCode)
		}
	}
	base, _ := url.Parse(agentSide)
	header := http.Header{"Origin": {agentSide}}
	for _, c := range jar.Cookies(base) {
		header.Add("Cookie", c.Name+"="+c.Value)
	}
	conn, _, err := websocket.DefaultDialer.Dial("ws://"+base.Host+"/ws?handoff="+id, header)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { conn.Close() })
	frames := make(chan string, 1024)
	go func() {
		defer close(frames)
		for {
			_, data, err := conn.ReadMessage()
			if err != nil {
				return
			}
			frames <- string(data)
		}
	}()

	waits, answers := make([]time.Duration, 0, b.N), make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := range b.N {
		want := fmt.Sprintf(`msg-%s-%d\"`, id, i+1)
		start := time.Now()
		if status := bot("/api/v1/handoffs/"+id+"/messages", map[string]any{"message_id": fmt.Sprint("bench_", i), "role": "user",
			"text": fmt.Sprint("message ", i)}); status != http.StatusCreated {
			b.Fatalf("message %d: %d", i, status)
		}
		answers = append(answers, time.Since(start))
		for f := range frames {
			if strings.Contains(f, want) {
				break
			}
		}
		waits = append(waits, time.Since(start))
	}
	b.StopTimer()
	baseline := notifyRoundTrips(b, dbURL, b.N)
	b.ReportMetric(quantileMS(waits, 0.5), "p50-ms")
	b.ReportMetric(quantileMS(waits, 0.99), "p99-ms")
	b.ReportMetric(quantileMS(answers, 0.5), "201-p50-ms")
	b.ReportMetric(quantileMS(baseline, 0.5), "notify-p50-ms")
	b.ReportMetric(quantileMS(baseline, 0.99), "notify-p99-ms")
}

func quantileMS(ds []time.Duration, q float64) float64 {
	slices.Sort(ds)
	return float64(ds[min(len(ds)-1, int(q*float64(len(ds))))].Microseconds()) / 1000
}

// notifyRoundTrips times n bare NOTIFY → LISTEN round trips on the database at dbURL.
func notifyRoundTrips(b *testing.B, dbURL string, n int) []time.Duration {
	ctx := context.Background()
	listener, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer listener.Close(ctx)
	notifier, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer notifier.Close(ctx)
	if _, err := listener.Exec(ctx, `LISTEN bench_baseline`); err != nil {
		b.Fatal(err)
	}
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if _, err := notifier.Exec(ctx, `SELECT pg_notify('bench_baseline', 'x')`); err != nil {
			b.Fatal(err)
		}
		if _, err := listener.WaitForNotification(ctx); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(start))
	}
	return out
}
