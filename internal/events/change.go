package events

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/webhook"
)

// Change is one state change of a package, or of a person's access (Kind.ChangesAccess), as the
// live desk, the audit and the bot learn it.
type Change struct {
	HandoffID int64  // the row id
	PublicID  string // the bot's handoff_id
	QueueID   int64
	Queue     string
	// FromQueueID is the queue the package left, when the change moved it: pages of that queue
	// drop its card.
	FromQueueID int64
	APIKeyID    int64
	Kind        Kind
	// Status is the package's status after the change.
	Status    handoff.Status
	ActorUser *int64
	ActorBot  *int64
	Reason    string
	Note      string
	Outcome   string
	Assignee  string
	// Text is a reply's text, for the bot's webhook only: the log records that a reply was sent,
	// and the reply itself is kept by evals.
	Text string
	// SecondsToAccept is, on Accepted, how long the package waited for its agent (the bot's
	// webhook carries it).
	SecondsToAccept *float64
	// Approval is the refund approval a step of one is about, for the bot's webhook; the log
	// keeps its id in Detail.
	Approval *webhook.Approval
	// Refund is what a resolution as refunded paid back against what was asked, for the webhook.
	Refund *handoff.RefundOutcome
	// Message is the thread's message a reply sent or a reopen came with, for the webhook.
	Message *webhook.Message
	Detail  map[string]any
	At      time.Time
	// UserID is the person whose access changed, for the kinds that change it.
	UserID int64
	// Trace is the stored context of the span that made the change, and PackageTrace the
	// package's (tracing.Stored): the change's webhook keeps both, for its delivery's span to
	// link to. Nil while tracing is off.
	Trace, PackageTrace *string
}

// Channel is the PostgreSQL notification channel on which instances tell each other to read the log.
const Channel = "desk_events"

// Queue adds changes to a batch the caller sends inside the changes' transaction: one log row
// each and, for the changes a bot hears about, their webhooks. All of them commit or roll back
// with the changes, in the caller's round trip, as one insert per table whatever their number: a
// statement's fixed cost in PostgreSQL outweighs a small row's.
func Queue(b *pgx.Batch, cs ...Change) error {
	n := len(cs)
	var (
		at                    = make([]time.Time, n)
		kinds, details        = make([]string, n), make([]string, n)
		queues, fromQueues    = make([]*int64, n), make([]*int64, n)
		handoffs, subjects    = make([]*int64, n), make([]*int64, n)
		actorUsers, actorBots = make([]*int64, n), make([]*int64, n)
		hooks                 []webhook.Event
		accessChanged         bool
	)
	for i, c := range cs {
		if !slices.Contains(Kinds(), c.Kind) {
			return fmt.Errorf("record change of %s: unknown kind %q", c.PublicID, c.Kind)
		}
		detail, err := c.detail()
		if err != nil {
			return err
		}
		at[i], kinds[i], details[i] = c.At, string(c.Kind), string(detail)
		queues[i], fromQueues[i], handoffs[i] = nonZero(c.QueueID), nonZero(c.FromQueueID), nonZero(c.HandoffID)
		subjects[i], actorUsers[i], actorBots[i] = nonZero(c.UserID), c.ActorUser, c.ActorBot
		accessChanged = accessChanged || c.Kind.ChangesAccess() || c.Kind.Configures()
		if c.Kind.TellsBot() {
			hooks = append(hooks, webhook.Event{
				HandoffID: c.PublicID, APIKeyID: c.APIKeyID, Event: string(c.Kind), Status: string(c.Status), Queue: c.Queue,
				Reason: c.Reason, Note: c.Note, Outcome: c.Outcome, Assignee: c.Assignee, Text: c.Text, Approval: c.Approval, Refund: (*webhook.Refund)(c.Refund), OccurredAt: c.At,
				SecondsToAccept: c.SecondsToAccept, Message: c.Message,
				Trace: c.Trace, PackageTrace: c.PackageTrace,
			})
		}
	}
	// actor_saw_contact says whether the person who acted could see the package's contact then: their
	// role against the PII role of the queue they acted in (the one a move left), ranked as
	// auth.Roles ranks them. What they wrote in the detail is masked for others by it
	// (handoff.Writer); a bot hands the contact over, and sees it.
	b.Queue(`INSERT INTO events (at, kind, queue_id, from_queue_id, handoff_id, subject_user, actor_user, actor_bot, detail, actor_saw_contact)
		SELECT t.at, t.kind, t.queue_id, t.from_queue_id, t.handoff_id, t.subject_user, t.actor_user, t.actor_bot, t.detail,
			coalesce(array_position($10::text[], u.role) >= array_position($10::text[], q.pii_min_role), true)
		FROM unnest($1::timestamptz[], $2::text[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
			$7::bigint[], $8::bigint[], $9::text[]::jsonb[])
			WITH ORDINALITY AS t(at, kind, queue_id, from_queue_id, handoff_id, subject_user, actor_user, actor_bot, detail, n)
		LEFT JOIN users u ON u.id = t.actor_user AND t.handoff_id IS NOT NULL
		LEFT JOIN queues q ON q.id = coalesce(t.from_queue_id, t.queue_id) AND t.handoff_id IS NOT NULL
		ORDER BY t.n`,
		at, kinds, queues, fromQueues, handoffs, subjects, actorUsers, actorBots, details, roleRanks())
	if accessChanged {
		// Open sockets must close, and cached keys go, at once on every instance, whoever made the
		// change: the CLI runs no notifier. Access and admin changes are rare, so NOTIFY's
		// commit-time lock costs nothing here.
		b.Queue(`SELECT pg_notify($1, '')`, Channel)
	}
	if len(hooks) == 0 {
		return nil
	}
	return webhook.Queue(b, hooks...)
}

// roleRanks is auth.Roles as the log's insert ranks them: by their place in the list.
func roleRanks() []string {
	ranks := make([]string, len(auth.Roles))
	for i, r := range auth.Roles {
		ranks[i] = string(r)
	}
	return ranks
}

// QueueRings adds the log rows of rings whose offers the batch has written before them: each at
// its offer's offered_at and with its until as the offers row holds them. Intake stamps a batch's
// rings before it writes them, and moves a ring past the end of one its agent had meanwhile
// (intake's newOffers); the log must tell the moved times, or an agent's rings would overlap in it.
func QueueRings(b *pgx.Batch, cs ...Change) error {
	if len(cs) == 0 {
		return nil
	}
	var handoffs, queues, agents []int64
	var details []string
	for _, c := range cs {
		if c.Kind != Offered {
			return fmt.Errorf("record ring of %s: kind %q is not a ring", c.PublicID, c.Kind)
		}
		withoutUntil := c
		withoutUntil.Detail = maps.Clone(c.Detail)
		delete(withoutUntil.Detail, "until")
		detail, err := withoutUntil.detail()
		if err != nil {
			return err
		}
		handoffs, queues, agents, details = append(handoffs, c.HandoffID), append(queues, c.QueueID), append(agents, c.UserID), append(details, string(detail))
	}
	b.Queue(`INSERT INTO events (at, kind, queue_id, handoff_id, subject_user, detail)
		SELECT o.offered_at, 'offered', t.queue_id, t.handoff_id, t.agent, t.detail || jsonb_build_object('until', o.until)
		FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[]::jsonb[]) WITH ORDINALITY AS t(handoff_id, queue_id, agent, detail, n)
		JOIN offers o ON o.handoff_id = t.handoff_id AND o.user_id = t.agent AND o.ended_at IS NULL
		ORDER BY t.n`, handoffs, queues, agents, details)
	return nil
}

// Rings makes c the start of a ring: the warm package c is about rings the agent userID, named
// agent, until until. Its detail names both, for the package's timeline and the agent's pages.
func (c Change) Rings(userID int64, agent string, until time.Time) Change {
	c.Kind, c.UserID, c.Detail = Offered, userID, map[string]any{"agent": agent, "until": until}
	return c
}

func nonZero(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}

// detail is the log's account of c: the status it left the package in, and whatever the actor
// gave as reason, note or outcome.
func (c Change) detail() ([]byte, error) {
	detail := map[string]any{}
	if c.Status != "" {
		detail["status"] = c.Status
	}
	maps.Copy(detail, c.Detail)
	for k, v := range map[string]string{"reason": c.Reason, "note": c.Note, "outcome": c.Outcome, "queue": c.Queue} {
		if v != "" {
			detail[k] = v
		}
	}
	return json.Marshal(detail)
}
