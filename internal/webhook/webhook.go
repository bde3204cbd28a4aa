// Package webhook tells each bot about every status change of its handoff packages. A change
// writes an outbox row in the transaction that makes it (Queue), so a bot hears about exactly
// the changes that committed; a Deliverer then POSTs the rows, signed with the key's secret,
// retrying with backoff until the bot answers 2xx (at-least-once, deduplicated by event id). Each
// bot's endpoint has requests and a breaker of its own, so one slow or failing endpoint delays
// nobody else's webhooks; and webhooks go only to public addresses unless the deployment allows
// private ones (CheckURL).
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Event is one status change of a handoff package, addressed to the API key that sent it.
type Event struct {
	HandoffID string
	APIKeyID  int64
	Event     string // the kind of change (events.Kind)
	Status    string // the package's status after the change
	Queue     string
	Reason    string    // optional
	Note      string    // optional
	Outcome   string    // optional
	Assignee  string    // optional: the agent's display name
	Text      string    // a reply's text, unmasked: the bot sends it on to the customer
	Approval  *Approval // a refund approval's step: which request, for what
	// Refund is, on resolved as refunded, what was paid back against what was asked.
	Refund *Refund
	// SecondsToAccept is, on accepted, how long the package waited for its agent: what the
	// customer of a warm transfer waited through.
	SecondsToAccept *float64
	// Message is the message of the thread the change is about: a reply's, or the customer's
	// message that reopened the package.
	Message    *Message
	OccurredAt time.Time
	// Trace and PackageTrace are the stored contexts of the span that made the change and of the
	// package's span (tracing.Stored), which the delivery's span links to; nil while tracing is off.
	Trace, PackageTrace *string
}

// Message names a message of the package's thread (internal/conversation), which the bot reads
// whole with GET /api/v1/handoffs/{id}/messages.
type Message struct {
	ID  string
	Seq int
	// InReplyTo is, on a reply, the seq of the customer message it answers.
	InReplyTo *int
}

// Approval is the refund approval an approval_* event is about.
type Approval struct {
	ID       int64  `json:"id"`
	State    string `json:"state"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
}

// Refund is what a package resolved as refunded paid back, beside what its bot asked for
// (handoff.RefundOutcome, which this package cannot import).
type Refund struct {
	Amount            string `json:"amount"`
	Currency          string `json:"currency"`
	RequestedAmount   string `json:"requested_amount,omitempty"`
	RequestedCurrency string `json:"requested_currency,omitempty"`
	Partial           bool   `json:"partial"`
}

// payload is the body the bot receives. Its fields are a public contract: rename none.
type payload struct {
	EventID    string    `json:"event_id"`
	Event      string    `json:"event"`
	HandoffID  string    `json:"handoff_id"`
	Status     string    `json:"status"`
	Queue      string    `json:"queue"`
	OccurredAt time.Time `json:"occurred_at"`
	Reason     string    `json:"reason,omitempty"`
	Note       string    `json:"note,omitempty"`
	Outcome    string    `json:"outcome,omitempty"`
	Assignee   string    `json:"assignee,omitempty"`
	Text       string    `json:"text,omitempty"`
	// SecondsToAccept is set on accepted.
	SecondsToAccept *float64 `json:"seconds_to_accept,omitempty"`
	// The thread's message the event is about: a reply's id, seq and the customer message it
	// answers; a reopen's customer message.
	MessageID string    `json:"message_id,omitempty"`
	Seq       int       `json:"seq,omitempty"`
	InReplyTo *int      `json:"in_reply_to,omitempty"`
	Approval  *Approval `json:"approval,omitempty"`
	Refund    *Refund   `json:"refund,omitempty"`
}

// Queue adds the outbox insert of events to a batch that the caller sends inside its
// transaction, so that status changes and their webhooks cost one round trip and one statement.
func Queue(b *pgx.Batch, events ...Event) error {
	sql, args, err := insert(events)
	if err != nil {
		return err
	}
	b.Queue(sql, args...)
	return nil
}

func insert(events []Event) (string, []any, error) {
	ids := make([]string, len(events))
	keys := make([]int64, len(events))
	handoffs := make([]string, len(events))
	names := make([]string, len(events))
	bodies := make([]string, len(events))
	traces, packageTraces := make([]*string, len(events)), make([]*string, len(events))
	for i, e := range events {
		if e.Event == "" || e.HandoffID == "" || e.OccurredAt.IsZero() {
			return "", nil, fmt.Errorf("enqueue webhook %q: event, handoff id and occurrence time are required", e.Event)
		}
		// 128 random bits need no coordination between instances to stay unique; the bot dedupes
		// redeliveries on this id.
		ids[i] = "evt_" + rand.Text()
		p := payload{
			EventID:         ids[i],
			Event:           e.Event,
			HandoffID:       e.HandoffID,
			Status:          e.Status,
			Queue:           e.Queue,
			OccurredAt:      e.OccurredAt.UTC(),
			Reason:          e.Reason,
			Note:            e.Note,
			Outcome:         e.Outcome,
			Assignee:        e.Assignee,
			Text:            e.Text,
			SecondsToAccept: e.SecondsToAccept,
			Approval:        e.Approval,
			Refund:          e.Refund,
		}
		if m := e.Message; m != nil {
			p.MessageID, p.Seq, p.InReplyTo = m.ID, m.Seq, m.InReplyTo
		}
		body, err := json.Marshal(p)
		if err != nil {
			return "", nil, fmt.Errorf("enqueue webhook %s for %s: %w", e.Event, e.HandoffID, err)
		}
		keys[i], handoffs[i], names[i], bodies[i] = e.APIKeyID, e.HandoffID, e.Event, string(body)
		traces[i], packageTraces[i] = e.Trace, e.PackageTrace
	}
	// An event for a key without a webhook URL is settled as it is written, rather than claimed
	// and updated by a deliverer later for nothing. The rows take their ids in the order given,
	// whatever order the join yields, since a package's events are delivered in the order of
	// their ids (its queued before its warm_timeout, written together by intake).
	//
	// A return's or a resolve's payload carries the package's hand_back, as the close wrote it
	// earlier in the same transaction (internal/actions): where the thread stood is read there,
	// under the close's lock, and copied here rather than read twice. The event's test sits inside
	// a lateral read that OFFSET 0 keeps from being merged into the join, so that PostgreSQL checks
	// it before looking the package up: as the join's condition, it looked up every event's
	// package (intake's queued and warm_timeout among them) and only then dropped the row.
	return `INSERT INTO webhook_outbox (event_id, api_key_id, handoff_id, event, payload, state, trace_parent, package_trace)
		SELECT e.event_id, e.api_key_id, e.handoff_id, e.event,
			CASE WHEN h.hand_back IS NULL THEN e.payload ELSE e.payload || jsonb_build_object('hand_back', h.hand_back) END,
			CASE WHEN k.webhook_url IS NULL THEN 'no_endpoint' ELSE 'pending' END, e.trace_parent, e.package_trace
		FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::text[]::jsonb[], $6::text[], $7::text[])
			WITH ORDINALITY AS e(event_id, api_key_id, handoff_id, event, payload, trace_parent, package_trace, i)
		LEFT JOIN api_keys k ON k.id = e.api_key_id
		LEFT JOIN LATERAL (SELECT h.hand_back FROM handoffs h
			WHERE e.event IN ('returned_to_bot', 'resolved') AND h.handoff_id = e.handoff_id OFFSET 0) h ON true
		ORDER BY e.i`,
		[]any{ids, keys, handoffs, names, bodies, traces, packageTraces}, nil
}

// The headers a bot checks a delivery with. Every delivery is signed per the Standard Webhooks
// specification (standardwebhooks.com), so that its reference libraries and Svix's verify it as
// they are; and, for a deprecation period docs/bots.md states, as the desk signed before. Every
// signature covers the timestamp, so that a delivery captured on its way cannot be replayed
// later: the bot refuses a timestamp too far from its own clock, and changing the timestamp breaks
// the signature. Each attempt is stamped and signed afresh, so a retry an hour later still passes
// that check.
const (
	// The event id, the same on every attempt: what Standard Webhooks signs and dedupes by.
	standardIDHeader        = "Webhook-Id"
	standardTimestampHeader = "Webhook-Timestamp" // Unix seconds, as X-Handoff-Timestamp
	// Space-separated "v1,<base64>" entries, one per secret while a rotation's overlap lasts.
	standardSignatureHeader = "Webhook-Signature"

	timestampHeader = "X-Handoff-Timestamp"
	// A comma-separated list of version=signature entries, of which a bot accepts any it can
	// verify. A secret rotation sends one per secret ("v1=<new>, v1=<old>") and a later scheme
	// can stand beside v1, neither changing the header's format again.
	signatureHeader = "X-Handoff-Webhook-Signature"
	// The signature of the body alone, as before v1: kept while bots move over (see docs/bots.md),
	// because bots that check only it would otherwise refuse every delivery.
	legacySignatureHeader = "X-Handoff-Signature"
)

// SecretPrefix starts every webhook secret, as Standard Webhooks writes one.
const SecretPrefix = "whsec_"

// NewSecret returns a new webhook signing secret as Standard Webhooks writes one: "whsec_" and
// the standard base64 of 32 random bytes, the HMAC key.
func NewSecret() (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(key), nil
}

// standardKey is the HMAC key of a secret under Standard Webhooks: the bytes that the base64
// after "whsec_" encodes, as its libraries decode it. A secret issued before the desk spoke the
// standard ("whsec_" and 43 URL-safe characters, never valid standard base64) signs with its own
// bytes, which those libraries take as a "raw" secret.
func standardKey(secret string) []byte {
	if encoded, ok := strings.CutPrefix(secret, SecretPrefix); ok {
		if key, err := base64.StdEncoding.DecodeString(encoded); err == nil && len(key) > 0 {
			return key
		}
	}
	return []byte(secret)
}

// standardSignature is one entry of Webhook-Signature: "v1," and the base64 HMAC-SHA256 of the
// event id, the timestamp and the body, joined by dots, under the secret's standard key.
func standardSignature(secret, id, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, standardKey(secret))
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// signature is the v1 entry of X-Handoff-Webhook-Signature: "v1=" and the hex HMAC-SHA256 of the
// timestamp, a dot and the body, under the whole secret as text. Deprecated with its header.
func signature(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp + "."))
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

// legacySignature is X-Handoff-Signature: "sha256=" and the hex HMAC-SHA256 of the body alone.
func legacySignature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}
