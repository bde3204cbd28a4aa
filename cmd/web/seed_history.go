package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/intake"
)

// historyDays and historyPerDay shape the demo's past: enough packages over enough weeks that
// every window of the dashboard, and the one before it, has figures.
const historyDays, historyPerDay = 35, 4

// historyFirst and historyLast make the history's contacts' names: distinct for each of the
// seeded contacts, and no word of them a word of the packages' text, which masking and
// redaction would then take for the name ("Demo Customer 7" made every "Customer" a <NAME_2>).
var (
	historyFirst = []string{"Amara", "Bastien", "Carys", "Dmitri", "Elif", "Farid", "Greta", "Hiroshi", "Ines", "Jomo",
		"Katya", "Lorcan", "Mireille", "Nikhil", "Oona", "Pavel"}
	historyLast = []string{"Abernathy", "Bergstrom", "Castellanos", "Delacroix", "Esposito", "Fairweather", "Gallagher",
		"Halvorsen", "Iwasaki", "Jablonski"}
)

// historyName is the name of the history's n-th contact (from 1): the pairs run through every
// first name with each last name before any pair comes back, 160 of them.
func historyName(n int) string {
	i := n - 1
	return historyFirst[i%len(historyFirst)] + " " + historyLast[(i/len(historyFirst)+i)%len(historyLast)]
}

// seedHistory gives the demo desk weeks of past packages: resolved, returned to the bot and
// canceled, a third of them from a contact who came back a day or two after an earlier package,
// some with a bot's draft sent as is or edited. They go through the desk's own intake and actions
// on a clock set back to when each step happened, so their rows, events and eval records are
// the ones a real desk would hold. A package already stored was made by an earlier seed: the
// seed stops there, so it runs again without adding anything.
func seedHistory(ctx context.Context, db *pgxpool.Pool, users *auth.Service, now time.Time) error {
	bot, err := users.Bot(ctx, demoBotKey)
	if err != nil {
		return err
	}
	agents := make([]auth.User, 2)
	for i := range agents {
		if agents[i], err = users.UserByEmail(ctx, demoUsers[i].user.Email); err != nil {
			return err
		}
	}
	var at time.Time
	clock := func() time.Time { return at }
	in, act := intake.New(db, clock, nil, nil), actions.New(db, clock, nil, nil, nil, "")
	sender := intake.Sender{APIKeyID: bot.ID, QueueIDs: bot.QueueIDs}
	start := now.Add(-historyDays * 24 * time.Hour).Truncate(time.Hour)
	triggers := handoff.Triggers()
	queues := []string{"billing_t2", "tech_t2"}
	n := historyDays * historyPerDay
	for i := range n {
		id := "ho_demo_history_" + strconv.Itoa(i+1)
		var exists bool
		if err := db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM handoffs WHERE handoff_id = $1)`, id).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return nil
		}
		// Spread over the day: the i-th package of a day arrives at 9h, 12h, 15h or 18h, give or take.
		at = start.Add(time.Duration(i/historyPerDay)*24*time.Hour + time.Duration(9+3*(i%historyPerDay))*time.Hour +
			time.Duration(i*37%50)*time.Minute)
		contact := i + 1
		if i%3 == 2 && i >= 6 {
			contact = i - 4 // package i-5's contact, back about a day and a half later
		}
		pkg := map[string]any{
			"schema_version": "1.0", "handoff_id": id, "source_run_id": "run_demo_history_" + strconv.Itoa(i+1),
			"source_agent": []string{"tier1-support", "tier1-support", "billing-bot"}[i%3], "target_profile": queues[i%5/4],
			"transfer_mode": "warm", "trigger": string(triggers[i*7%len(triggers)]),
			"contact":           map[string]any{"id": fmt.Sprintf("cust_demo_history_%d", contact), "display_name": historyName(contact)},
			"problem_statement": "Customer asks about order " + strconv.Itoa(3000+contact) + " and its refund.", "locale": "en-US",
		}
		draft := "Hi, your refund for order " + strconv.Itoa(3000+contact) + " is on its way; it reaches your card within 5 business days."
		if i%4 != 3 {
			pkg["draft_reply"] = draft
		}
		body, err := json.Marshal(pkg)
		if err != nil {
			return err
		}
		p, err := handoff.Decode(body)
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if _, err := in.Submit(ctx, sender, p); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		if i%11 == 10 {
			at = at.Add(3 * time.Minute)
			if err := act.Cancel(ctx, bot.ID, bot.QueueIDs, id); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
			continue
		}
		agent := agents[i%2]
		if i%5 == 4 {
			agent = agents[0] // the one who works tech_t2 too
		}
		at = at.Add(time.Duration(1+i*13%14) * time.Minute)
		if err := act.Accept(ctx, agent, id); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		at = at.Add(time.Duration(4+i*17%20) * time.Minute)
		if i%5 == 1 {
			if _, err := act.ReturnToBot(ctx, agent, id, handoff.ReturnReasons()[i/5%len(handoff.ReturnReasons())], "", handoff.HandBack{}); err != nil {
				return fmt.Errorf("%s: %w", id, err)
			}
			continue
		}
		text := draft
		if i%4 == 2 || i%4 == 3 {
			text = "Hello, I've checked order " + strconv.Itoa(3000+contact) + ": the refund went out today and shows within 5 business days."
		}
		r, err := evals.ParseReply(text, nil, strconv.Itoa(15000+i*100))
		if err != nil {
			return err
		}
		if err := act.Reply(ctx, agent, id, r); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		at = at.Add(time.Duration(5+i*23%40) * time.Minute)
		if _, err := act.Resolve(ctx, agent, id, handoff.ResolutionCodes()[i%len(handoff.ResolutionCodes())], "", handoff.HandBack{}); err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
	}
	return nil
}
