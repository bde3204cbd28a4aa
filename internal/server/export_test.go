package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/handoff"
)

// exportFixture is a desk with three records on Harbor packages in billing_t2, a queue whose
// contacts only admins see: an edited reply, a draft sent as is, and a resolution with a note.
type exportFixture struct {
	app                    *testApp
	agent, sup, admin      *http.Client
	edited, asIs, resolved string // the packages' ids
	draft, final           string // of the edited reply
}

const (
	editedFinal  = "Hi Dana, I reversed the duplicate charge ch_44c. The receipt goes to dana.whitfield@example.com; call +1 415 555 0134 with questions."
	resolvedNote = "Dana confirmed by phone on 415-555-0134"
)

// piiOfHarbor is what the PII grep looks for: the contact's name, email and phone, and the
// entity the queue marks as PII.
// piiOfHarbor are the Harbor customer's details as text can hold them. The phone's digits are
// sought with a separator or whole: bare "555" or "0134" turn up in a record's timestamp.
var piiOfHarbor = []string{"Dana", "DANA", "dana", "Whitfield", "415-555", "555-0134", "555 0134", "5550134", "acct_9912"}

func newExportFixture(t *testing.T) *exportFixture {
	t.Helper()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET pii_min_role = 'admin', pii_entity_keys = '{account_id}' WHERE name = 'billing_t2'`); err != nil {
		t.Fatal(err)
	}
	app.user(t, "ann@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sue@example.com", auth.RoleSupervisor)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	x := &exportFixture{app: app, agent: app.client(t), sup: app.client(t), admin: app.client(t)}
	app.login(t, x.agent, "ann@example.com")
	app.login(t, x.sup, "sue@example.com")
	app.login(t, x.admin, "ada@example.com")
	ids := make([]string, 3)
	for i := range ids {
		pkg := harbor(t, func(p map[string]any) {
			p["contact"].(map[string]any)["id"] = fmt.Sprintf("cust_export_%d", i)
		})
		ids[i] = pkg["handoff_id"].(string)
		expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
		x.draft = pkg["draft_reply"].(string)
	}
	x.edited, x.asIs, x.resolved = ids[0], ids[1], ids[2]
	x.final = editedFinal
	post := func(id, action string, form url.Values) {
		t.Helper()
		if status, _, body := postForm(t, x.agent, app.URL+"/handoffs/"+id+"/"+action, form); status != http.StatusSeeOther {
			t.Fatalf("%s %s: %d\n%s", action, id, status, body)
		}
	}
	post(x.edited, "accept", nil)
	post(x.edited, "reply", url.Values{"text": {editedFinal}, "tags": {"factual_error", "tone"}})
	post(x.edited, "resolve", url.Values{"code": {"solved"}})
	post(x.asIs, "accept", nil)
	post(x.asIs, "reply", url.Values{"text": {x.draft}})
	post(x.asIs, "resolve", url.Values{"code": {"solved"}})
	post(x.resolved, "accept", nil)
	post(x.resolved, "resolve", url.Values{"code": {"solved"}, "note": {resolvedNote}})
	return x
}

// export GETs the export with a client and returns the status and the body.
func (x *exportFixture) export(t *testing.T, c *http.Client, query string) (int, string) {
	t.Helper()
	resp, err := c.Get(x.app.URL + "/evals/export.jsonl?" + query)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode == http.StatusOK && !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		t.Errorf("export %s: Content-Type %q", query, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, string(body)
}

// lines decodes an export of 200 line by line into T, refusing members T does not have.
func exportLines[T any](t *testing.T, x *exportFixture, c *http.Client, query string) []T {
	t.Helper()
	status, body := x.export(t, c, query)
	if status != http.StatusOK {
		t.Fatalf("export %s: %d\n%s", query, status, body)
	}
	var out []T
	sc := bufio.NewScanner(strings.NewReader(body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		var v T
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("export %s: line %q: %v", query, sc.Text(), err)
		}
		out = append(out, v)
	}
	return out
}

type msg struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// checkPrompt holds a prompt to its documented shape: the system message from the queue and the
// package, then the transcript's turns between customer and bot.
func checkPrompt(t *testing.T, what string, prompt []msg) {
	t.Helper()
	if len(prompt) < 1 || prompt[0].Role != "system" || !strings.Contains(prompt[0].Content, "billing_t2") ||
		!strings.Contains(prompt[0].Content, "Problem: Duplicate charge $49.99") || !strings.Contains(prompt[0].Content, "Recommended next step: Apply goodwill refund") ||
		!strings.Contains(prompt[0].Content, "charge_ids: ch_44b, ch_44c") {
		t.Errorf("%s: system message %+v", what, prompt)
	}
	for _, m := range prompt[1:] {
		if m.Role != "user" && m.Role != "assistant" || m.Content == "" {
			t.Errorf("%s: turn %+v is not a turn of the conversation", what, m)
		}
	}
}

// oneAnswer holds a completion to exactly one assistant message and returns its content.
func oneAnswer(t *testing.T, what string, ms []msg) string {
	t.Helper()
	if len(ms) != 1 || ms[0].Role != "assistant" {
		t.Errorf("%s: %+v, want exactly one assistant message", what, ms)
		return ""
	}
	return ms[0].Content
}

// Each format, line by line, against its documented shape, as an admin (who sees the contact in
// this queue) exports it.
func TestEvalsExportFormats(t *testing.T) {
	t.Parallel()
	x := newExportFixture(t)

	recs := exportLines[evals.Record](t, x, x.admin, "")
	var kinds []string
	for _, r := range recs {
		kinds = append(kinds, string(r.Kind))
		if r.Schema != "handoff-desk.eval/1" || r.SourceAgent != "tier1-support" || r.SourceRunID != "run_t1_22a7" ||
			r.Queue != "billing_t2" || r.Trigger != "policy_boundary" || r.Locale != "en-US" || r.At.IsZero() || r.HandoffID == "" {
			t.Errorf("record %+v lacks its common fields", r)
		}
		if (r.Kind == evals.KindReply) != (r.Final != nil && r.Draft != nil && r.Diff != nil && r.EditDistanceChars != nil &&
			r.EditDistanceWords != nil && r.AcceptedAsIs != nil && r.Tags != nil) {
			t.Errorf("record %s of %s: reply fields present on other kinds or missing on replies: %+v", r.Kind, r.HandoffID, r)
		}
	}
	if fmt.Sprint(kinds) != "[reply resolve reply resolve resolve]" {
		t.Fatalf("kinds %v, want each reply and resolution in order", kinds)
	}
	edited := recs[0]
	var draft, final strings.Builder
	for _, s := range edited.WordDiff {
		if s.Op != evals.Insert {
			draft.WriteString(s.Text)
		}
		if s.Op != evals.Delete {
			final.WriteString(s.Text)
		}
	}
	if edited.HandoffID != x.edited || *edited.Draft != x.draft || *edited.Final != x.final || draft.String() != x.draft ||
		final.String() != x.final || !strings.HasPrefix(*edited.Diff, "--- draft\n+++ final\n@@ -1,1 +1,1 @@\n-Hi Dana, I can see") ||
		*edited.AcceptedAsIs || *edited.EditDistanceWords == 0 || fmt.Sprint(edited.Tags) != "[factual_error tone]" {
		t.Errorf("the edited reply's record: %+v", edited)
	}
	if asIs := recs[2]; asIs.HandoffID != x.asIs || !*asIs.AcceptedAsIs || *asIs.EditDistanceChars != 0 || *asIs.Diff != "" || len(asIs.Tags) != 0 {
		t.Errorf("the draft sent as is: %+v", asIs)
	}
	if r := recs[4]; r.Code != "solved" || r.Note != resolvedNote || r.EscalationNeeded != nil {
		t.Errorf("the resolution: %+v", r)
	}
	if got := exportLines[evals.Record](t, x, x.admin, "kind=resolve&queue=billing_t2&source_agent=tier1-support"); len(got) != 3 {
		t.Errorf("kind=resolve: %d lines, want 3", len(got))
	}
	if got := exportLines[evals.Record](t, x, x.admin, "source_agent=other-bot"); len(got) != 0 {
		t.Errorf("another bot's records: %d lines, want none", len(got))
	}
	if got := exportLines[evals.Record](t, x, x.admin, "since=2000-01-01&until=2001-01-01"); len(got) != 0 {
		t.Errorf("a window before any record: %d lines", len(got))
	}
	if got := exportLines[evals.Record](t, x, x.admin, "since=2000-01-01"); len(got) != 5 {
		t.Errorf("since 2000: %d lines, want 5", len(got))
	}

	sft := exportLines[struct {
		Messages []msg `json:"messages"`
	}](t, x, x.admin, "format=openai-sft")
	if len(sft) != 2 {
		t.Fatalf("openai-sft: %d lines, want one per reply", len(sft))
	}
	for i, want := range []string{x.final, x.draft} {
		ms := sft[i].Messages
		checkPrompt(t, "openai-sft", ms[:len(ms)-1])
		if len(ms) < 3 || ms[1].Role != "user" || oneAnswer(t, "openai-sft", ms[len(ms)-1:]) != want {
			t.Errorf("openai-sft line %d: %+v, want the transcript and then the reply sent", i, ms)
		}
	}

	dpo := exportLines[struct {
		Input struct {
			Messages []msg `json:"messages"`
		} `json:"input"`
		Preferred    []msg `json:"preferred_output"`
		NonPreferred []msg `json:"non_preferred_output"`
	}](t, x, x.admin, "format=openai-dpo")
	if len(dpo) != 1 {
		t.Fatalf("openai-dpo: %d lines, want the edited draft's only", len(dpo))
	}
	checkPrompt(t, "openai-dpo", dpo[0].Input.Messages)
	if oneAnswer(t, "preferred_output", dpo[0].Preferred) != x.final || oneAnswer(t, "non_preferred_output", dpo[0].NonPreferred) != x.draft {
		t.Errorf("openai-dpo: %+v", dpo[0])
	}

	trl := exportLines[struct {
		Prompt   []msg `json:"prompt"`
		Chosen   []msg `json:"chosen"`
		Rejected []msg `json:"rejected"`
	}](t, x, x.admin, "format=trl-preference")
	if len(trl) != 1 {
		t.Fatalf("trl-preference: %d lines, want the edited draft's only", len(trl))
	}
	checkPrompt(t, "trl-preference", trl[0].Prompt)
	if oneAnswer(t, "chosen", trl[0].Chosen) != x.final || oneAnswer(t, "rejected", trl[0].Rejected) != x.draft {
		t.Errorf("trl-preference: %+v", trl[0])
	}

	kto := exportLines[struct {
		Prompt     []msg `json:"prompt"`
		Completion []msg `json:"completion"`
		Label      *bool `json:"label"`
	}](t, x, x.admin, "format=kto")
	var got []string
	for _, l := range kto {
		checkPrompt(t, "kto", l.Prompt)
		if l.Label == nil {
			t.Fatalf("kto line without a label: %+v", l)
		}
		got = append(got, fmt.Sprintf("%v:%s", *l.Label, oneAnswer(t, "completion", l.Completion)))
	}
	want := []string{"false:" + x.draft, "true:" + x.final, "true:" + x.draft}
	if !slices.Equal(got, want) {
		t.Errorf("kto lines:\n%q\nwant the edited draft false, its final true, the draft sent as is true:\n%q", got, want)
	}
}

// What the export holds of the customer depends on who exports: a supervisor, who sees this
// queue's contacts masked, finds none of them in any format, placeholders in their stead; with redact=true nobody does, and
// the placeholders agree between prompt and completion.
func TestEvalsExportMasksAndRedacts(t *testing.T) {
	t.Parallel()
	x := newExportFixture(t)
	formats := []string{"records", "openai-sft", "openai-dpo", "trl-preference", "kto"}
	grep := func(who string, c *http.Client, query string) string {
		t.Helper()
		status, body := x.export(t, c, query)
		if status != http.StatusOK || body == "" {
			t.Fatalf("%s export %s: %d\n%s", who, query, status, body)
		}
		for _, leak := range piiOfHarbor {
			if strings.Contains(body, leak) {
				t.Errorf("%s export %s holds %q:\n%s", who, query, leak, body)
			}
		}
		return body
	}
	for _, f := range formats {
		grep("supervisor", x.sup, "format="+f)
		grep("supervisor", x.sup, "redact=true&format="+f)
		grep("admin", x.admin, "redact=true&format="+f)
	}
	if _, body := x.export(t, x.admin, "format=records"); !strings.Contains(body, "dana.whitfield@example.com") {
		t.Error("the admin, who sees this queue's contacts, gets them masked")
	}
	// The admin's one unmasked export is one pii_views row naming its three packages; the
	// supervisor's masked and everyone's redacted exports record none.
	var reads, packages int
	if err := x.app.DB.QueryRow(t.Context(), `SELECT count(*), coalesce(sum(cardinality(handoff_ids)), 0) FROM pii_views WHERE via = 'export'`).
		Scan(&reads, &packages); err != nil {
		t.Fatal(err)
	}
	if reads != 1 || packages != 3 {
		t.Errorf("%d export reads of %d packages recorded, want 1 of 3", reads, packages)
	}
	// Below the PII role an export is redacted, not masked: no bullet or initial reaches a trainer.
	if body := grep("supervisor", x.sup, "format=records"); !strings.Contains(body, `"final":"Hi <NAME_1>, I reversed`) || strings.Contains(body, handoff.Masked) {
		t.Errorf("the supervisor's records are not redacted with placeholders:\n%s", body)
	}

	dpo := exportLines[struct {
		Input struct {
			Messages []msg `json:"messages"`
		} `json:"input"`
		Preferred    []msg `json:"preferred_output"`
		NonPreferred []msg `json:"non_preferred_output"`
	}](t, x, x.admin, "format=openai-dpo&redact=true")
	if len(dpo) != 1 {
		t.Fatalf("redacted openai-dpo: %d lines", len(dpo))
	}
	var transcript strings.Builder
	for _, m := range dpo[0].Input.Messages {
		transcript.WriteString(m.Content)
	}
	preferred, rejected := dpo[0].Preferred[0].Content, dpo[0].NonPreferred[0].Content
	if want := "Hi <NAME_1>, I reversed the duplicate charge ch_44c. The receipt goes to <EMAIL_1>; call <PHONE_1> with questions."; preferred != want {
		t.Errorf("redacted final %q, want %q", preferred, want)
	}
	if !strings.HasPrefix(rejected, "Hi <NAME_1>, ") || !strings.Contains(transcript.String(), "account_id: <ACCOUNT_ID_1>") {
		t.Errorf("the draft %q and the prompt %q do not name the customer by the final's placeholders", rejected, transcript.String())
	}
	if len(dpo[0].Input.Messages) < 2 {
		t.Errorf("the admin's redacted prompt lost the transcript the admin may read: %+v", dpo[0].Input.Messages)
	}
}

// Only supervisors and admins export, and a query the export cannot read is a 400 naming the
// parameter at fault.
func TestEvalsExportRefuses(t *testing.T) {
	t.Parallel()
	x := newExportFixture(t)
	if status, _ := x.export(t, x.agent, ""); status != http.StatusForbidden {
		t.Errorf("an agent's export: %d, want 403", status)
	}
	if status, _ := x.export(t, x.app.client(t), ""); status != http.StatusSeeOther && status != http.StatusUnauthorized {
		t.Errorf("an export without login: %d, want to be sent to log in", status)
	}
	for _, tc := range []struct{ query, param string }{
		{"format=csv", "format"},
		{"kind=edit", "kind"},
		{"format=openai-dpo&kind=resolve", "kind"},
		{"since=yesterday", "since"},
		{"until=2026-13-01", "until"},
		{"since=2026-06-02&until=2026-06-01", "until"},
		{"redact=maybe", "redact"},
		{"queue=nowhere", "queue"},
		{"fromat=kto", "fromat"},
		{"format=kto&format=records", "format"},
	} {
		status, body := x.export(t, x.sup, tc.query)
		if status != http.StatusBadRequest || !strings.Contains(body, tc.param) {
			t.Errorf("export %s: %d, want 400 naming %s\n%.300s", tc.query, status, tc.param, body)
		}
	}
}
