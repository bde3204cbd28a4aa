package dashboard

import (
	"cmp"
	"context"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"
)

// Verdicts are the customer's verdicts on one leg of some packages: how many, and their mean
// score from 1 to 5 (nil: none).
type Verdicts struct {
	N    int
	Mean *float64
}

// CSAT is a queue's or an agent's verdicts over the packages of the window and of the one before,
// the agents' leg and the bot's apart. An agent's row has the human leg only: the bot's is no
// agent's doing.
type CSAT struct {
	Queue       string // a queue's row
	Name, Email string // an agent's row
	Human, Bot  [2]Verdicts
}

// The indexes of CSAT's periods.
const (
	Current  = 0
	Previous = 1
)

// readCSAT reads the verdicts given on the two windows' packages, by the queue and the agent
// each verdict rates (the package's when it closed, internal/csat), in name order.
func readCSAT(ctx context.Context, tx pgx.Tx, q queues, s *Stats) error {
	rows, err := tx.Query(ctx, `
		SELECT c.queue_id, coalesce(u.display_name, ''), coalesce(u.email, ''), c.leg, h.created_at < $3, count(*), avg(c.score)::float8
		FROM csat c JOIN handoffs h ON h.id = c.handoff_id LEFT JOIN users u ON u.id = c.agent_id
		WHERE c.queue_id = ANY($1) AND h.created_at >= $2 AND h.created_at < $4
		GROUP BY c.queue_id, u.display_name, u.email, c.leg, h.created_at < $3`,
		q.ids, s.Previous.From, s.Current.From, s.Current.To)
	if err != nil {
		return err
	}
	byQueue, byAgent := map[int64]*CSAT{}, map[string]*CSAT{}
	var queueID int64
	var name, email, leg string
	var previous bool
	var n int
	var mean float64
	if _, err := pgx.ForEachRow(rows, []any{&queueID, &name, &email, &leg, &previous, &n, &mean}, func() error {
		period := Current
		if previous {
			period = Previous
		}
		add := func(c *CSAT) {
			v := &c.Human[period]
			if leg == "bot" {
				v = &c.Bot[period]
			}
			total := float64(v.N)*deref(v.Mean) + float64(n)*mean
			v.N += n
			m := total / float64(v.N)
			v.Mean = &m
		}
		if byQueue[queueID] == nil {
			byQueue[queueID] = &CSAT{Queue: q.names[queueID]}
		}
		add(byQueue[queueID])
		if leg == "human" && email != "" {
			if byAgent[email] == nil {
				byAgent[email] = &CSAT{Name: name, Email: email}
			}
			add(byAgent[email])
		}
		return nil
	}); err != nil {
		return err
	}
	for _, id := range q.order {
		if c := byQueue[id]; c != nil {
			s.CSATQueues = append(s.CSATQueues, *c)
		}
	}
	for _, c := range byAgent {
		s.CSATAgents = append(s.CSATAgents, *c)
	}
	slices.SortFunc(s.CSATAgents, func(a, b CSAT) int { return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.Email, b.Email)) })
	return nil
}

func deref(f *float64) float64 {
	if f == nil {
		return 0
	}
	return *f
}
