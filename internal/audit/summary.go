package audit

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/handoffdesk/desk/internal/events"
)

// Summary is the event as a sentence a supervisor reads without knowing the log's keys: who did
// what, and for a change, each value before → after. It reads only e, whose detail is already
// masked for the reader, so the sentence shows no more than the detail does. queues names the
// queue ids some details hold (a user's queues, a key's); an id missing from it is written as
// its number.
//
// A kind it has no sentence for (one added later) and a detail key it does not word are still
// shown, as "key: value": the sentence never hides what the log holds.
func Summary(e Entry, queues map[int64]string) string {
	w := worder{d: e.Detail, queues: queues, used: map[string]bool{"status": true, "queue": true}}
	actor := who(e.Actor)
	subject := cmp.Or(e.Subject, "someone")
	if e.Kind.IsApproval() {
		w.use("approval_id")
	}
	var s string
	var parts []string // the changes, each before → after
	switch e.Kind {
	case events.Queued:
		s = fmt.Sprintf("%s sent the package to %s", actor, w.queueOr(e.Queue))
		if r := w.code("reason"); r != "" {
			s += " (trigger " + r + ")"
		}
	case events.Reserved:
		s = fmt.Sprintf("%s reserved the package in %s", actor, w.queueOr(e.Queue))
		if until := w.time("reserved_until"); until != "" {
			s += " until " + until
		}
	case events.Released:
		switch w.str("reason") {
		case "assignee_disabled":
			w.use("from_assignee")
			s = fmt.Sprintf("The package went back to %s: its holder was disabled", w.queueOr(e.Queue))
		default:
			s = fmt.Sprintf("The reservation ran out: the package went back to %s", w.queueOr(e.Queue))
		}
	case events.Accepted:
		s = fmt.Sprintf("%s accepted the package in %s", actor, w.queueOr(e.Queue))
	case events.Rejected:
		s = fmt.Sprintf("%s rejected the package", actor)
		if r := w.str("reason"); r != "" {
			s += ": " + r
		}
		if from := w.str("from_queue"); from != "" && from != e.Queue {
			s += "; queue " + from + " → " + w.queueOr(e.Queue)
		}
		if n := w.str("rejections"); n != "" {
			s += "; rejection " + n
		}
		if w.flag("needs_supervisor") {
			s += "; it needs a supervisor"
		}
	case events.Transferred:
		s = fmt.Sprintf("%s transferred the package: queue %s → %s", actor, w.str("from_queue"), cmp.Or(w.str("to_queue"), w.queueOr(e.Queue)))
		if w.str("reason") == "queue_disabled" {
			s += ", as its queue was disabled"
		}
	case events.ReturnedToBot:
		w.use("outcome")
		s = fmt.Sprintf("%s returned the package to the bot: %s", actor, w.code("reason"))
	case events.Resolved:
		w.use("reason")
		s = fmt.Sprintf("%s resolved the package as %s", actor, w.code("outcome"))
		if paid := w.money(); paid != "" {
			s += ", paying back " + paid
		}
		if asked := strings.TrimSpace(w.str("requested_amount") + " " + w.str("requested_currency")); asked != "" && asked != w.money() {
			s += " of " + asked + " asked"
		}
	case events.Expired:
		w.use("outcome")
		s = fmt.Sprintf("The package expired unclaimed in %s", w.queueOr(e.Queue))
	case events.Canceled:
		w.use("outcome")
		s = fmt.Sprintf("%s canceled the package: the customer left", actor)
	case events.Presence:
		s = "Someone's presence changed (available, break, away or offline)"
	case events.Noted:
		s = fmt.Sprintf("%s added an internal note", actor)
	case events.Message:
		w.use("role")
		if w.str("role") == "assistant" {
			s = fmt.Sprintf("%s wrote to the customer: message %s of the conversation", actor, w.str("seq"))
		} else {
			s = fmt.Sprintf("%s relayed the customer's message %s of the conversation", actor, w.str("seq"))
		}
	case events.Reopened:
		w.use("reason")
		s = fmt.Sprintf("The customer wrote again (message %s): %s reopened the package in %s", w.str("seq"), actor, w.queueOr(e.Queue))
	case events.ReplyDelivery:
		s = "The desk recorded where a reply's webhook stands: " + w.code("state")
	case events.Viewing:
		s = "Who has the package open changed"
	case events.Reassigned:
		s = fmt.Sprintf("%s reassigned the package: %s → %s", actor, cmp.Or(w.str("from"), "nobody"), w.str("to"))
	case events.Reply:
		s = fmt.Sprintf("%s sent a reply to the customer", actor)
		if tags := w.list("tags"); tags != "" {
			s += " (tags " + spoken(tags) + ")"
		}
	case events.Offered:
		s = fmt.Sprintf("The desk rang %s", cmp.Or(w.str("agent"), subject))
		if until := w.time("until"); until != "" {
			s += " until " + until
		}
	case events.OfferEnded:
		s = fmt.Sprintf("The ring of %s ended: %s", cmp.Or(w.str("agent"), subject), strings.ReplaceAll(w.str("outcome"), "_", " "))
	case events.WarmTimeout:
		s = fmt.Sprintf("Nobody took the warm transfer (%s): it waits as a cold one", strings.ReplaceAll(w.str("reason"), "_", " "))
	case events.ApprovalRequested:
		s = fmt.Sprintf("%s asked a supervisor to approve a refund of %s", actor, w.money())
	case events.ApprovalGranted:
		s = fmt.Sprintf("%s approved the refund of %s", actor, w.money())
	case events.ApprovalDenied:
		s = fmt.Sprintf("%s denied the refund of %s", actor, w.money())
	case events.ApprovalExpired:
		s = fmt.Sprintf("The request to approve a refund of %s expired", w.money())
	case events.ApprovalWithdrawn:
		s = fmt.Sprintf("The request to approve a refund of %s was withdrawn", w.money())
		if r := w.str("reason"); r != "" {
			s += ": " + strings.ReplaceAll(r, "_", " ")
		}
	case events.SignedOut:
		s = fmt.Sprintf("%s signed out", subject)
		if e.Actor != "" && e.Actor != e.Subject {
			s = fmt.Sprintf("%s signed %s out", actor, subject)
		}
	case events.UserDisabled:
		s = fmt.Sprintf("%s disabled %s: their sessions ended", actor, subject)
		if n := w.str("returned_packages"); n != "" && n != "0" {
			s += fmt.Sprintf(" and %s held %s went back to %s", n, plural(n, "package", "packages"), plural(n, "its queue", "their queues"))
		}
	case events.RoleChanged:
		s = fmt.Sprintf("%s changed the role of %s: %s → %s", actor, subject, w.str("from_role"), w.str("role"))
	case events.MemberRemoved:
		s = fmt.Sprintf("%s took %s off %s", actor, subject, w.queueOr(e.Queue))
	case events.UserCreated:
		s = fmt.Sprintf("%s created %s (%s, %s, capacity %s", actor, cmp.Or(w.str("email"), subject), w.str("name"), w.str("role"), w.str("capacity"))
		if qs := w.queueList("queues"); qs != "" {
			s += ", queues " + qs
		}
		s += ")"
	case events.UserChanged:
		s = fmt.Sprintf("%s changed %s", actor, subject)
		if qs := w.queueList("queues_added"); qs != "" {
			parts = append(parts, "added to "+qs)
		}
		if issuers := w.list("sso_unlinked"); issuers != "" {
			parts = append(parts, "single sign-on unlinked from "+issuers)
		}
		if b, a, ok := w.pair("sso_only"); ok {
			parts = append(parts, "single sign-on only "+b+" → "+a)
		}
		for _, k := range []string{"name", "capacity"} {
			if b, a, ok := w.pair(k); ok {
				parts = append(parts, k+" "+b+" → "+a)
			}
		}
	case events.UserEnabled:
		s = fmt.Sprintf("%s enabled %s", actor, subject)
	case events.PasswordReset:
		s = fmt.Sprintf("%s reset the password of %s: their sessions ended", actor, subject)
	case events.PasswordChanged:
		s = fmt.Sprintf("%s chose a new password", subject)
	case events.QueueCreated:
		w.use("settings")
		s = fmt.Sprintf("%s created queue %s", actor, w.queueOr(e.Queue))
	case events.QueueChanged:
		s, parts = fmt.Sprintf("%s changed queue %s", actor, w.queueOr(e.Queue)), w.changes("changed")
	case events.APIKeyCreated:
		w.use("api_key_id")
		s = fmt.Sprintf("%s created bot key %s (%s…)", actor, w.str("name"), w.str("prefix"))
		if qs := w.queueList("queues"); qs != "" {
			s += " for " + qs
		}
		if url := w.str("webhook_url"); url != "" {
			s += ", webhooks to " + url
		}
	case events.APIKeyChanged:
		w.use("api_key_id")
		s = fmt.Sprintf("%s changed bot key %s", actor, w.str("name"))
		if b, a, ok := w.queuePair("queues"); ok && b != a {
			parts = append(parts, "queues "+b+" → "+a)
		}
		if b, a, ok := w.pair("webhook_url"); ok && b != a {
			parts = append(parts, "webhook URL "+b+" → "+a)
		}
	case events.APIKeyRevoked:
		w.use("api_key_id")
		s = fmt.Sprintf("%s revoked bot key %s (%s…)", actor, w.str("name"), w.str("prefix"))
	case events.WebhookRedelivered:
		w.use("api_key_id", "event_id")
		s = fmt.Sprintf("%s sent webhook delivery %s again", actor, w.str("delivery_id"))
		if b, a, ok := w.pair("state"); ok {
			s += ": " + b + " → " + a
		}
	case events.WebhookSecretRotated:
		w.use("api_key_id")
		s = fmt.Sprintf("%s rotated the webhook signing secret of bot key %s", actor, w.str("key"))
		if until := w.time("previous_until"); until != "" {
			s += "; the old one also signs until " + until
		} else if w.str("overlap") != "" {
			s += "; the old one stopped signing at once"
		}
		w.use("overlap")
	case events.SSOSettingsChanged:
		s = fmt.Sprintf("%s changed the single sign-on settings", actor)
		if b, a, ok := w.pair("unknown_emails"); ok {
			s += ": unknown emails " + b + " → " + a
		}
	default:
		s = fmt.Sprintf("%s: %s", actor, strings.ReplaceAll(string(e.Kind), "_", " "))
	}
	note := w.str("note")
	s = join(s, append(parts, w.rest()...))
	if note != "" {
		s += ". Note: “" + note + "”"
	}
	return s
}

// who names the actor: a person by email, a bot by its key's name, the desk itself otherwise.
func who(actor string) string {
	if name, ok := strings.CutPrefix(actor, "bot:"); ok {
		return "Bot " + name
	}
	return cmp.Or(actor, "The desk")
}

// join ends s with parts, "; " between them.
func join(s string, parts []string) string {
	if len(parts) == 0 {
		return s
	}
	return s + ": " + strings.Join(parts, "; ")
}

func plural(n, one, many string) string {
	if n == "1" {
		return one
	}
	return many
}

// worder reads a detail's values as words and remembers which it used, so that what is left is
// shown as it is.
type worder struct {
	d      map[string]any
	queues map[int64]string
	used   map[string]bool
}

func (w worder) use(keys ...string) {
	for _, k := range keys {
		w.used[k] = true
	}
}

func (w worder) str(k string) string {
	w.use(k)
	return words(w.d[k])
}

// code is the detail k, a code such as a trigger or a resolution (no_fault_found), as words.
func (w worder) code(k string) string { return spoken(w.str(k)) }

// spoken is a code as a person reads it: no_fault_found is "no fault found".
func spoken(code string) string { return strings.ReplaceAll(code, "_", " ") }

func (w worder) flag(k string) bool {
	w.use(k)
	b, _ := w.d[k].(bool)
	return b
}

// queueOr is the queue the event names, or the one its detail does.
func (w worder) queueOr(q string) string {
	return cmp.Or(q, w.str("queue"))
}

func (w worder) time(k string) string {
	w.use(k)
	s, _ := w.d[k].(string)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return s
	}
	return t.UTC().Format(TimeLayout)
}

func (w worder) list(k string) string {
	w.use(k)
	items, _ := w.d[k].([]any)
	out := make([]string, 0, len(items))
	for _, item := range items {
		out = append(out, words(item))
	}
	return strings.Join(out, ", ")
}

// queueList is a list of queue ids by name.
func (w worder) queueList(k string) string {
	w.use(k)
	return w.queueNames(w.d[k])
}

func (w worder) queueNames(v any) string {
	items, _ := v.([]any)
	out := make([]string, 0, len(items))
	for _, item := range items {
		id, ok := item.(float64)
		if name := w.queues[int64(id)]; ok && name != "" {
			out = append(out, name)
		} else {
			out = append(out, words(item))
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// pair reads a [before, after] value.
func (w worder) pair(k string) (before, after string, ok bool) {
	w.use(k)
	p, ok := w.d[k].([]any)
	if !ok || len(p) != 2 {
		return "", "", false
	}
	return orNone(words(p[0])), orNone(words(p[1])), true
}

func (w worder) queuePair(k string) (before, after string, ok bool) {
	w.use(k)
	p, ok := w.d[k].([]any)
	if !ok || len(p) != 2 {
		return "", "", false
	}
	return w.queueNames(p[0]), w.queueNames(p[1]), true
}

// changes words a map of setting → [before, after], settings in order.
func (w worder) changes(k string) []string {
	w.use(k)
	m, _ := w.d[k].(map[string]any)
	var parts []string
	for _, name := range slices.Sorted(maps.Keys(m)) {
		label := strings.ReplaceAll(name, "_", " ")
		if p, ok := m[name].([]any); ok && len(p) == 2 {
			parts = append(parts, label+" "+orNone(words(p[0]))+" → "+orNone(words(p[1])))
		} else {
			parts = append(parts, label+" "+words(m[name]))
		}
	}
	return parts
}

func (w worder) money() string {
	return strings.TrimSpace(w.str("amount") + " " + w.str("currency"))
}

// rest words the detail's keys no sentence used, in order: a key added to a kind later shows.
func (w worder) rest() []string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(w.d)) {
		if w.used[k] {
			continue
		}
		parts = append(parts, strings.ReplaceAll(k, "_", " ")+" "+orNone(words(w.d[k])))
	}
	return parts
}

func orNone(s string) string { return cmp.Or(s, "none") }

// words writes a JSON value as text: numbers without exponents, lists with commas, objects as
// key value pairs in order.
func words(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case bool:
		if v {
			return "yes"
		}
		return "no"
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case []any:
		out := make([]string, 0, len(v))
		for _, item := range v {
			out = append(out, words(item))
		}
		return strings.Join(out, ", ")
	case map[string]any:
		out := make([]string, 0, len(v))
		for _, k := range slices.Sorted(maps.Keys(v)) {
			out = append(out, k+" "+words(v[k]))
		}
		return strings.Join(out, ", ")
	}
	return fmt.Sprint(v)
}

// TimeLayout is how the trail writes a time: to the second, with its zone.
const TimeLayout = "2006-01-02 15:04:05 MST"
