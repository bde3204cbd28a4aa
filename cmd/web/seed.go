package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/webhook"
)

// The demo's secrets are fixed so that every `make run` can print them; they are for a local
// desk only and say so.
const (
	demoPassword = "handoff-demo"
	demoBotKey   = "hdk_demo-bot_local-demo-key-not-for-production"
	// Standard Webhooks' form, base64 after "whsec_", so that its libraries take it: the base64 of
	// "local-demo-secret-not-for-production".
	demoWebhookSecret = "whsec_bG9jYWwtZGVtby1zZWNyZXQtbm90LWZvci1wcm9kdWN0aW9u" //nolint:gosec // G101: a published demo secret for local desks, printed by every `make run` on purpose.
)

// The two teams take each other's misrouted packages, so the demo shows a transfer out of the box.
var demoQueues = []queue.New{
	{Name: "billing_t2", AcceptsTopLevelTransfers: true},
	{Name: "billing_escalations", Parent: "billing_t2"},
	{Name: "tech_t2", AcceptsTopLevelTransfers: true},
}

var demoUsers = []struct {
	user   auth.NewUser
	queues []string
}{
	{auth.NewUser{Email: "agent@example.com", DisplayName: "Alex Agent", Role: auth.RoleAgent}, []string{"billing_t2", "tech_t2"}},
	{auth.NewUser{Email: "agent2@example.com", DisplayName: "Bea Agent", Role: auth.RoleAgent}, []string{"billing_t2", "billing_escalations"}},
	{auth.NewUser{Email: "supervisor@example.com", DisplayName: "Sam Supervisor", Role: auth.RoleSupervisor}, []string{"billing_t2", "billing_escalations", "tech_t2"}},
	{auth.NewUser{Email: "admin@example.com", DisplayName: "Ada Admin", Role: auth.RoleAdmin}, nil},
}

// ignoreConflict lets the seed run again on a seeded database.
func ignoreConflict(err error) error {
	if desk.ErrorCode(err) == desk.Conflict {
		return nil
	}
	return err
}

// demoChatQueue is the queue the demo chat's bot hands off to; demoChatAddr where serve -demo-chat
// listens by default (`make run`), whose /webhook the demo key's webhooks go to.
const (
	demoChatQueue = "billing_t2"
	demoChatAddr  = "127.0.0.1:8082"
)

func seedDemo(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	chatAddr := demoChatAddr
	if err := parseFlags("seed-demo", args, stdout, func(fs *flag.FlagSet) {
		fs.StringVar(&chatAddr, "demo-chat", chatAddr, "where serve -demo-chat listens: the demo bot key's webhooks go there")
	}); err != nil {
		return err
	}
	if err := loopback("-demo-chat", chatAddr, demoChatAddr); err != nil {
		return err
	}
	webhookURL := "http://" + chatAddr + "/webhook"
	return withDB(ctx, getenv, logger, func(db *pgxpool.Pool) error {
		queues, users := queue.NewService(db), auth.NewService(db)
		for _, q := range demoQueues {
			if _, err := queues.Create(ctx, q); ignoreConflict(err) != nil {
				return fmt.Errorf("seed-demo: queue %s: %w", q.Name, err)
			}
		}
		for _, d := range demoUsers {
			d.user.Password = demoPassword
			if _, err := users.CreateUser(ctx, d.user); ignoreConflict(err) != nil {
				return fmt.Errorf("seed-demo: user %s: %w", d.user.Email, err)
			}
			u, err := users.UserByEmail(ctx, d.user.Email)
			if err != nil {
				return fmt.Errorf("seed-demo: user %s: %w", d.user.Email, err)
			}
			if err := queues.AddMembers(ctx, u.ID, d.queues); err != nil {
				return fmt.Errorf("seed-demo: user %s: %w", d.user.Email, err)
			}
		}
		queueIDs, err := queues.IDsByName(ctx, []string{"billing_t2", "tech_t2"})
		if err != nil {
			return fmt.Errorf("seed-demo: %w", err)
		}
		// The demo key is seeded without a webhook URL, as a database seeded before is set back to,
		// so that the history's webhooks settle as no_endpoint (settleWebhooks): they are the demo's
		// past, about packages no chat holds.
		demoKey := auth.NewAPIKey{Name: "demo-bot", QueueIDs: queueIDs}
		_, err = users.InsertAPIKeyWithSecrets(ctx, demoKey, demoBotKey, demoWebhookSecret)
		if desk.ErrorCode(err) == desk.Conflict {
			err = setDemoKeyWebhook(ctx, db, users, demoKey)
		}
		if err != nil {
			return fmt.Errorf("seed-demo: api key: %w", err)
		}
		if err := seedHistory(ctx, db, users, time.Now()); err != nil {
			return fmt.Errorf("seed-demo: history: %w", err)
		}
		if err := seedReplies(ctx, db, users); err != nil {
			return fmt.Errorf("seed-demo: replies: %w", err)
		}
		if err := seedRefunds(ctx, db, users); err != nil {
			return fmt.Errorf("seed-demo: refunds: %w", err)
		}
		if err := settleWebhooks(ctx, db, logger); err != nil {
			return fmt.Errorf("seed-demo: the history's webhooks: %w", err)
		}
		// Then the demo chat's bot is the demo key's: its webhooks go to the chat, on this machine,
		// which serve lets through as `make run` sets WEBHOOK_ALLOW_PRIVATE=1.
		demoKey.WebhookURL, demoKey.AllowPrivateWebhook = webhookURL, true
		if err := setDemoKeyWebhook(ctx, db, users, demoKey); err != nil {
			return fmt.Errorf("seed-demo: api key: %w", err)
		}
		if _, err := fmt.Fprintln(stdout, "Demo desk ready. Log in with any of these (password "+demoPassword+"):"); err != nil {
			return err
		}
		for _, d := range demoUsers {
			if _, err := fmt.Fprintf(stdout, "  %-24s %s\n", d.user.Email, d.user.Role); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintf(stdout, "Demo bot key (queues billing_t2, tech_t2): %s\n"+
			"Its webhooks go to the demo chat, %s, signed with %s\n", demoBotKey, webhookURL, demoWebhookSecret)
		return err
	})
}

// setDemoKeyWebhook sets the demo key's queues and webhook URL to n's.
func setDemoKeyWebhook(ctx context.Context, db *pgxpool.Pool, users *auth.Service, n auth.NewAPIKey) error {
	k, err := users.APIKeyByName(ctx, n.Name)
	if err != nil {
		return err
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := auth.SetKeyReach(ctx, tx, k.ID, auth.KeyReach{QueueIDs: n.QueueIDs, WebhookURL: n.WebhookURL, AllowPrivateWebhook: n.AllowPrivateWebhook})
		return err
	})
}

// settleWebhooks runs the outbox's due rows through a deliverer until none is left due: those of
// a key without a webhook URL, the demo key's while it is seeded, settle as no_endpoint without
// a request. Any other key's go out as a running desk would send them. Bounded: a pass claims at
// most a few rows per key.
func settleWebhooks(ctx context.Context, db *pgxpool.Pool, logger *slog.Logger) error {
	d := webhook.NewDeliverer(db, logger, webhook.Options{})
	for range 1000 {
		n, err := d.DeliverDue(ctx)
		if err != nil || n == 0 {
			return err
		}
	}
	return nil
}

// demoReplies are packages the demo agent has already answered and resolved, so that a new desk
// has eval records to look at: a draft sent as is, an edited one, and a reply written from
// scratch.
var demoReplies = []struct {
	id, contact, problem, draft, final string
	tags                               []string
	transcript                         []map[string]string
}{
	{"ho_demo_reply_as_is", "Jo Rivera", "Customer asks when the refund for order 1182 arrives.",
		"Hi Jo, your refund for order 1182 was issued yesterday; it reaches your card within 5 business days.",
		"Hi Jo, your refund for order 1182 was issued yesterday; it reaches your card within 5 business days.", nil, nil},
	{"ho_demo_reply_edited", "Sam Patel", "Customer was charged twice for the June plan and wants one charge back.",
		"Hello, we have refunded both charges and cancelled your plan.",
		"Hello Sam, we have refunded the duplicate charge; your June plan stays active.", []string{"factual_error", "tone"},
		[]map[string]string{
			{"role": "assistant", "content": "Hi! How can I help with your account today?"},
			{"role": "user", "content": "I was charged twice for the June plan."},
			{"role": "user", "content": "Can you give one of them back?"},
			{"role": "assistant", "content": "I can see two charges of 19.00 USD on June 1."},
			{"role": "user", "content": "Yes, those. I only want the plan once."},
			{"role": "assistant", "content": "Refunds need a person: I'm connecting you with a billing specialist."},
		}},
	{"ho_demo_reply_scratch", "Lee Chen", "Customer wants an invoice with the company's VAT number on it.",
		"", "Hi Lee, I've reissued invoice INV-2291 with your VAT number; it is in your account under Billing.", []string{"missing_info"}, nil},
}

// seedReplies sends the demo replies through the desk's own actions. A package that is no longer
// waiting was answered by an earlier seed and is left alone.
func seedReplies(ctx context.Context, db *pgxpool.Pool, users *auth.Service) error {
	bot, err := users.Bot(ctx, demoBotKey)
	if err != nil {
		return err
	}
	agent, err := users.UserByEmail(ctx, demoUsers[0].user.Email)
	if err != nil {
		return err
	}
	in, act := intake.New(db, time.Now, nil, nil), actions.New(db, time.Now, nil, nil, nil, "")
	for i, d := range demoReplies {
		pkg := map[string]any{
			"schema_version": "1.0", "handoff_id": d.id, "source_run_id": fmt.Sprintf("run_demo_%d", i+1),
			"source_agent": "tier1-support", "target_profile": "billing_t2", "transfer_mode": "warm",
			"trigger": "policy_boundary", "contact": map[string]any{"id": fmt.Sprintf("cust_demo_%d", i+1), "display_name": d.contact},
			"problem_statement": d.problem, "locale": "en-US",
		}
		if d.draft != "" {
			pkg["draft_reply"] = d.draft
		}
		if d.transcript != nil {
			pkg["transcript"] = d.transcript
		}
		body, err := json.Marshal(pkg)
		if err != nil {
			return err
		}
		p, err := handoff.Decode(body)
		if err != nil {
			return fmt.Errorf("%s: %w", d.id, err)
		}
		if _, err := in.Submit(ctx, intake.Sender{APIKeyID: bot.ID, QueueIDs: bot.QueueIDs}, p); err != nil {
			return fmt.Errorf("%s: %w", d.id, err)
		}
		var status handoff.Status
		if err := db.QueryRow(ctx, `SELECT status FROM handoffs WHERE handoff_id = $1`, d.id).Scan(&status); err != nil {
			return err
		}
		if status != handoff.StatusQueued {
			continue
		}
		r, err := evals.ParseReply(d.final, d.tags, strconv.Itoa(20000+i*15000))
		if err != nil {
			return err
		}
		if err := act.Accept(ctx, agent, d.id); err != nil {
			return fmt.Errorf("%s: %w", d.id, err)
		}
		if err := act.Reply(ctx, agent, d.id, r); err != nil {
			return fmt.Errorf("%s: %w", d.id, err)
		}
		if _, err := act.Resolve(ctx, agent, d.id, "solved", "", handoff.HandBack{}); err != nil {
			return fmt.Errorf("%s: %w", d.id, err)
		}
	}
	return nil
}

// demoRefunds are packages whose refund is above billing_t2's threshold (50.00 USD): one waits in
// the queue for an agent to take through the approval flow, and one already waits on /approvals
// for a supervisor, asked by the demo agent.
var demoRefunds = []struct {
	id, contact, problem, amount string
	request                      string // the agent's note asking for approval; "" leaves it queued
}{
	{"ho_demo_refund_queued", "Maya Ortiz", "Customer was billed for a year's plan after cancelling in the trial and wants it back.",
		"189.00", ""},
	{"ho_demo_refund_pending", "Noor Haddad", "Customer's order 7730 arrived broken twice; she wants the full order refunded.",
		"240.00", "Second broken delivery; photos in the CRM ticket. Full refund per goodwill policy."},
}

// seedRefunds submits the demo refunds through the desk's own intake and actions. A package that
// is no longer waiting was handled by an earlier seed and is left alone.
func seedRefunds(ctx context.Context, db *pgxpool.Pool, users *auth.Service) error {
	bot, err := users.Bot(ctx, demoBotKey)
	if err != nil {
		return err
	}
	agent, err := users.UserByEmail(ctx, demoUsers[0].user.Email)
	if err != nil {
		return err
	}
	in, act := intake.New(db, time.Now, nil, nil), actions.New(db, time.Now, nil, nil, nil, "")
	for i, d := range demoRefunds {
		body, err := json.Marshal(map[string]any{
			"schema_version": "1.0", "handoff_id": d.id, "source_run_id": fmt.Sprintf("run_demo_refund_%d", i+1),
			"source_agent": "tier1-support", "target_profile": "billing_t2", "transfer_mode": "warm",
			"trigger": "policy_boundary", "contact": map[string]any{"id": fmt.Sprintf("cust_demo_refund_%d", i+1), "display_name": d.contact},
			"problem_statement": d.problem, "locale": "en-US", "refund": map[string]any{"amount": d.amount, "currency": "USD"},
			"recommended_next_step": "Refund " + d.amount + " USD once a supervisor approves.",
		})
		if err != nil {
			return err
		}
		p, err := handoff.Decode(body)
		if err != nil {
			return fmt.Errorf("%s: %w", d.id, err)
		}
		if _, err := in.Submit(ctx, intake.Sender{APIKeyID: bot.ID, QueueIDs: bot.QueueIDs}, p); err != nil {
			return fmt.Errorf("%s: %w", d.id, err)
		}
		var status handoff.Status
		if err := db.QueryRow(ctx, `SELECT status FROM handoffs WHERE handoff_id = $1`, d.id).Scan(&status); err != nil {
			return err
		}
		if status != handoff.StatusQueued || d.request == "" {
			continue
		}
		if err := act.Accept(ctx, agent, d.id); err != nil {
			return fmt.Errorf("%s: %w", d.id, err)
		}
		if _, err := act.RequestApproval(ctx, agent, d.id, d.request); err != nil {
			return fmt.Errorf("%s: %w", d.id, err)
		}
	}
	return nil
}
