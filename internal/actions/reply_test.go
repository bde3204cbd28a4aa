package actions

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/handoff"
)

// evalRow is an eval record as the evals table holds it.
type evalRow struct {
	Kind, SourceAgent, SourceRunID, Trigger, Queue string
	Locale, Draft, Final, Unified, Code, Note      *string
	WordDiff                                       []evals.Segment
	Chars, Words, EditingMS                        *int
	AcceptedAsIs, EscalationNeeded                 *bool
	Tags                                           []string
	EditorID                                       int64
	At                                             time.Time
}

func (d *testDesk) evals(t *testing.T, id string) []evalRow {
	t.Helper()
	rows, err := d.db.Query(context.Background(), `
		SELECT e.kind, e.source_agent, e.source_run_id, e.trigger, q.name, e.locale, e.draft, e.final, e.unified_diff, e.code,
			e.note, e.word_diff, e.edit_distance_chars, e.edit_distance_words, e.editing_ms, e.accepted_as_is,
			e.escalation_needed, e.tags, e.editor_id, e.at
		FROM evals e JOIN handoffs h ON h.id = e.handoff_id JOIN queues q ON q.id = e.queue_id
		WHERE h.handoff_id = $1 ORDER BY e.id`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []evalRow
	for rows.Next() {
		var r evalRow
		if err := rows.Scan(&r.Kind, &r.SourceAgent, &r.SourceRunID, &r.Trigger, &r.Queue, &r.Locale, &r.Draft, &r.Final,
			&r.Unified, &r.Code, &r.Note, &r.WordDiff, &r.Chars, &r.Words, &r.EditingMS, &r.AcceptedAsIs,
			&r.EscalationNeeded, &r.Tags, &r.EditorID, &r.At); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func reply(t testing.TB, text string, tags ...string) evals.Reply {
	t.Helper()
	r, err := evals.ParseReply(text, tags, "4200")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Only the agent who accepted the package answers the customer: not before it is accepted, not a
// colleague, not a supervisor who has not taken it.
func TestReplyIsTheAcceptingAgents(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")
	sam := d.agent(t, "sam", auth.RoleSupervisor, 3, "billing")
	id := d.submit(t, "billing", nil)

	wantCode(t, "reply to a queued package", d.actions.Reply(ctx, alex, id, reply(t, "Hello")), desk.Conflict)
	if _, err := d.actions.Next(ctx, alex, "billing"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "reply to a reserved package", d.actions.Reply(ctx, alex, id, reply(t, "Hello")), desk.Conflict)
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "a colleague's reply", d.actions.Reply(ctx, bea, id, reply(t, "Hello")), desk.Forbidden)
	wantCode(t, "a supervisor's reply", d.actions.Reply(ctx, sam, id, reply(t, "Hello")), desk.Forbidden)
	wantCode(t, "reply to no package", d.actions.Reply(ctx, alex, "nope", reply(t, "Hello")), desk.NotFound)
	if got := d.evals(t, id); len(got) != 0 {
		t.Fatalf("refused replies wrote %d eval records", len(got))
	}
	if err := d.actions.Reply(ctx, alex, id, reply(t, "Hello")); err != nil {
		t.Fatalf("the accepting agent's reply: %v", err)
	}
	if _, err := d.actions.Resolve(ctx, alex, id, "solved", "", handoff.HandBack{}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "reply to a resolved package", d.actions.Reply(ctx, alex, id, reply(t, "Hello")), desk.Conflict)
}

// Each reply is a record holding the draft, the final text, their diffs and distances, the tags,
// the editor and the package's source fields; the log has a reply row and the bot a reply webhook
// with the final text, unmasked.
func TestRepliesAreRecordedAndSentToTheBot(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	id := d.submit(t, "billing", func(p *handoff.Package) {
		p.DraftReply = "Hi Dana, the refund is on its way."
		p.SourceRunID, p.Locale = "run_42", "de-DE"
	})
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	first := "Hi Dana, the refund of $49.99 is on its way. Reach me at dana@example.com."
	if err := d.actions.Reply(ctx, alex, id, reply(t, first, "missing_info", "tone")); err != nil {
		t.Fatal(err)
	}
	d.clock.Advance(time.Minute)
	second := "Hi Dana, the refund is on its way."
	// The customer writes again, and the bot's fresh draft of the answer is sent as it is.
	if _, err := d.actions.PostMessage(ctx, d.sender.APIKeyID, d.sender.QueueIDs, id,
		conversation.Incoming{MessageID: "m1", Role: conversation.User, Text: "When?", DraftReply: second}); err != nil {
		t.Fatal(err)
	}
	if err := d.actions.Reply(ctx, alex, id, reply(t, second)); err != nil {
		t.Fatal(err)
	}

	got := d.evals(t, id)
	if len(got) != 2 {
		t.Fatalf("%d eval records, want one per reply", len(got))
	}
	r := got[0]
	if r.Kind != "reply" || r.SourceAgent != "tier1-support" || r.SourceRunID != "run_42" || r.Trigger != "policy_boundary" ||
		r.Queue != "billing" || deref(r.Locale) != "de-DE" || r.EditorID != alex.ID || !r.At.Equal(d.clock.Now().Add(-time.Minute).Truncate(time.Microsecond)) {
		t.Errorf("record's package and editor fields: %+v", r)
	}
	if deref(r.Draft) != "Hi Dana, the refund is on its way." || deref(r.Final) != first {
		t.Errorf("record's draft %q and final %q", deref(r.Draft), deref(r.Final))
	}
	want := evals.Compare("Hi Dana, the refund is on its way.", first)
	if fmt.Sprint(r.WordDiff) != fmt.Sprint(want.Words) || deref(r.Unified) != want.Unified {
		t.Errorf("record's diffs %v / %q, want %v / %q", r.WordDiff, deref(r.Unified), want.Words, want.Unified)
	}
	if !strings.Contains(fmt.Sprint(r.WordDiff), "{insert of $49.99 }") {
		t.Errorf("word diff %v lacks the inserted amount", r.WordDiff)
	}
	if *r.Chars != want.CharDistance || *r.Words != want.WordDistance || *r.Words != 6 {
		t.Errorf("record's distances %d chars, %d words; want %d and 6", *r.Chars, *r.Words, want.CharDistance)
	}
	if *r.AcceptedAsIs || fmt.Sprint(r.Tags) != "[missing_info tone]" || *r.EditingMS != 4200 || r.Code != nil || r.EscalationNeeded != nil {
		t.Errorf("record's accepted_as_is %v, tags %v, editing %d ms, code %v", *r.AcceptedAsIs, r.Tags, *r.EditingMS, r.Code)
	}
	if s := got[1]; !*s.AcceptedAsIs || *s.Chars != 0 || *s.Words != 0 || len(s.Tags) != 0 || deref(s.Unified) != "" {
		t.Errorf("the draft sent as is: accepted %v, distances %d/%d, tags %v, diff %q", *s.AcceptedAsIs, *s.Chars, *s.Words, s.Tags, deref(s.Unified))
	}

	var payloads []string
	rows, err := d.db.Query(ctx, `SELECT payload::text FROM webhook_outbox WHERE handoff_id = $1 AND event = 'reply' ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		payloads = append(payloads, p)
	}
	if len(payloads) != 2 {
		t.Fatalf("%d reply webhooks, want 2", len(payloads))
	}
	var hook struct{ Event, Text, Status, Assignee string }
	if err := json.Unmarshal([]byte(payloads[0]), &hook); err != nil {
		t.Fatal(err)
	}
	if hook.Event != "reply" || hook.Text != first || hook.Status != "accepted" || hook.Assignee != "alex" {
		t.Errorf("reply webhook %s, want the final text unmasked", payloads[0])
	}
	var logged int
	if err := d.db.QueryRow(ctx, `SELECT count(*) FROM events e JOIN handoffs h ON h.id = e.handoff_id
		WHERE h.handoff_id = $1 AND e.kind = 'reply' AND e.actor_user = $2 AND NOT e.detail ? 'text'`, id, alex.ID).Scan(&logged); err != nil {
		t.Fatal(err)
	}
	if logged != 2 {
		t.Errorf("%d reply rows in the log without the text, want 2", logged)
	}
}

// A package without a draft gets a reply written from scratch, recorded against an empty draft.
func TestReplyFromScratch(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	id := d.submit(t, "billing", func(p *handoff.Package) { p.DraftReply, p.Locale = "", "" })
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	if err := d.actions.Reply(ctx, alex, id, reply(t, "Written by hand")); err != nil {
		t.Fatal(err)
	}
	got := d.evals(t, id)
	if len(got) != 1 {
		t.Fatalf("%d records, want 1", len(got))
	}
	r := got[0]
	if r.Draft == nil || *r.Draft != "" || *r.AcceptedAsIs || *r.Chars != 15 || *r.Words != 3 || r.Locale != nil {
		t.Errorf("from scratch: draft %v, accepted_as_is %v, distances %d/%d, locale %v", r.Draft, *r.AcceptedAsIs, *r.Chars, *r.Words, r.Locale)
	}
}

// Return to the bot, rejection and resolution each write their eval record with the action, and a
// refused action writes none. Returns that say the escalation was not needed are marked so.
func TestOutcomesAreEvalRecords(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing", "billing-disputes")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 4, "billing", "billing-disputes")
	bea := d.agent(t, "bea", auth.RoleAgent, 3, "billing")
	needless := d.submit(t, "billing", nil)
	needed := d.submit(t, "billing", nil)
	rejected := d.submit(t, "billing", nil)
	resolved := d.submit(t, "billing", nil)

	for _, id := range []string{needless, needed, rejected, resolved} {
		if err := d.actions.Accept(ctx, alex, id); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, "a colleague's return", errOf(d.actions.ReturnToBot(ctx, bea, needless, "wrong_escalation", "", handoff.HandBack{})), desk.Forbidden)
	wantCode(t, "a colleague's resolve", errOf(d.actions.Resolve(ctx, bea, resolved, "solved", "", handoff.HandBack{})), desk.Forbidden)
	wantCode(t, "a colleague's reject", errOf(d.actions.Reject(ctx, bea, rejected, "not mine", "")), desk.Forbidden)
	wantCode(t, "a reason unknown", errOf(d.actions.ReturnToBot(ctx, alex, needless, "bored", "", handoff.HandBack{})), desk.Invalid)
	for _, id := range []string{needless, rejected, resolved} {
		if got := d.evals(t, id); len(got) != 0 {
			t.Fatalf("refused actions on %s wrote %d eval records", id, len(got))
		}
	}

	if _, err := d.actions.ReturnToBot(ctx, alex, needless, "wrong_escalation", "the FAQ covers this", handoff.HandBack{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.actions.ReturnToBot(ctx, alex, needed, "needs_more_info", "", handoff.HandBack{}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.actions.Reject(ctx, alex, rejected, "wrong team", "billing-disputes"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.actions.Resolve(ctx, alex, resolved, "refunded", "goodwill", handoff.HandBack{}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, "resolving twice", errOf(d.actions.Resolve(ctx, alex, resolved, "solved", "", handoff.HandBack{})), desk.Conflict)

	for _, tc := range []struct {
		id, want string
	}{
		{needless, "return_to_bot wrong_escalation the FAQ covers this needed=false in billing"},
		{needed, "return_to_bot needs_more_info  needed=true in billing"},
		// The rejection is recorded in the queue the package was rejected from.
		{rejected, "reject  wrong team needed=<nil> in billing"},
		{resolved, "resolve refunded goodwill needed=<nil> in billing"},
	} {
		got := d.evals(t, tc.id)
		if len(got) != 1 {
			t.Errorf("%s: %d eval records, want 1", tc.want, len(got))
			continue
		}
		r := got[0]
		var needed any = nil
		if r.EscalationNeeded != nil {
			needed = *r.EscalationNeeded
		}
		desc := fmt.Sprintf("%s %s %s needed=%v in %s", r.Kind, deref(r.Code), deref(r.Note), needed, r.Queue)
		if desc != tc.want || r.EditorID != alex.ID || r.SourceAgent != "tier1-support" || r.Final != nil {
			t.Errorf("eval record %q by %d from %s, want %q by alex", desc, r.EditorID, r.SourceAgent, tc.want)
		}
	}
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// An agent whose role sees the contact masked edits the draft with tokens where the contact's
// values are; the customer is still greeted by name, and the record holds only the agent's own
// edit. A token they damaged sends nothing.
func TestReplyFillsTheTokensTheAgentKept(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	var pkg handoff.Package
	id := d.submit(t, "billing", func(p *handoff.Package) { pkg = *p })
	shown := pkg.DraftFor(handoff.VisibilityFor(auth.RoleAgent, handoff.PIIRule{MinRole: "supervisor"})).Text
	if !strings.Contains(shown, handoff.TokenOpen) {
		t.Fatalf("the draft %q has no token for agents; the test needs one", shown)
	}
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	damaged := strings.Replace(shown, handoff.TokenClose, "", 1)
	err := d.actions.Reply(ctx, alex, id, reply(t, damaged))
	if desk.ErrorCode(err) != desk.Invalid || !strings.Contains(desk.ErrorMessage(err), "damaged token") {
		t.Fatalf("a damaged token: %v, want a refusal naming it", err)
	}
	if err := d.actions.Reply(ctx, alex, id, reply(t, shown+" Sorry for the trouble.")); err != nil {
		t.Fatal(err)
	}
	want := pkg.DraftReply + " Sorry for the trouble."
	got := d.evals(t, id)
	if len(got) != 1 || deref(got[0].Final) != want {
		t.Fatalf("%d records, stored final %q, want one: %q", len(got), deref(got[0].Final), want)
	}
	if fmt.Sprint(got[0].WordDiff) != fmt.Sprint([]evals.Segment{{Op: evals.Equal, Text: pkg.DraftReply}, {Op: evals.Insert, Text: " Sorry for the trouble."}}) {
		t.Errorf("word diff %v, want only the sentence the agent added", got[0].WordDiff)
	}
	var texts []string
	rows, err := d.db.Query(ctx, `SELECT payload->>'text' FROM webhook_outbox WHERE handoff_id = $1 AND event = 'reply'`, id)
	if err != nil {
		t.Fatal(err)
	}
	if texts, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(texts) != 1 || texts[0] != want {
		t.Errorf("the bot is sent %q, want only %q", texts, want)
	}
}

// A mask pasted from the page into a note the bot gets is refused: the bot and the eval record
// would get the bullets.
func TestNoteWithAMaskIsRefused(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	id := d.submit(t, "billing", nil)
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	_, err := d.actions.ReturnToBot(ctx, alex, id, "needs_more_info", "Ask for the card ending "+handoff.Masked+"34.", handoff.HandBack{})
	if desk.ErrorCode(err) != desk.Invalid || !strings.Contains(desk.ErrorMessage(err), handoff.Masked) {
		t.Fatalf("a note with a mask: %v, want a refusal naming it", err)
	}
}

// Each reply is recorded against the draft of its turn: the package's for the first answer, the
// latest draft the customer's messages brought since the previous reply for a later one, none
// (written from scratch) when they brought none; with the customer message it answers and the
// thread up to it.
func TestEachReplyHoldsTheDraftOfItsTurn(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	id := d.submit(t, "billing", func(p *handoff.Package) { p.DraftReply = "The package's draft." })
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	say := func(messageID, text, draft string) {
		t.Helper()
		if _, err := d.actions.PostMessage(ctx, d.sender.APIKeyID, d.sender.QueueIDs, id,
			conversation.Incoming{MessageID: messageID, Role: conversation.User, Text: text, DraftReply: draft}); err != nil {
			t.Fatal(err)
		}
	}
	send := func(text string) {
		t.Helper()
		d.clock.Advance(time.Second)
		if err := d.actions.Reply(ctx, alex, id, reply(t, text)); err != nil {
			t.Fatal(err)
		}
	}
	send("First answer.")                   // seq 1
	send("A second word on the same turn.") // seq 2
	say("m1", "Which card?", "Draft A.")    // seq 3
	say("m2", "The Visa one?", "Draft B.")  // seq 4
	send("Yes, the Visa.")                  // seq 5
	say("m3", "Thanks.", "")                // seq 6
	send("You're welcome.")                 // seq 7

	var got []string
	rows, err := d.db.Query(ctx, `
		SELECT e.draft, coalesce(e.in_reply_to, 0), coalesce((SELECT string_agg(m->>'seq' || ' ' || (m->>'role'), ', ') FROM jsonb_array_elements(e.thread) m), '')
		FROM evals e JOIN handoffs h ON h.id = e.handoff_id WHERE h.handoff_id = $1 AND e.kind = 'reply' ORDER BY e.at`, id)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var draft, thread string
		var inReplyTo int
		if err := rows.Scan(&draft, &inReplyTo, &thread); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%q answers %d after [%s]", draft, inReplyTo, thread))
	}
	want := []string{
		`"The package's draft." answers 0 after []`,
		`"" answers 0 after []`,
		`"Draft B." answers 4 after [1 agent, 2 agent, 3 user, 4 user]`,
		`"" answers 6 after [1 agent, 2 agent, 3 user, 4 user, 5 agent, 6 user]`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("the replies' records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The first answer, when the customer wrote again before it with a fresh draft, is recorded
// against that draft: it drafts the answer to the message the reply answers, the package's cannot.
func TestFirstAnswerAfterACustomerMessageHoldsItsDraft(t *testing.T) {
	t.Parallel()
	d := newDesk(t, "billing")
	ctx := context.Background()
	alex := d.agent(t, "alex", auth.RoleAgent, 3, "billing")
	id := d.submit(t, "billing", func(p *handoff.Package) { p.DraftReply = "The package's draft." })
	if _, err := d.actions.PostMessage(ctx, d.sender.APIKeyID, d.sender.QueueIDs, id,
		conversation.Incoming{MessageID: "m1", Role: conversation.User, Text: "Hello?", DraftReply: "Sorry for the wait."}); err != nil {
		t.Fatal(err)
	}
	if err := d.actions.Accept(ctx, alex, id); err != nil {
		t.Fatal(err)
	}
	if err := d.actions.Reply(ctx, alex, id, reply(t, "Sorry for the wait!")); err != nil {
		t.Fatal(err)
	}
	if got := d.evals(t, id); len(got) != 1 || deref(got[0].Draft) != "Sorry for the wait." {
		t.Errorf("the first answer's record: %+v", got)
	}
}
