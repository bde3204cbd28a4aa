package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/queue"
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

func seedDemo(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer, logger *slog.Logger) error {
	if err := parseFlags("seed-demo", args, stdout); err != nil {
		return err
	}
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
		_, err = users.InsertAPIKeyWithSecrets(ctx, auth.NewAPIKey{Name: "demo-bot", QueueIDs: queueIDs}, demoBotKey, demoWebhookSecret)
		if ignoreConflict(err) != nil {
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
		if _, err := fmt.Fprintln(stdout, "Demo desk ready. Log in with any of these (password "+demoPassword+"):"); err != nil {
			return err
		}
		for _, d := range demoUsers {
			if _, err := fmt.Fprintf(stdout, "  %-24s %s\n", d.user.Email, d.user.Role); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintf(stdout, "Demo bot key (queues billing_t2, tech_t2): %s\n", demoBotKey)
		return err
	})
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
	in, act := intake.New(db, time.Now, nil, nil), actions.New(db, time.Now, nil, nil, nil)
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
	in, act := intake.New(db, time.Now, nil, nil), actions.New(db, time.Now, nil, nil, nil)
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
