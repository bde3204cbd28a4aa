package handoff

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRules breaks one rule at a time in an otherwise valid package and
// expects exactly that field and rule back.
func TestRules(t *testing.T) {
	long := func(n int) string { return strings.Repeat("x", n) }
	items := func(n int, item string) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = item
		}
		return out
	}
	action := func(kv ...any) obj {
		a := obj{"tool": "fetch_charges", "result": "found two"}
		for i := 0; i+1 < len(kv); i += 2 {
			a[kv[i].(string)] = kv[i+1]
		}
		return a
	}
	tests := []struct {
		name        string
		change      func(p obj)
		field, rule string
	}{
		// schema_version
		{"version missing", drop("schema_version"), "schema_version", "required"},
		{"version 2", set("schema_version", "2.0"), "schema_version", "schema_version"},
		{"version without minor", set("schema_version", "1"), "schema_version", "schema_version"},
		{"version with letter", set("schema_version", "v1.0"), "schema_version", "schema_version"},
		{"version 1.x literally", set("schema_version", "1.x"), "schema_version", "schema_version"},
		{"version as number", set("schema_version", 1.0), "schema_version", "type"},

		// ids and names
		{"handoff_id missing", drop("handoff_id"), "handoff_id", "required"},
		{"handoff_id with space", set("handoff_id", "ho 1"), "handoff_id", "handoff_id"},
		{"handoff_id with slash", set("handoff_id", "ho/1"), "handoff_id", "handoff_id"},
		{"handoff_id non-ASCII", set("handoff_id", "hö_1"), "handoff_id", "handoff_id"},
		{"handoff_id too long", set("handoff_id", long(129)), "handoff_id", "max"},
		{"source_run_id missing", drop("source_run_id"), "source_run_id", "required"},
		{"source_run_id blank", set("source_run_id", " \t"), "source_run_id", "notblank"},
		{"source_run_id too long", set("source_run_id", long(129)), "source_run_id", "max"},
		{"source_agent empty", set("source_agent", ""), "source_agent", "required"},
		{"source_agent blank", set("source_agent", "   "), "source_agent", "notblank"},
		{"target_profile missing", drop("target_profile"), "target_profile", "required"},
		{"target_profile too long", set("target_profile", long(129)), "target_profile", "max"},

		// enums
		{"transfer_mode missing", drop("transfer_mode"), "transfer_mode", "required"},
		{"transfer_mode unknown", set("transfer_mode", "lukewarm"), "transfer_mode", "oneof"},
		{"trigger missing", drop("trigger"), "trigger", "required"},
		{"trigger wrong case", set("trigger", "USER_REQUEST"), "trigger", "oneof"},
		{"priority unknown", set("priority", "asap"), "priority", "oneof"},
		{"priority as number", set("priority", 5), "priority", "type"},
		{"priority empty", set("priority", ""), "priority", "empty"},
		{"sentiment unknown", set("sentiment", "meh"), "sentiment", "oneof"},
		{"channel_origin unknown", set("channel_origin", "fax"), "channel_origin", "oneof"},
		{"channel_target unknown", set("channel_target", "pigeon"), "channel_target", "oneof"},

		// free text
		{"reason too long", set("reason", long(501)), "reason", "max"},
		{"reason empty", set("reason", ""), "reason", "empty"},
		{"reason null", set("reason", nil), "reason", "type"},
		{"problem_statement missing", drop("problem_statement"), "problem_statement", "required"},
		{"problem_statement too long", set("problem_statement", long(1001)), "problem_statement", "max"},
		{"problem_statement too many characters", set("problem_statement", strings.Repeat("é", 1001)), "problem_statement", "max"},
		{"problem_statement two paragraphs", set("problem_statement", "One.\n\nTwo."), "problem_statement", "single_paragraph"},
		{"problem_statement blank line of spaces", set("problem_statement", "One.\n  \t\nTwo."), "problem_statement", "single_paragraph"},
		{"problem_statement CRLF paragraphs", set("problem_statement", "One.\r\n\r\nTwo."), "problem_statement", "single_paragraph"},
		{"problem_statement leading blank line", set("problem_statement", "\n\nOne."), "problem_statement", "single_paragraph"},
		{"recommended_next_step too long", set("recommended_next_step", long(1001)), "recommended_next_step", "max"},
		{"draft_reply too long", set("draft_reply", long(10001)), "draft_reply", "max"},
		{"user_verified as string", set("user_verified", "true"), "user_verified", "type"},

		// contact
		{"contact missing", drop("contact"), "contact.id", "required"},
		{"contact as string", set("contact", "cust_1"), "contact", "type"},
		{"contact id missing", set("contact", obj{"display_name": "Dana"}), "contact.id", "required"},
		{"contact id blank", set("contact", obj{"id": " "}), "contact.id", "notblank"},
		{"contact id too long", set("contact", obj{"id": long(129)}), "contact.id", "max"},
		{"contact id as number", set("contact", obj{"id": 9912}), "contact.id", "type"},
		{"contact email invalid", set("contact", obj{"id": "c", "email": "dana"}), "contact.email", "email"},
		{"contact email empty", set("contact", obj{"id": "c", "email": ""}), "contact.email", "empty"},
		{"contact phone too long", set("contact", obj{"id": "c", "phone": long(33)}), "contact.phone", "max"},
		{"contact display_name too long", set("contact", obj{"id": "c", "display_name": long(201)}), "contact.display_name", "max"},
		{"contact unknown field", set("contact", obj{"id": "c", "nickname": "D"}), "contact.nickname", "unknown_field"},

		// structured_entities
		{"entities as list", set("structured_entities", []any{"a"}), "structured_entities", "type"},
		{"entity object", set("structured_entities", obj{"customer": obj{"id": "1"}}), "structured_entities.customer", "type"},
		{"entity null", set("structured_entities", obj{"account_id": nil}), "structured_entities.account_id", "type"},
		{"entity mixed list", set("structured_entities", obj{"ids": []any{"a", 1}}), "structured_entities.ids", "type"},
		{"entity nested list", set("structured_entities", obj{"ids": []any{[]any{"a"}}}), "structured_entities.ids", "type"},
		{"entity text too long", set("structured_entities", obj{"note": long(1001)}), "structured_entities.note", "max"},
		{"entity list too long", set("structured_entities", obj{"ids": items(101, "a")}), "structured_entities.ids", "max"},
		{"entity list item too long", set("structured_entities", obj{"ids": []any{"a", long(1001)}}), "structured_entities.ids[1]", "max"},
		{"entity key with space", set("structured_entities", obj{"account id": "a"}), "structured_entities.account id", "key"},
		{"entity key too long", set("structured_entities", obj{long(65): "a"}), "structured_entities." + long(65), "key"},
		{"entity key empty", set("structured_entities", obj{"": "a"}), "structured_entities.", "key"},
		{"too many entities", set("structured_entities", manyKeys(101, "v")), "structured_entities", "max"},

		// attempted_actions
		{"action tool missing", set("attempted_actions", []any{obj{"result": "r"}}), "attempted_actions[0].tool", "required"},
		{"action result missing", set("attempted_actions", []any{action(), obj{"tool": "t"}}), "attempted_actions[1].result", "required"},
		{"action tool blank", set("attempted_actions", []any{action("tool", "  ")}), "attempted_actions[0].tool", "notblank"},
		{"action result too long", set("attempted_actions", []any{action("result", long(1001))}), "attempted_actions[0].result", "max"},
		{"action ok as string", set("attempted_actions", []any{action("ok", "yes")}), "attempted_actions[0].ok", "type"},
		{"action ok null", set("attempted_actions", []any{action("ok", nil)}), "attempted_actions[0].ok", "type"},
		{"action at not a time", set("attempted_actions", []any{action("at", "yesterday")}), "attempted_actions[0].at", "datetime"},
		{"action at without zone", set("attempted_actions", []any{action("at", "2026-06-02T14:03:11")}), "attempted_actions[0].at", "datetime"},
		{"action at date only", set("attempted_actions", []any{action("at", "2026-06-02")}), "attempted_actions[0].at", "datetime"},
		{"action at as number", set("attempted_actions", []any{action("at", 1780000000)}), "attempted_actions[0].at", "type"},
		{"action raw tool output", set("attempted_actions", []any{action("raw", obj{"x": 1})}), "attempted_actions[0].raw", "unknown_field"},
		{"action as string", set("attempted_actions", []any{"fetch_charges"}), "attempted_actions[0]", "type"},
		{"too many actions", set("attempted_actions", slices.Repeat([]any{action()}, 51)), "attempted_actions", "max"},

		// lists of strings
		{"open question blank", set("open_questions", []any{"ok", " "}), "open_questions[1]", "notblank"},
		{"open question empty", set("open_questions", []any{""}), "open_questions[0]", "required"},
		{"open question too long", set("open_questions", []any{long(1001)}), "open_questions[0]", "max"},
		{"open question as number", set("open_questions", []any{"ok", 3}), "open_questions[1]", "type"},
		{"too many open questions", set("open_questions", items(51, "q")), "open_questions", "max"},
		{"handoff_chain empty entry", set("handoff_chain", []any{""}), "handoff_chain[0]", "required"},
		{"handoff_chain blank entry", set("handoff_chain", []any{"a", "\t"}), "handoff_chain[1]", "notblank"},
		{"handoff_chain entry too long", set("handoff_chain", []any{long(129)}), "handoff_chain[0]", "max"},
		{"handoff_chain too long", set("handoff_chain", items(51, "a")), "handoff_chain", "max"},
		{"handoff_chain as string", set("handoff_chain", "tier1"), "handoff_chain", "type"},

		// citations
		{"citation without scheme", set("citations", []any{"ticket/8812"}), "citations[0]", "uri"},
		{"citation absolute path", set("citations", []any{"/policies/refunds"}), "citations[0]", "uri"},
		{"citation with space in host", set("citations", []any{"https://exa mple.com"}), "citations[0]", "uri"},
		{"citation empty", set("citations", []any{"crm://ticket/1", ""}), "citations[1]", "required"},
		{"citation too long", set("citations", []any{"https://example.com/" + long(2029)}), "citations[0]", "max"},
		{"too many citations", set("citations", items(51, "crm://ticket/1")), "citations", "max"},

		// locale
		{"locale with space", set("locale", "en US"), "locale", "bcp47"},
		{"locale with underscore", set("locale", "en_US"), "locale", "bcp47"},
		{"locale well-formed but unknown", set("locale", "zz"), "locale", "bcp47"},
		{"locale not a tag", set("locale", "english"), "locale", "bcp47"},
		{"locale too long", set("locale", "en-"+strings.Repeat("abcdefgh-", 4)+"x"), "locale", "max"},
		{"locale empty", set("locale", ""), "locale", "empty"},

		// refund
		{"refund as string", set("refund", "49.99 USD"), "refund", "type"},
		{"refund amount missing", set("refund", obj{"currency": "USD"}), "refund.amount", "required"},
		{"refund amount zero", set("refund", obj{"amount": "0", "currency": "USD"}), "refund.amount", "amount"},
		{"refund amount zero with fraction", set("refund", obj{"amount": "000.00", "currency": "USD"}), "refund.amount", "amount"},
		{"refund amount negative", set("refund", obj{"amount": "-1.00", "currency": "USD"}), "refund.amount", "amount"},
		{"refund amount exponent", set("refund", obj{"amount": "1e3", "currency": "USD"}), "refund.amount", "amount"},
		{"refund amount five decimals", set("refund", obj{"amount": "1.23456", "currency": "USD"}), "refund.amount", "amount"},
		{"refund amount thirteen digits", set("refund", obj{"amount": "1234567890123", "currency": "USD"}), "refund.amount", "amount"},
		{"refund amount bare point", set("refund", obj{"amount": "5.", "currency": "USD"}), "refund.amount", "amount"},
		{"refund amount leading point", set("refund", obj{"amount": ".5", "currency": "USD"}), "refund.amount", "amount"},
		{"refund amount as number", set("refund", obj{"amount": 49.99, "currency": "USD"}), "refund.amount", "type"},
		{"refund currency missing", set("refund", obj{"amount": "1.00"}), "refund.currency", "required"},
		{"refund currency lower case", set("refund", obj{"amount": "1.00", "currency": "usd"}), "refund.currency", "iso4217"},
		{"refund currency unknown", set("refund", obj{"amount": "1.00", "currency": "XYZ"}), "refund.currency", "iso4217"},
		{"refund unknown field", set("refund", obj{"amount": "1.00", "currency": "USD", "reason": "dup"}), "refund.reason", "unknown_field"},

		// transcript
		{"turn role unknown", set("transcript", []any{obj{"role": "bot", "content": "hi"}}), "transcript[0].role", "oneof"},
		{"turn role missing", set("transcript", []any{obj{"content": "hi"}}), "transcript[0].role", "required"},
		{"turn content empty", set("transcript", []any{obj{"role": "user", "content": ""}}), "transcript[0].content", "required"},
		{"turn content too long", set("transcript", []any{obj{"role": "user", "content": long(20001)}}), "transcript[0].content", "max"},
		{"turn at not a time", set("transcript", []any{obj{"role": "user", "content": "hi", "at": "now"}}), "transcript[0].at", "datetime"},
		{"turn unknown field", set("transcript", []any{obj{"role": "user", "content": "hi", "name": "Dana"}}), "transcript[0].name", "unknown_field"},
		{"transcript too long", set("transcript", items201Turns()), "transcript", "max"},

		// the rest
		{"preferred_agent not an email", set("preferred_agent", "dana"), "preferred_agent", "email"},
		{"preferred_agent too long", set("preferred_agent", long(250)+"@x.io"), "preferred_agent", "max"},
		{"privacy flag as string", set("privacy_flags", obj{"pii_redacted_in_summary": "no"}), "privacy_flags.pii_redacted_in_summary", "type"},
		{"privacy flag bad key", set("privacy_flags", obj{"pii redacted": true}), "privacy_flags.pii redacted", "key"},
		{"too many privacy flags", set("privacy_flags", manyKeys(51, true)), "privacy_flags", "max"},
		{"unknown top-level field", set("escalate_to", "billing"), "escalate_to", "unknown_field"},
		{"field name in another case", set("Handoff_ID", "ho_2"), "Handoff_ID", "unknown_field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := minimalPackage()
			tt.change(p)
			_, err := Decode(encode(t, p))
			assertFields(t, err, FieldError{Field: tt.field, Rule: tt.rule})
		})
	}
}

// TestAllProblemsAtOnce checks that validation does not stop at the first problem.
func TestAllProblemsAtOnce(t *testing.T) {
	p := minimalPackage()
	p["priority"] = 5
	p["contact"] = obj{"id": "c", "email": "dana"}
	p["locale"] = "en_US"
	p["transcript"] = []any{obj{"role": "user", "content": "hi"}, obj{"role": "bot", "content": "hello"}}
	p["extra"] = true
	_, err := Decode(encode(t, p))
	assertFields(t, err,
		FieldError{Field: "contact.email", Rule: "email"},
		FieldError{Field: "extra", Rule: "unknown_field"},
		FieldError{Field: "locale", Rule: "bcp47"},
		FieldError{Field: "priority", Rule: "type"},
		FieldError{Field: "transcript[1].role", Rule: "oneof"},
	)
}

func TestMessagesAreSentences(t *testing.T) {
	p := minimalPackage()
	p["priority"] = "asap"
	p["reason"] = strings.Repeat("x", 501)
	p["open_questions"] = slices.Repeat([]any{"q"}, 51)
	p["structured_entities"] = obj{"a": obj{}}
	_, err := Decode(encode(t, p))
	verr, ok := errors.AsType[*ValidationError](err)
	if !ok {
		t.Fatalf("got %v", err)
	}
	want := map[string]string{
		"open_questions":        "open_questions must have at most 50 items",
		"priority":              "priority must be one of: low, normal, high, urgent",
		"reason":                "reason must be at most 500 characters",
		"structured_entities.a": "structured_entities.a must be a string, number, boolean or list of strings, not an object",
	}
	for _, f := range verr.Fields {
		if f.Message != want[f.Field] {
			t.Errorf("%s: message %q, want %q", f.Field, f.Message, want[f.Field])
		}
	}
}

func TestValidateForQueue(t *testing.T) {
	p := Package{StructuredEntities: map[string]EntityValue{
		"account_id": StringEntity("acct_1"),
		"charge_ids": listEntity(),
		"region":     StringEntity(""),
		"seats":      NumberEntity("0"),
		"vip":        BoolEntity(false),
	}, TargetProfile: "billing_t2"}
	if err := p.ValidateForQueue(QueueRules{RequiredEntityKeys: []string{"account_id", "seats", "vip"}}); err != nil {
		t.Errorf("present keys: %v", err)
	}
	if err := p.ValidateForQueue(QueueRules{}); err != nil {
		t.Errorf("no rules: %v", err)
	}
	err := p.ValidateForQueue(QueueRules{RequiredEntityKeys: []string{"region", "plan", "charge_ids"}})
	assertFields(t, err,
		FieldError{Field: "structured_entities.charge_ids", Rule: "required"},
		FieldError{Field: "structured_entities.plan", Rule: "required"},
		FieldError{Field: "structured_entities.region", Rule: "required"},
	)
	if !strings.Contains(err.Error(), "required by queue billing_t2") {
		t.Errorf("message %q does not name the queue", err)
	}
}

// TestValidateBuiltInGo covers packages that never were JSON, such as one
// converted from another input format.
func TestValidateBuiltInGo(t *testing.T) {
	at := time.Date(2026, 6, 2, 14, 3, 11, 0, time.UTC)
	ok := true
	p := Package{
		SchemaVersion: "1.0", HandoffID: "ho_1", SourceRunID: "run_1", SourceAgent: "sw4rm:agent-7",
		TargetProfile: "billing_t2", TransferMode: TransferModeCold, Trigger: TriggerCapabilityMismatch,
		Contact:            Contact{ID: "cust_1"},
		ProblemStatement:   "Converted from a SW4RM HandoffRequest.",
		StructuredEntities: map[string]EntityValue{"account_id": StringEntity("acct_1"), "seats": NumberEntity("3")},
		AttemptedActions:   []AttemptedAction{{Tool: "lookup", Result: "found", OK: &ok, At: &at}},
		Transcript:         []Turn{{Role: RoleUser, Content: "hello", At: &at}},
	}
	if err := p.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}

	p.SchemaVersion = "2.0"
	p.StructuredEntities["broken"] = EntityValue{}
	p.Transcript[0].Role = "bot"
	assertFields(t, p.Validate(),
		FieldError{Field: "schema_version", Rule: "schema_version"},
		FieldError{Field: "structured_entities.broken", Rule: "type"},
		FieldError{Field: "transcript[0].role", Rule: "oneof"},
	)
}

func TestMergeErrors(t *testing.T) {
	if err := MergeErrors(nil, nil); err != nil {
		t.Errorf("MergeErrors(nil, nil) = %v", err)
	}
	other := errors.New("database down")
	if err := MergeErrors(&ValidationError{Fields: []FieldError{{Field: "a", Rule: "required", Message: "a"}}}, other); err != other {
		t.Errorf("a non-validation error must come back as it is, got %v", err)
	}
	err := MergeErrors(
		&ValidationError{Fields: []FieldError{
			{Field: "transcript[10].role", Rule: "oneof", Message: "m"},
			{Field: "contact", Rule: "type", Message: "m"},
		}},
		nil,
		&ValidationError{Fields: []FieldError{
			{Field: "transcript[2].role", Rule: "oneof", Message: "m"},
			{Field: "contact.id", Rule: "required", Message: "m"}, // shadowed by contact's type error
			{Field: "contact_id", Rule: "unknown_field", Message: "m"},
			{Field: "transcript[2].role", Rule: "oneof", Message: "m"}, // duplicate
		}},
	)
	assertFields(t, err,
		FieldError{Field: "contact", Rule: "type"},
		FieldError{Field: "contact_id", Rule: "unknown_field"},
		FieldError{Field: "transcript[2].role", Rule: "oneof"},
		FieldError{Field: "transcript[10].role", Rule: "oneof"},
	)
}

func TestEnumListsMatchConstants(t *testing.T) {
	// The JSON names are the wire contract; a renamed constant must not change them.
	got, _ := json.Marshal(obj{
		"transfer_modes": TransferModes(), "triggers": Triggers(), "priorities": Priorities(),
		"sentiments": Sentiments(), "channels": Channels(), "roles": Roles(),
	})
	want := `{"channels":["chat","voice","email","sms","web"],"priorities":["low","normal","high","urgent"],` +
		`"roles":["user","assistant","tool","system"],"sentiments":["positive","neutral","frustrated","angry","unknown"],` +
		`"transfer_modes":["warm","cold"],"triggers":["policy_boundary","low_confidence","tool_failure","user_request","sla_sentiment","capability_mismatch"]}`
	if string(got) != want {
		t.Errorf("enum values changed:\n got %s\nwant %s", got, want)
	}
}

func set(field string, value any) func(obj) {
	return func(p obj) { p[field] = value }
}

func drop(field string) func(obj) {
	return func(p obj) { delete(p, field) }
}

func manyKeys(n int, value any) obj {
	o := obj{}
	for i := range n {
		o[fmt.Sprintf("k%03d", i)] = value
	}
	return o
}

func items201Turns() []any {
	turns := make([]any, 201)
	for i := range turns {
		turns[i] = obj{"role": "user", "content": fmt.Sprint("turn ", i)}
	}
	return turns
}
