// Command screenshots remakes the pictures in the README and docs from the demo desk, so that
// they show the desk as it is: it migrates and seeds a database of its own as `make run` does, serves it on
// loopback with the built binary and its demo CRM, and photographs pages in headless Chromium at
// 1440×900. The pictures of an agent's day are taken at the steps of the walk the Chromium test
// walks (internal/workday): on the package page, and in the sidebar framed by the demo CRM. The
// pictures of the conversation after the handoff are of a customer writing in the demo chat and an
// agent answering on the package page.
//
//	make screenshots   (go run ./cmd/screenshots -web bin/web -out docs)
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/workday"
)

// shot is one picture: who is signed in, which page, what to click first (if anything), what to
// wait for before taking it.
type shot struct {
	file, email, path, click, ready string
}

var shots = []shot{
	{"screenshot.png", "agent@example.com", "/", "", `[data-testid="my-queues"]`},
	{"dashboard.png", "supervisor@example.com", "/dashboard?window=30d", "", `body[data-live="online"]`},
	// Bea sees billing_t2's contacts masked: the editor holds the draft with a token for the name.
	{"package.png", "agent2@example.com", "/handoffs/" + harborID, `[data-testid="accept"]`, `[data-testid="reply-preview"]`},
}

// The demo's credentials, as seed-demo prints them, and the Harbor package the pictures show.
const (
	demoPassword = "handoff-demo"
	demoBotKey   = "hdk_demo-bot_local-demo-key-not-for-production" //nolint:gosec // G101: the published demo key seed-demo prints.
	harborID     = "ho_screenshot_harbor"
	harborFile   = "internal/handoff/testdata/harbor-v1.json"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "screenshots:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("screenshots", flag.ContinueOnError)
	web := fs.String("web", "bin/web", "the built desk")
	out := fs.String("out", "docs", "where the pictures go")
	admin := fs.String("db", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "a PostgreSQL server to make the demo's database on")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dbURL, drop, err := demoDatabase(ctx, *admin)
	if err != nil {
		return err
	}
	defer drop()
	chatAddr, err := freeAddr()
	if err != nil {
		return err
	}
	env := append(os.Environ(), "DATABASE_URL="+dbURL)
	for _, step := range [][]string{{"migrate"}, {"seed-demo", "-demo-chat", chatAddr}} {
		cmd := exec.CommandContext(ctx, *web, step...) //nolint:gosec // G204: the desk binary this command was told to photograph.
		cmd.Env, cmd.Stdout, cmd.Stderr = env, io.Discard, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %w", step[0], err)
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	crmAddr, err := freeAddr()
	if err != nil {
		return err
	}
	// The desk as localhost, the CRM as 127.0.0.1: two sites, as a CRM and the desk are.
	_, port, _ := net.SplitHostPort(addr)
	base := "http://localhost:" + port
	// The demo chat's bot hears the desk's webhooks on loopback, as `make run` lets it.
	serve := exec.CommandContext(ctx, *web, "serve", "-demo-crm", crmAddr, "-demo-chat", chatAddr) //nolint:gosec // G204: the desk binary this command was told to photograph.
	serve.Env, serve.Stderr = append(env, "ADDR="+addr, "BASE_URL="+base, "FRAME_ANCESTORS=http://"+crmAddr, "WEBHOOK_ALLOW_PRIVATE=1"), io.Discard
	if err := serve.Start(); err != nil {
		return err
	}
	defer func() { _ = serve.Process.Kill(); _ = serve.Wait() }()
	if err := waitReady(ctx, base); err != nil {
		return err
	}
	for _, day := range days {
		taken, err := walkTheDay(ctx, base, "http://"+crmAddr, dbURL, day, *out)
		if err != nil {
			return fmt.Errorf("the day on the %s: %w", day.surface, err)
		}
		for _, line := range taken {
			if _, err := fmt.Fprintln(stdout, line); err != nil {
				return err
			}
		}
	}
	if err := submitHarbor(ctx, base); err != nil {
		return err
	}
	for _, s := range shots {
		png, err := take(ctx, base, s)
		if err != nil {
			return fmt.Errorf("%s: %w", s.file, err)
		}
		if err := os.WriteFile(filepath.Join(*out, s.file), png, 0o644); err != nil { //nolint:gosec // G306: a picture for the docs, readable by all.
			return err
		}
		if _, err := fmt.Fprintf(stdout, "%s: %s as %s, %d bytes\n", filepath.Join(*out, s.file), s.path, s.email, len(png)); err != nil {
			return err
		}
	}
	taken, err := photographConversation(ctx, base, "http://"+chatAddr, *out)
	if err != nil {
		return fmt.Errorf("the conversation: %w", err)
	}
	for _, line := range taken {
		if _, err := fmt.Fprintln(stdout, line); err != nil {
			return err
		}
	}
	return nil
}

// day is one walk of an agent's day (internal/workday) and the pictures taken at its steps.
type day struct {
	surface workday.Surface
	agent   string // the demo agent who works it, and their name
	name    string
	pkg     string            // the package's id
	shots   map[string]string // the step's name → the picture's file
}

// days are the two walks: each demo agent works one, so that the second ring is not for the
// first, whose desk just closed.
var days = []day{
	{workday.Page, "agent@example.com", "Alex Agent", "ho_day_page", map[string]string{
		"ring": "day-ring.png", "replied": "day-package.png", "approvals": "day-approvals.png"}},
	{workday.Frame, "agent2@example.com", "Bea Agent", "ho_day_frame", map[string]string{
		"frame sign-in": "day-sidebar-signin.png", "approved": "day-sidebar.png"}},
}

// walkTheDay walks d on the desk at base and photographs its steps' tabs into out.
func walkTheDay(ctx context.Context, base, crm, dbURL string, d day, out string) ([]string, error) {
	pkg, err := harborPackage()
	if err != nil {
		return nil, err
	}
	pkg["handoff_id"], pkg["transfer_mode"] = d.pkg, "warm"
	pkg["refund"] = map[string]any{"amount": "150.00", "currency": "USD"}
	pkg["contact"].(map[string]any)["id"] = "cust_" + d.pkg
	agent, closeAgent := newBrowser(ctx)
	defer closeAgent()
	super, closeSuper := newBrowser(ctx)
	defer closeSuper()
	desk := workday.Desk{URL: base, BotKey: demoBotKey, Queue: "billing_t2", Password: demoPassword,
		Agent: d.agent, AgentName: d.name, Super: "supervisor@example.com", Package: pkg,
		CRM: func(id string) string { return crm + "/?ticket=" + id }}
	var taken []string
	err = workday.Walk(ctx, desk, d.surface, workday.Browsers{Agent: agent, Super: super}, func(s workday.Step) error {
		file, ok := d.shots[s.Name]
		if !ok {
			return nil
		}
		// A moment for the page to settle: the notice's announcer, a frame's fonts.
		if err := chromedp.Do(s.Tab, chromedp.Sleep(300*time.Millisecond)); err != nil {
			return err
		}
		png, err := chromedp.Run(s.Tab, chromedp.CaptureScreenshot())
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, file), png, 0o644); err != nil { //nolint:gosec // G306: a picture for the docs, readable by all.
			return err
		}
		taken = append(taken, fmt.Sprintf("%s: %s, %s, %d bytes", filepath.Join(out, file), d.surface, s.Name, len(png)))
		return nil
	})
	if err != nil {
		return nil, err
	}
	closeAgent()
	return taken, offline(ctx, dbURL, d.agent)
}

// offline waits until the agent's desk, closed, no longer counts them online.
func offline(ctx context.Context, dbURL, email string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.Background()) }()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var online bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM presence p JOIN users u ON u.id = p.user_id WHERE u.email = $1)`, email).Scan(&online); err != nil {
			return err
		}
		if !online {
			return nil
		}
	}
	return fmt.Errorf("%s still online a minute after their desk closed", email)
}

// newBrowser starts headless Chromium for one person; the func stops it.
func newBrowser(ctx context.Context) (context.Context, func()) {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath("/usr/bin/chromium"), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-first-run", true), chromedp.WindowSize(1440, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	b, cancel := chromedp.NewContext(alloc)
	b, stop := context.WithTimeout(b, 5*time.Minute)
	return b, func() { stop(); cancel(); cancelAlloc() }
}

// demoDatabase makes an empty database for the demo on the server at admin, and a func that
// drops it.
func demoDatabase(ctx context.Context, admin string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("handoffdesk_screenshots_%d", os.Getpid())
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		_ = conn.Close(ctx)
		return "", nil, err
	}
	cfg := conn.Config()
	url := fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
	return url, func() {
		_, _ = conn.Exec(context.Background(), "DROP DATABASE "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		_ = conn.Close(context.Background())
	}, nil
}

// harborPackage is the spec's example package, the Harbor billing escalation.
func harborPackage() (map[string]any, error) {
	raw, err := os.ReadFile(harborFile)
	if err != nil {
		return nil, err
	}
	var pkg map[string]any
	return pkg, json.Unmarshal(raw, &pkg)
}

// submitHarbor sends the Harbor billing escalation as the demo bot, cold, so that it waits in
// billing_t2 for an agent.
func submitHarbor(ctx context.Context, base string) error {
	pkg, err := harborPackage()
	if err != nil {
		return err
	}
	pkg["handoff_id"], pkg["transfer_mode"] = harborID, "cold"
	body, err := json.Marshal(pkg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/v1/handoffs", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+demoBotKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }() // the status says how it went
	if resp.StatusCode != http.StatusCreated {
		answer, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("submit the Harbor package: %d %s", resp.StatusCode, answer)
	}
	return nil
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	return addr, l.Close()
}

func waitReady(ctx context.Context, base string) error {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/readyz"); err == nil { //nolint:gosec // G107: the desk this command started, on loopback.
			_ = resp.Body.Close() // the status is the answer
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("the desk was not ready within a minute")
}

// take signs in as s.email in a fresh browser and photographs s.path once s.ready shows.
func take(ctx context.Context, base string, s shot) ([]byte, error) {
	bctx, stop := newBrowser(ctx)
	defer stop()
	err := chromedp.Do(bctx,
		chromedp.EmulateViewport(1440, 900),
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(`[data-testid="login-form"]`),
		chromedp.SendKeys(`input[name="email"]`, s.email),
		chromedp.SendKeys(`input[name="password"]`, demoPassword),
		chromedp.Submit(`[data-testid="login-form"]`),
		chromedp.WaitVisible(`[data-testid="my-queues"]`),
		chromedp.Navigate(base+s.path),
	)
	if err == nil && s.click != "" {
		err = chromedp.Do(bctx, chromedp.Click(s.click))
	}
	if err == nil {
		err = chromedp.Do(bctx, chromedp.WaitVisible(s.ready),
			chromedp.Sleep(500*time.Millisecond)) // the socket's first frame settles the live parts
	}
	if err != nil {
		return nil, err
	}
	return chromedp.Run(bctx, chromedp.CaptureScreenshot())
}
