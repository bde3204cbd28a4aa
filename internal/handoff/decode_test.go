package handoff

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoffdesk/desk/internal/golden"
)

const (
	harborFile   = "testdata/harbor-v1.json"
	harborGolden = "testdata/harbor-v1.golden.json"
)

func TestHarborGolden(t *testing.T) {
	p, err := Decode(readFile(t, harborFile))
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if err := p.ValidateForQueue(QueueRules{RequiredEntityKeys: []string{"account_id"}}); err != nil {
		t.Fatalf("ValidateForQueue: %v", err)
	}
	golden.MatchJSON(t, harborGolden, p, "TestHarborGolden", *update)

	// Spot checks that the golden file alone would not make obvious.
	if p.Priority != PriorityHigh || p.Trigger != TriggerPolicyBoundary || p.ChannelOrigin != ChannelVoice {
		t.Errorf("enums: got priority %q, trigger %q, channel_origin %q", p.Priority, p.Trigger, p.ChannelOrigin)
	}
	if got := p.StructuredEntities["charge_ids"].List(); strings.Join(got, ",") != "ch_44b,ch_44c" {
		t.Errorf("charge_ids = %q", got)
	}
	if a := p.AttemptedActions[1]; a.OK == nil || *a.OK || !a.At.Equal(time.Date(2026, 6, 2, 14, 3, 40, 0, time.UTC)) {
		t.Errorf("attempted_actions[1] = %+v", a)
	}
}

func TestDecodeSyntaxError(t *testing.T) {
	tests := []struct {
		body       string
		wantOffset int64
		wantInMsg  string
	}{
		{``, 0, "line 1, column 1"},
		{`{`, 1, "unexpected end of JSON input"},
		{`{"handoff_id": "a",}`, 20, "byte 20 (line 1, column 20)"},
		{"{\n  \"handoff_id\" \"a\"\n}", 18, "line 2, column 16"},
		{`{"a": 1} {"b": 2}`, 10, "after top-level value"},
		{`{'a': 1}`, 2, "invalid character '\\''"},
		{`nul`, 3, "byte 3"},
	}
	for _, tt := range tests {
		t.Run(tt.body, func(t *testing.T) {
			_, err := Decode([]byte(tt.body))
			serr, ok := errors.AsType[*SyntaxError](err)
			if !ok {
				t.Fatalf("got %T %v, want *SyntaxError", err, err)
			}
			if serr.Offset != tt.wantOffset {
				t.Errorf("Offset = %d, want %d", serr.Offset, tt.wantOffset)
			}
			if !strings.Contains(err.Error(), tt.wantInMsg) {
				t.Errorf("message %q does not contain %q", err, tt.wantInMsg)
			}
		})
	}
}

func TestDecodeBodyMustBeObject(t *testing.T) {
	for _, body := range []string{`[]`, `"package"`, `42`, `null`, `true`} {
		_, err := Decode([]byte(body))
		assertFields(t, err, FieldError{Field: "", Rule: "type"})
	}
}

// A package of another version is not judged by v1's rules field by field.
func TestDecodeUnsupportedVersionStandsAlone(t *testing.T) {
	body := `{"schema_version": "2.0", "handoff_id": "h", "new_v2_field": {}}`
	_, err := Decode([]byte(body))
	assertFields(t, err, FieldError{Field: "schema_version", Rule: "schema_version"})
	if !strings.Contains(err.Error(), "supported: 1.x") {
		t.Errorf("message %q does not name the supported versions", err)
	}
}

func TestDecodeLeavesPriorityEmpty(t *testing.T) {
	p, err := Decode(encode(t, minimalPackage()))
	if err != nil {
		t.Fatal(err)
	}
	if p.Priority != "" {
		t.Errorf("priority = %q, want empty for the queue's default", p.Priority)
	}
}

// The decoded part of an invalid package is what the server needs to find
// the queue and report its rules too.
func TestDecodeKeepsWhatFitsOfAnInvalidPackage(t *testing.T) {
	pkg := minimalPackage()
	pkg["priority"] = 5
	pkg["structured_entities"] = obj{"account_id": obj{"nested": true}, "plan": "pro"}
	pkg["surprise"] = true
	p, err := Decode(encode(t, pkg))
	assertFields(t, err,
		FieldError{Field: "priority", Rule: "type"},
		FieldError{Field: "structured_entities.account_id", Rule: "type"},
		FieldError{Field: "surprise", Rule: "unknown_field"},
	)
	if p.TargetProfile != "general_t2" || p.StructuredEntities["plan"].Text() != "pro" {
		t.Errorf("decoded part lost: target_profile %q, entities %v", p.TargetProfile, p.StructuredEntities)
	}

	queueErr := p.ValidateForQueue(QueueRules{RequiredEntityKeys: []string{"account_id", "region"}})
	// account_id is already reported as the wrong type; saying it is missing too would only repeat that.
	assertFields(t, MergeErrors(err, queueErr),
		FieldError{Field: "priority", Rule: "type"},
		FieldError{Field: "structured_entities.account_id", Rule: "type"},
		FieldError{Field: "structured_entities.region", Rule: "required"},
		FieldError{Field: "surprise", Rule: "unknown_field"},
	)
}

// As in encoding/json, the last of a repeated member counts, and so do only
// its problems.
func TestDecodeLastOfARepeatedMemberCounts(t *testing.T) {
	body := `{"schema_version": "1.0", "handoff_id": "ho_1", "source_run_id": "run_1", "source_agent": "tier1",
		"target_profile": "general_t2", "transfer_mode": "cold", "trigger": "user_request", "problem_statement": "Wants a person.",
		"reason": 5, "reason": "Asked twice.",
		"contact": {"id": 7}, "contact": {"id": "cust_1", "email": "dana", "email": "dana@example.com"},
		"locale": "en-US", "locale": 3,
		"structured_entities": {"plan": {}, "plan": "pro", "plan.tier": {}}}`
	p, err := Decode([]byte(body))
	assertFields(t, err,
		FieldError{Field: "locale", Rule: "type"},
		FieldError{Field: "structured_entities.plan.tier", Rule: "type"},
	)
	if p.Reason != "Asked twice." || p.Contact.ID != "cust_1" || p.Contact.Email != "dana@example.com" || p.Locale != "" {
		t.Errorf("reason %q, contact %+v, locale %q", p.Reason, p.Contact, p.Locale)
	}
	if plan := p.StructuredEntities["plan"]; plan.Text() != "pro" || len(p.StructuredEntities) != 1 {
		t.Errorf("structured_entities = %v", p.StructuredEntities)
	}
}

func BenchmarkDecodeValidate(b *testing.B) {
	body, err := os.ReadFile(harborFile)
	if err != nil {
		b.Fatal(err)
	}
	rules := QueueRules{RequiredEntityKeys: []string{"account_id"}}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		p, err := Decode(body)
		if err != nil {
			b.Fatal(err)
		}
		if err := p.ValidateForQueue(rules); err != nil {
			b.Fatal(err)
		}
	}
}

// obj is a JSON object under construction in a test.
type obj = map[string]any

// minimalPackage returns a fresh valid package with only the required fields,
// the same as testdata/corpus/good/minimal.json.
func minimalPackage() obj {
	return obj{
		"schema_version":    "1.0",
		"handoff_id":        "ho_min_0001",
		"source_run_id":     "run_0001",
		"source_agent":      "tier1-support",
		"target_profile":    "general_t2",
		"transfer_mode":     "cold",
		"trigger":           "user_request",
		"contact":           obj{"id": "cust_0001"},
		"problem_statement": "Customer asks to speak to a person about closing their account.",
	}
}

func encode(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.FromSlash(path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// assertFields checks that err is a *ValidationError with exactly the wanted
// fields and rules, in order, each with a message.
func assertFields(t *testing.T, err error, want ...FieldError) {
	t.Helper()
	verr, ok := errors.AsType[*ValidationError](err)
	if !ok {
		t.Fatalf("got %T %v, want *ValidationError", err, err)
	}
	got := make([]string, len(verr.Fields))
	for i, f := range verr.Fields {
		got[i] = f.Field + " " + f.Rule
		if f.Message == "" {
			t.Errorf("%s %s has no message", f.Field, f.Rule)
		}
	}
	wantS := make([]string, len(want))
	for i, f := range want {
		wantS[i] = f.Field + " " + f.Rule
	}
	if strings.Join(got, "\n") != strings.Join(wantS, "\n") {
		t.Errorf("fields:\n  got  %q\n  want %q\nerror: %v", got, wantS, err)
	}
}

func TestDecodeStoresTimesInUTC(t *testing.T) {
	pkg := minimalPackage()
	pkg["attempted_actions"] = []any{obj{"tool": "t", "result": "r", "at": "2026-06-02T16:03:11+02:00"}}
	pkg["transcript"] = []any{obj{"role": "user", "content": "hi", "at": "2026-06-02T14:03:11+00:00"}}
	p, err := Decode(encode(t, pkg))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2026, 6, 2, 14, 3, 11, 0, time.UTC)
	for _, at := range []*time.Time{p.AttemptedActions[0].At, p.Transcript[0].At} {
		if *at != want { // == also compares the location
			t.Errorf("at = %v, want %v", at, want)
		}
	}
}

// A NUL character is refused in every string, values of entities included, and named by the
// path of the value that holds it: PostgreSQL's text columns cannot store it.
func TestDecodeRefusesNUL(t *testing.T) {
	pkg := minimalPackage()
	pkg["contact"] = obj{"id": "cust\x00"}
	pkg["draft_reply"] = "Hi \x00"
	pkg["open_questions"] = []any{"why\x00"}
	pkg["structured_entities"] = obj{"charge_ids": []any{"ch_1", "\x00"}, "note": "a\x00b"}
	body, err := json.Marshal(pkg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `cust\u0000`) {
		t.Fatalf("the body does not carry the escape: %s", body)
	}
	_, err = Decode(body)
	assertFields(t, err,
		FieldError{Field: "contact.id", Rule: RuleNUL},
		FieldError{Field: "draft_reply", Rule: RuleNUL},
		FieldError{Field: "open_questions[0]", Rule: RuleNUL},
		FieldError{Field: "structured_entities.charge_ids", Rule: RuleNUL},
		FieldError{Field: "structured_entities.note", Rule: RuleNUL},
	)
}
