package queue

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/handoffdesk/desk/internal/desk"
)

// Input is how the admin form asks for a setting.
type Input string

const (
	InputText     Input = "text"
	InputNumber   Input = "number"
	InputDuration Input = "duration" // Go's duration syntax: 90s, 15m, 24h
	InputList     Input = "list"     // comma-separated words
	InputSelect   Input = "select"   // one of Options
	InputChoices  Input = "choices"  // any of Options, as checkboxes
	InputCheckbox Input = "checkbox"
	InputQueue    Input = "queue" // another queue, or none
)

// Setting is one setting of a queue as the admin form shows, reads and checks it: a setting added
// to a queue is one entry in Settings, and the form, its validation and the audit's before → after
// follow from it.
type Setting struct {
	Field   string // the form field, and the key in the audit's detail
	Label   string
	Help    string // one line
	Input   Input
	Options []string // of InputSelect and InputChoices
	// Get spells the queue's value as the form shows it; a queue reference is the queue's id.
	Get func(Queue) []string
	// Set reads the form's values into q, or says what is wrong with them.
	Set func(q *Queue, values []string) error
	// Column is the setting's column in queues, and Value what Save writes there.
	Column string
	Value  func(Queue) any
}

// Reference settings hold another queue's id: parent, escalation, overflow.
const (
	FieldParent     = "parent"
	FieldEscalation = "escalation_queue"
	FieldOverflow   = "overflow_queue"
)

var (
	entityKeyPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)
	skillPattern     = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
)

// Settings lists every setting of a queue, in the form's order.
func Settings() []Setting {
	return []Setting{
		{Field: "name", Label: "Name", Input: InputText, Help: "What bots send to (queue_name) and agents see: a-z, 0-9, _ and -.",
			Get:    func(q Queue) []string { return one(q.Name) },
			Column: "name", Value: func(q Queue) any { return q.Name },
			Set: func(q *Queue, v []string) error {
				q.Name = strings.TrimSpace(first(v))
				if !namePattern.MatchString(q.Name) {
					return fmt.Errorf("name %q must be 1-63 of a-z, 0-9, _ and -, starting with a letter or digit", q.Name)
				}
				return nil
			}},
		{Field: FieldParent, Label: "Parent", Input: InputQueue, Help: "The queue above this one: transfers go to children, the parent and siblings.",
			Get:    func(q Queue) []string { return ref(q.ParentID) },
			Column: "parent_id", Value: func(q Queue) any { return q.ParentID },
			Set: func(q *Queue, v []string) (err error) { q.ParentID, err = parseRef(v); return }},
		{Field: "skills", Label: "Skills", Input: InputList, Help: "Capabilities this queue handles; SW4RM requests are routed by them.",
			Get:    func(q Queue) []string { return one(strings.Join(q.Skills, ", ")) },
			Column: "skills", Value: func(q Queue) any { return q.Skills },
			Set: func(q *Queue, v []string) (err error) { q.Skills, err = parseList(v, skillPattern, "skill"); return }},
		{Field: "default_priority", Label: "Default priority", Input: InputSelect, Options: []string{"low", "normal", "high", "urgent"},
			Help:   "The priority of a package that names none.",
			Get:    func(q Queue) []string { return one(q.DefaultPriority) },
			Column: "default_priority", Value: func(q Queue) any { return q.DefaultPriority },
			Set: func(q *Queue, v []string) (err error) {
				q.DefaultPriority, err = parseChoice(v, "default priority", "low", "normal", "high", "urgent")
				return
			}},
		{Field: "sla", Label: "SLA", Input: InputDuration, Help: "How long a package may wait before the queue is past its SLA (overflow, red clocks).",
			Get:    func(q Queue) []string { return one(FormatDuration(q.SLA)) },
			Column: "sla", Value: func(q Queue) any { return q.SLA },
			Set: func(q *Queue, v []string) (err error) { q.SLA, err = parseDuration(v, "SLA", time.Second); return }},
		{Field: "ttl", Label: "TTL", Input: InputDuration, Help: "A package nobody claims in this time expires and the bot is told.",
			Get:    func(q Queue) []string { return one(FormatDuration(q.TTL)) },
			Column: "ttl", Value: func(q Queue) any { return q.TTL },
			Set: func(q *Queue, v []string) (err error) { q.TTL, err = parseDuration(v, "TTL", time.Minute); return }},
		{Field: "reservation_timeout", Label: "Reservation timeout", Input: InputDuration, Help: "How long Next holds a package for an agent before it goes back to the queue.",
			Get:    func(q Queue) []string { return one(FormatDuration(q.ReservationTimeout)) },
			Column: "reservation_timeout", Value: func(q Queue) any { return q.ReservationTimeout },
			Set: func(q *Queue, v []string) (err error) {
				q.ReservationTimeout, err = parseDuration(v, "reservation timeout", time.Second)
				return
			}},
		{Field: "accept_window", Label: "Accept window", Input: InputDuration, Help: "How long a warm package rings one agent before it rings the next.",
			Get:    func(q Queue) []string { return one(FormatDuration(q.AcceptWindow)) },
			Column: "accept_window", Value: func(q Queue) any { return q.AcceptWindow },
			Set: func(q *Queue, v []string) (err error) {
				q.AcceptWindow, err = parseDuration(v, "accept window", time.Second)
				return
			}},
		{Field: "warm_wait", Label: "Warm wait", Input: InputDuration, Help: "How long a warm package goes on ringing agents before it waits like any other and the bot hears warm_timeout.",
			Get:    func(q Queue) []string { return one(FormatDuration(q.WarmWait)) },
			Column: "warm_wait", Value: func(q Queue) any { return q.WarmWait },
			Set: func(q *Queue, v []string) (err error) {
				q.WarmWait, err = parseDuration(v, "warm wait", time.Second)
				return
			}},
		{Field: "reopen_window", Label: "Reopen window", Input: InputDuration,
			Help:   "A customer who writes again this long after a resolve reopens the package, offered first to the agent who resolved it; later, the bot hands off anew. 0s: never reopen.",
			Get:    func(q Queue) []string { return one(FormatDuration(q.ReopenWindow)) },
			Column: "reopen_window", Value: func(q Queue) any { return q.ReopenWindow },
			Set: func(q *Queue, v []string) (err error) {
				q.ReopenWindow, err = parseDuration(v, "reopen window", 0)
				return
			}},
		{Field: "customer_idle", Label: "Customer idle", Input: InputDuration,
			Help:   "A customer who leaves the agent's reply unanswered this long shows as idle on My work and the package.",
			Get:    func(q Queue) []string { return one(FormatDuration(q.CustomerIdle)) },
			Column: "customer_idle", Value: func(q Queue) any { return q.CustomerIdle },
			Set: func(q *Queue, v []string) (err error) {
				q.CustomerIdle, err = parseDuration(v, "customer idle", time.Second)
				return
			}},
		{Field: "customer_gone", Label: "Customer gone", Input: InputDuration,
			Help:   "A customer who leaves the agent's reply unanswered this long is gone: the package is resolved as customer_unreachable and the bot told. 0s: never.",
			Get:    func(q Queue) []string { return one(FormatDuration(q.CustomerGone)) },
			Column: "customer_gone", Value: func(q Queue) any { return q.CustomerGone },
			// After customer_idle in this list: it is checked against the idle time just read.
			Set: func(q *Queue, v []string) (err error) {
				if q.CustomerGone, err = parseDuration(v, "customer gone", 0); err == nil && q.CustomerGone > 0 && q.CustomerGone < q.CustomerIdle {
					err = fmt.Errorf("customer gone %s is shorter than customer idle %s: a customer is idle before they are gone (0s: never)",
						FormatDuration(q.CustomerGone), FormatDuration(q.CustomerIdle))
				}
				return
			}},
		{Field: "missed_rings_away", Label: "Missed rings before away", Input: InputNumber,
			Help:   "An agent who lets this many rings in a row run out is set to away and told why.",
			Get:    func(q Queue) []string { return one(strconv.Itoa(q.MissedRingsAway)) },
			Column: "missed_rings_away", Value: func(q Queue) any { return q.MissedRingsAway },
			Set: func(q *Queue, v []string) (err error) {
				q.MissedRingsAway, err = parseCount(v, "missed rings before away")
				return
			}},
		{Field: "required_entity_keys", Label: "Required entity keys", Input: InputList, Help: "structured_entities keys every package to this queue must carry.",
			Get:    func(q Queue) []string { return one(strings.Join(q.RequiredEntityKeys, ", ")) },
			Column: "required_entity_keys", Value: func(q Queue) any { return q.RequiredEntityKeys },
			Set: func(q *Queue, v []string) (err error) {
				q.RequiredEntityKeys, err = parseList(v, entityKeyPattern, "entity key")
				return
			}},
		{Field: "pii_entity_keys", Label: "PII entity keys", Input: InputList, Help: "structured_entities keys masked for roles below the PII role, besides emails and phones.",
			Get:    func(q Queue) []string { return one(strings.Join(q.PIIEntityKeys, ", ")) },
			Column: "pii_entity_keys", Value: func(q Queue) any { return q.PIIEntityKeys },
			Set: func(q *Queue, v []string) (err error) {
				q.PIIEntityKeys, err = parseList(v, entityKeyPattern, "entity key")
				return
			}},
		{Field: "pii_min_role", Label: "PII role", Input: InputSelect, Options: []string{"agent", "supervisor", "admin"},
			Help:   "The least role that sees this queue's PII unmasked.",
			Get:    func(q Queue) []string { return one(q.PIIMinRole) },
			Column: "pii_min_role", Value: func(q Queue) any { return q.PIIMinRole },
			Set: func(q *Queue, v []string) (err error) {
				q.PIIMinRole, err = parseChoice(v, "PII role", "agent", "supervisor", "admin")
				return
			}},
		{Field: "withhold_transcript", Label: "Withhold the transcript", Input: InputCheckbox,
			Help:   "Below the PII role the transcript is left out entirely, rather than shown with the contact's details masked.",
			Get:    func(q Queue) []string { return checked(q.WithholdTranscript) },
			Column: "withhold_transcript", Value: func(q Queue) any { return q.WithholdTranscript },
			Set: func(q *Queue, v []string) error { q.WithholdTranscript = first(v) != ""; return nil }},
		{Field: "refund_threshold", Label: "Refund threshold", Input: InputText, Help: "A refund above this amount (a decimal like 50.00, in the queue's currency) needs a supervisor's approval before it is resolved.",
			Get:    func(q Queue) []string { return one(q.RefundThreshold) },
			Column: "refund_threshold", Value: func(q Queue) any { return q.RefundThreshold },
			Set: func(q *Queue, v []string) error {
				q.RefundThreshold = strings.TrimSpace(first(v))
				if !amountPattern.MatchString(q.RefundThreshold) {
					return fmt.Errorf("refund threshold %q is not a decimal amount like 50.00", q.RefundThreshold)
				}
				return nil
			}},
		{Field: "currency", Label: "Currency", Input: InputText, Help: "The threshold's currency (ISO 4217, like USD); a refund in any other currency always needs approval.",
			Get:    func(q Queue) []string { return one(q.Currency) },
			Column: "currency", Value: func(q Queue) any { return q.Currency },
			Set: func(q *Queue, v []string) error {
				q.Currency = strings.ToUpper(strings.TrimSpace(first(v)))
				if !currencyPattern.MatchString(q.Currency) {
					return fmt.Errorf("currency %q is not a three-letter code like USD", q.Currency)
				}
				return nil
			}},
		{Field: "approval_timeout", Label: "Approval timeout", Input: InputDuration, Help: "A refund approval nobody decides in this time expires, and the package goes back to its agent.",
			Get:    func(q Queue) []string { return one(FormatDuration(q.ApprovalTimeout)) },
			Column: "approval_timeout", Value: func(q Queue) any { return q.ApprovalTimeout },
			Set: func(q *Queue, v []string) (err error) {
				q.ApprovalTimeout, err = parseDuration(v, "approval timeout", time.Minute)
				return
			}},
		{Field: "transfer_policy", Label: "Transfer policy", Input: InputChoices, Options: []string{"children", "parent", "peers"},
			Help:   "Where agents may transfer packages from this queue.",
			Get:    func(q Queue) []string { return q.TransferPolicy },
			Column: "transfer_policy", Value: func(q Queue) any { return q.TransferPolicy },
			Set: func(q *Queue, v []string) error {
				q.TransferPolicy = []string{}
				for _, p := range v {
					if !slices.Contains([]string{"children", "parent", "peers"}, p) {
						return fmt.Errorf("transfer policy %q is not one of children, parent, peers", p)
					}
					if !slices.Contains(q.TransferPolicy, p) {
						q.TransferPolicy = append(q.TransferPolicy, p)
					}
				}
				return nil
			}},
		{Field: "accepts_top_level_transfers", Label: "Accepts top-level transfers", Input: InputCheckbox,
			Help:   "A top-level queue that other top-level queues may transfer into.",
			Get:    func(q Queue) []string { return checked(q.AcceptsTopLevelTransfers) },
			Column: "accepts_top_level_transfers", Value: func(q Queue) any { return q.AcceptsTopLevelTransfers },
			Set: func(q *Queue, v []string) error { q.AcceptsTopLevelTransfers = first(v) != ""; return nil }},
		{Field: "max_rejections", Label: "Max rejections", Input: InputNumber, Help: "After this many rejections a package waits in the queue for a supervisor: agents no longer get it.",
			Get:    func(q Queue) []string { return one(strconv.Itoa(q.MaxRejections)) },
			Column: "max_rejections", Value: func(q Queue) any { return q.MaxRejections },
			Set: func(q *Queue, v []string) (err error) { q.MaxRejections, err = parseCount(v, "max rejections"); return }},
		{Field: "guard_contact_hourly", Label: "Guard: per contact per hour", Input: InputNumber, Help: "The most handoffs one contact may get in an hour.",
			Get:    func(q Queue) []string { return one(strconv.Itoa(q.Guards.ContactHourly)) },
			Column: "guard_contact_hourly", Value: func(q Queue) any { return q.Guards.ContactHourly },
			Set: func(q *Queue, v []string) (err error) {
				q.Guards.ContactHourly, err = parseCount(v, "hourly guard")
				return
			}},
		{Field: "guard_contact_daily", Label: "Guard: per contact per day", Input: InputNumber, Help: "The most handoffs one contact may get in a day.",
			Get:    func(q Queue) []string { return one(strconv.Itoa(q.Guards.ContactDaily)) },
			Column: "guard_contact_daily", Value: func(q Queue) any { return q.Guards.ContactDaily },
			Set: func(q *Queue, v []string) (err error) {
				q.Guards.ContactDaily, err = parseCount(v, "daily guard")
				return
			}},
		{Field: "guard_pair_cooldown", Label: "Guard: pair cooldown", Input: InputDuration, Help: "The same bot → this queue handoff for a contact is refused this long (0s: never).",
			Get:    func(q Queue) []string { return one(FormatDuration(q.Guards.PairCooldown)) },
			Column: "guard_pair_cooldown", Value: func(q Queue) any { return q.Guards.PairCooldown },
			Set: func(q *Queue, v []string) (err error) {
				q.Guards.PairCooldown, err = parseDuration(v, "pair cooldown", 0)
				return
			}},
		{Field: "guard_chain_limit", Label: "Guard: chain limit", Input: InputNumber, Help: "A handoff_chain this long goes to the escalation queue.",
			Get:    func(q Queue) []string { return one(strconv.Itoa(q.Guards.ChainLimit)) },
			Column: "guard_chain_limit", Value: func(q Queue) any { return q.Guards.ChainLimit },
			Set: func(q *Queue, v []string) (err error) {
				q.Guards.ChainLimit, err = parseCount(v, "chain limit")
				return
			}},
		{Field: "guard_one_open", Label: "Guard: one open per contact", Input: InputCheckbox, Help: "A contact has at most one open handoff.",
			Get:    func(q Queue) []string { return checked(q.Guards.OneOpen) },
			Column: "guard_one_open", Value: func(q Queue) any { return q.Guards.OneOpen },
			Set: func(q *Queue, v []string) error { q.Guards.OneOpen = first(v) != ""; return nil }},
		{Field: FieldEscalation, Label: "Escalation queue", Input: InputQueue, Help: "Where packages past the chain limit go.",
			Get:    func(q Queue) []string { return ref(q.EscalationQueueID) },
			Column: "escalation_queue_id", Value: func(q Queue) any { return q.EscalationQueueID },
			Set: func(q *Queue, v []string) (err error) { q.EscalationQueueID, err = parseRef(v); return }},
		{Field: "overflow_policy", Label: "Overflow policy", Input: InputSelect, Options: []string{"accept", "route", "defer"},
			Help:   "When nobody is online or the queue is past its SLA: accept anyway, route to the overflow queue, or defer to the bot.",
			Get:    func(q Queue) []string { return one(q.OverflowPolicy) },
			Column: "overflow_policy", Value: func(q Queue) any { return q.OverflowPolicy },
			Set: func(q *Queue, v []string) (err error) {
				q.OverflowPolicy, err = parseChoice(v, "overflow policy", "accept", "route", "defer")
				return
			}},
		{Field: FieldOverflow, Label: "Overflow queue", Input: InputQueue, Help: "Where the route policy sends packages.",
			Get:    func(q Queue) []string { return ref(q.OverflowQueueID) },
			Column: "overflow_queue_id", Value: func(q Queue) any { return q.OverflowQueueID },
			Set: func(q *Queue, v []string) (err error) { q.OverflowQueueID, err = parseRef(v); return }},
	}
}

// Defaults is a new queue's settings, the columns' defaults.
func Defaults() Queue {
	return Queue{Enabled: true, TTL: DefaultTTL, ReservationTimeout: DefaultReservationTimeout, RefundThreshold: DefaultRefundThreshold,
		DefaultPriority: "normal", SLA: 15 * time.Minute, Skills: []string{}, RequiredEntityKeys: []string{}, PIIEntityKeys: []string{},
		PIIMinRole: "supervisor", TransferPolicy: []string{"children", "parent", "peers"}, MaxRejections: 3,
		Guards:         Guards{ContactHourly: 3, ContactDaily: 10, PairCooldown: 30 * time.Minute, ChainLimit: 3, OneOpen: true},
		OverflowPolicy: "accept", AcceptWindow: DefaultAcceptWindow, WarmWait: DefaultWarmWait, MissedRingsAway: DefaultMissedRingsAway,
		ReopenWindow: DefaultReopenWindow, CustomerIdle: DefaultCustomerIdle,
		Currency: DefaultCurrency, ApprovalTimeout: DefaultApprovalTimeout}
}

// Values spells every setting of q as the form shows it, by field.
func Values(q Queue) map[string][]string {
	v := map[string][]string{}
	for _, s := range Settings() {
		v[s.Field] = s.Get(q)
	}
	return v
}

// Read reads a form's values over base and checks each setting on its own and against the other
// queues (all, which includes base unless it is new): every bad field is named at once.
func Read(values map[string][]string, base Queue, all []Queue) (Queue, error) {
	q := base
	bad := desk.Fields{}
	for _, s := range Settings() {
		if err := s.Set(&q, values[s.Field]); err != nil {
			bad.Add(s.Field, "%s", err.Error())
		}
	}
	checkLinks(q, all, bad)
	return q, bad.Err()
}

// checkLinks adds to bad what is wrong with q's links to other queues: a queue that does not
// exist, a parent that would make a circle, escalation or overflow into itself, routing with
// nowhere to route, a top-level transfer flag on a child, a name taken.
func checkLinks(q Queue, all []Queue, bad desk.Fields) {
	byID := map[int64]Queue{}
	for _, o := range all {
		byID[o.ID] = o
		if o.Name == q.Name && o.ID != q.ID {
			bad.Add("name", "queue %q already exists", q.Name)
		}
	}
	exists := func(field string, id *int64) bool {
		if id == nil {
			return false
		}
		if _, ok := byID[*id]; !ok {
			bad.Add(field, "queue %d does not exist", *id)
			return false
		}
		return true
	}
	if q.ParentID != nil && *q.ParentID == q.ID {
		bad.Add(FieldParent, "a queue cannot be its own parent")
	} else if exists(FieldParent, q.ParentID) {
		seen := map[int64]bool{}
		for at := q.ParentID; at != nil; at = byID[*at].ParentID {
			if *at == q.ID || seen[*at] {
				bad.Add(FieldParent, "%s cannot be under %s: %s is already under %s", q.Name, byID[*q.ParentID].Name, byID[*q.ParentID].Name, q.Name)
				break
			}
			seen[*at] = true
		}
	}
	if exists(FieldEscalation, q.EscalationQueueID) && *q.EscalationQueueID == q.ID {
		bad.Add(FieldEscalation, "a queue cannot escalate into itself")
	}
	if exists(FieldOverflow, q.OverflowQueueID) && *q.OverflowQueueID == q.ID {
		bad.Add(FieldOverflow, "a queue cannot overflow into itself")
	}
	if q.OverflowPolicy == "route" && q.OverflowQueueID == nil {
		bad.Add(FieldOverflow, "the route overflow policy needs an overflow queue")
	}
	if q.AcceptsTopLevelTransfers && q.ParentID != nil {
		bad.Add("accepts_top_level_transfers", "only a top-level queue (no parent) accepts top-level transfers")
	}
}

// Save creates (id 0) or changes a queue inside tx from a form's values, and returns the queue
// before (zero when new) and after. Queue writes take a lock that only other queue writes wait
// for, so that two edits at once cannot make a circle of parents that each alone would not.
func Save(ctx context.Context, tx pgx.Tx, id int64, values map[string][]string) (before, after Queue, err error) {
	if _, err := tx.Exec(ctx, `LOCK TABLE queues IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		return Queue{}, Queue{}, err
	}
	all, err := All(ctx, tx)
	if err != nil {
		return Queue{}, Queue{}, err
	}
	base := Defaults()
	if id != 0 {
		i := slices.IndexFunc(all, func(q Queue) bool { return q.ID == id })
		if i < 0 {
			return Queue{}, Queue{}, desk.Errorf(desk.NotFound, "no queue has id %d", id)
		}
		before, base = all[i], all[i]
	}
	q, err := Read(values, base, all)
	if err != nil {
		return Queue{}, Queue{}, err
	}
	settings := Settings()
	cols, params, sets := make([]string, len(settings)), make([]string, len(settings)), make([]string, len(settings))
	args := make([]any, len(settings), len(settings)+1)
	for i, st := range settings {
		cols[i], params[i], args[i] = st.Column, "$"+strconv.Itoa(i+1), st.Value(q)
		sets[i] = st.Column + " = " + params[i]
	}
	var row pgx.Row
	if id == 0 {
		row = tx.QueryRow(ctx, `INSERT INTO queues (`+strings.Join(cols, ", ")+`) VALUES (`+strings.Join(params, ", ")+`) RETURNING `+columns, args...)
	} else {
		row = tx.QueryRow(ctx, `UPDATE queues SET `+strings.Join(sets, ", ")+` WHERE id = $`+strconv.Itoa(len(settings)+1)+` RETURNING `+columns,
			append(args, id)...)
	}
	after, err = scanQueue(row)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23514" {
		// The table's own checks are the last word; the form's rules above are meant to be stricter.
		return Queue{}, Queue{}, desk.Errorf(desk.Invalid, "the queue breaks the rule %s", pgErr.ConstraintName)
	}
	return before, after, err
}

// SetEnabled turns a queue on or off inside tx and returns whether it was on. Disabling a queue
// that still holds open packages is the caller's to refuse or resolve first (see
// actions.MoveOpen): the queue does not read packages.
func SetEnabled(ctx context.Context, tx pgx.Tx, id int64, enabled bool) (Queue, error) {
	was, err := scanQueue(tx.QueryRow(ctx, `SELECT `+columns+` FROM queues WHERE id = $1 FOR UPDATE`, id))
	if err != nil || was.Enabled == enabled {
		return was, err
	}
	_, err = tx.Exec(ctx, `UPDATE queues SET enabled = $2 WHERE id = $1`, id, enabled)
	return was, err
}

// lister reads lists through a pool or a caller's transaction.
type lister interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// All reads every queue, enabled or not, by name.
func All(ctx context.Context, db lister) ([]Queue, error) {
	rows, err := db.Query(ctx, `SELECT `+columns+` FROM queues ORDER BY name`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Queue, error) { return scanQueue(row) })
}

// All is All through the service's pool.
func (s *Service) All(ctx context.Context) ([]Queue, error) { return All(ctx, s.db) }

// Changes lists the settings that differ between before and after, each as [before, after], for
// the audit.
func Changes(before, after Queue) map[string]any {
	changed := map[string]any{}
	for _, s := range Settings() {
		b, a := s.Get(before), s.Get(after)
		if !slices.Equal(b, a) {
			changed[s.Field] = [2]string{strings.Join(b, ","), strings.Join(a, ",")}
		}
	}
	return changed
}

// FormatDuration spells d as the form reads it back: 15m, 1h30m, 24h, 90s.
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func one(s string) []string { return []string{s} }

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

func checked(b bool) []string {
	if b {
		return one("on")
	}
	return nil
}

func ref(id *int64) []string {
	if id == nil {
		return one("")
	}
	return one(strconv.FormatInt(*id, 10))
}

func parseRef(v []string) (*int64, error) {
	s := strings.TrimSpace(first(v))
	if s == "" {
		return nil, nil
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return nil, fmt.Errorf("%q is not a queue", s)
	}
	return &id, nil
}

func parseList(v []string, pattern *regexp.Regexp, what string) ([]string, error) {
	items := []string{}
	for _, part := range strings.Split(first(v), ",") {
		part = strings.TrimSpace(part)
		if part == "" || slices.Contains(items, part) {
			continue
		}
		if !pattern.MatchString(part) {
			return nil, fmt.Errorf("%s %q may hold only %s", what, part, strings.Trim(pattern.String(), "^$"))
		}
		items = append(items, part)
	}
	return items, nil
}

func parseChoice(v []string, what string, options ...string) (string, error) {
	s := strings.TrimSpace(first(v))
	if !slices.Contains(options, s) {
		return "", fmt.Errorf("%s %q is not one of %s", what, s, strings.Join(options, ", "))
	}
	return s, nil
}

func parseDuration(v []string, what string, least time.Duration) (time.Duration, error) {
	s := strings.TrimSpace(first(v))
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q is not a duration like 90s, 15m or 24h", what, s)
	}
	if d < least {
		return 0, fmt.Errorf("%s %s is shorter than %s", what, FormatDuration(d), FormatDuration(least))
	}
	return d, nil
}

// maxCount bounds the counting settings: more is a typo.
const maxCount = 10000

func parseCount(v []string, what string) (int, error) {
	s := strings.TrimSpace(first(v))
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxCount {
		return 0, fmt.Errorf("%s %q is not a whole number from 1 to %d", what, s, maxCount)
	}
	return n, nil
}

// Member is one person working a queue, for the admin's pages.
type Member struct {
	QueueID int64
	UserID  int64
}

// Memberships lists who works which queue.
func (s *Service) Memberships(ctx context.Context) ([]Member, error) {
	rows, err := s.db.Query(ctx, `SELECT queue_id, user_id FROM queue_members ORDER BY queue_id, user_id`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Member, error) {
		var m Member
		err := row.Scan(&m.QueueID, &m.UserID)
		return m, err
	})
}

// AddMember makes the user a member of the queue inside tx; false when they were one already.
func AddMember(ctx context.Context, tx pgx.Tx, userID, queueID int64) (bool, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO queue_members (queue_id, user_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`, queueID, userID)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return false, desk.Errorf(desk.Invalid, "no queue has id %d, or no user %d", queueID, userID)
	}
	return err == nil && tag.RowsAffected() == 1, err
}

// QueuesOf lists the ids of the queues the user works, inside a caller's transaction.
func QueuesOf(ctx context.Context, db lister, userID int64) ([]int64, error) {
	rows, err := db.Query(ctx, `SELECT queue_id FROM queue_members WHERE user_id = $1 ORDER BY queue_id`, userID)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
