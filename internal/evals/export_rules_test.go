package evals

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/evals/evalstest"
	"github.com/handoffdesk/desk/internal/handoff"
)

// transcripts are the shapes a package's conversation comes in: none, the customer first or the
// bot first, ending on either, several turns of one role in a row, tool and system turns between,
// and longer than a prompt carries.
func transcripts() map[string][]handoff.Turn {
	turn := func(role handoff.Role, text string) handoff.Turn { return handoff.Turn{Role: role, Content: text} }
	long := []handoff.Turn{}
	for i := range 3 * PromptTurns {
		long = append(long, turn([]handoff.Role{handoff.RoleAssistant, handoff.RoleUser, handoff.RoleUser}[i%3], fmt.Sprintf("turn %d", i)))
	}
	return map[string][]handoff.Turn{
		"none":                 nil,
		"user last":            {turn(handoff.RoleUser, "I was charged twice."), turn(handoff.RoleAssistant, "Let me look."), turn(handoff.RoleUser, "Please hurry.")},
		"bot's hand-over last": {turn(handoff.RoleUser, "I was charged twice."), turn(handoff.RoleAssistant, "Let me look."), turn(handoff.RoleAssistant, "Connecting you to a specialist.")},
		"bot first":            {turn(handoff.RoleAssistant, "Hi! How can I help?"), turn(handoff.RoleUser, "Refund please.")},
		"bot alone":            {turn(handoff.RoleAssistant, "Hi! How can I help?")},
		"tools between":        {turn(handoff.RoleUser, "Refund."), turn(handoff.RoleTool, `{"ok":true}`), turn(handoff.RoleSystem, "policy"), turn(handoff.RoleUser, "Now.")},
		"long":                 long,
	}
}

// Every line of every trainer format, for every shape of conversation, as an admin, a masked
// supervisor and redacted, passes the rules of the trainer that reads it.
func TestEveryTrainerLinePassesItsTrainersRules(t *testing.T) {
	for name, transcript := range transcripts() {
		raw, err := json.Marshal(handoff.Package{
			SchemaVersion: "1.0", HandoffID: "ho_1", ProblemStatement: "Charged twice for Dana Whitfield.",
			Contact:            handoff.Contact{ID: "c1", DisplayName: "Dana Whitfield", Email: "dana@example.com"},
			StructuredEntities: map[string]handoff.EntityValue{"account_id": handoff.StringEntity("acct_1")},
			AttemptedActions:   []handoff.AttemptedAction{{Tool: "refund_lookup", Result: "two charges found"}},
			Transcript:         transcript, DraftReply: "Hi Dana, refunded.",
		})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range Formats()[1:] {
			for _, who := range []struct {
				role   auth.Role
				redact bool
			}{{auth.RoleAdmin, false}, {auth.RoleSupervisor, false}, {auth.RoleAdmin, true}} {
				for _, r := range []row{replyRow(raw, true), replyRow(raw, false), laterTurnRow(raw)} {
					edited := !*r.acceptedAsIs
					out := render(who.role, Filter{Format: f, Redact: who.redact}, []row{r})
					if out.err != nil {
						t.Fatal(out.err)
					}
					for line := range bytes.Lines(out.text) {
						if err := evalstest.Check(string(f), line); err != nil {
							t.Errorf("%s, %s as %s (redact %v, edited %v): %v\n%s", name, f, who.role, who.redact, edited, err, line)
						}
						if bytes.Contains(line, []byte(handoff.Masked)) {
							t.Errorf("%s, %s as %s: a mask reaches the export\n%s", name, f, who.role, line)
						}
					}
				}
			}
		}
	}
}

// laterTurnRow is a reply to the customer's third message after the handoff, whose thread holds
// the customer writing twice in a row, the bot's own words, and an agent's earlier reply.
func laterTurnRow(pkg []byte) row {
	r := replyRow(pkg, true)
	r.inReplyTo = new(int)
	*r.inReplyTo = 5
	r.thread = []ThreadMessage{
		{Seq: 1, Role: conversation.User, Text: "Dana here, still waiting."}, {Seq: 2, Role: conversation.Assistant, Text: "An agent is on the way."},
		{Seq: 3, Role: conversation.Agent, Text: "Hi Dana, looking now."}, {Seq: 4, Role: conversation.User, Text: "Thanks, which card?"},
		{Seq: 5, Role: conversation.User, Text: "The one ending 4417?"},
	}
	return r
}

func replyRow(pkg []byte, edited bool) row {
	draft, final := "Hi Dana, refunded.", "Hi Dana, refunded today."
	if !edited {
		final = draft
	}
	zero, asIs := 0, !edited
	words, _ := json.Marshal(Compare(draft, final).Words)
	return row{kind: KindReply, handoffID: "ho_1", sourceAgent: "tier1", queue: "billing", trigger: "policy_boundary",
		draft: &draft, final: &final, unified: new(string), words: words, charDistance: &zero, wordDistance: &zero,
		acceptedAsIs: &asIs, editingMS: &zero, piiMinRole: "admin", piiKeys: []string{"account_id"}, pkg: pkg}
}

// The rules refuse the lines the export wrote before it followed them: a prompt that ends on the
// system message or on the bot's turn, two assistant turns in a row, unknown keys.
func TestTrainerRulesRefuseWhatTrainersRefuse(t *testing.T) {
	for _, tc := range []struct{ format, line, want string }{
		{"openai-sft", `{"messages":[{"role":"system","content":"s"},{"role":"assistant","content":"a"}]}`, "alternate"},
		{"openai-sft", `{"messages":[{"role":"system","content":"s"},{"role":"user","content":"u"},{"role":"assistant","content":"a"},{"role":"assistant","content":"b"}]}`, "alternate"},
		{"openai-sft", `{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":""}]}`, "missing content"},
		{"openai-sft", `{"messages":[{"role":"user","content":"u"},{"role":"assistant","content":"a"}],"id":1}`, "unknown key"},
		{"openai-dpo", `{"input":{"messages":[{"role":"system","content":"s"}]},"preferred_output":[{"role":"assistant","content":"a"}],"non_preferred_output":[{"role":"assistant","content":"b"}]}`, "not the user's"},
		{"trl-preference", `{"prompt":[{"role":"user","content":"u"},{"role":"assistant","content":"a"}],"chosen":[{"role":"assistant","content":"a"}],"rejected":[{"role":"assistant","content":"b"}]}`, "not the user's"},
		{"kto", `{"prompt":[{"role":"user","content":"u"}],"completion":[{"role":"assistant","content":"a"}],"label":"yes"}`, "cannot unmarshal"},
	} {
		err := evalstest.Check(tc.format, []byte(tc.line))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want an error saying %q", tc.format, tc.line, err, tc.want)
		}
	}
}

// A package without a conversation is itself the user's turn; one with a conversation puts the
// package and the bot's last words in the system message and ends on the customer's words.
func TestPromptIsTheConversationTheAgentAnswered(t *testing.T) {
	p := handoff.Package{ProblemStatement: "Charged twice.", RecommendedNextStep: "Refund one."}
	got := promptOf(p, nil, "billing", "tier1")
	if len(got) != 2 || got[1].Role != "user" || got[1].Content != "Problem: Charged twice.\nRecommended next step: Refund one." {
		t.Errorf("no transcript: %+v", got)
	}
	p.Transcript = transcripts()["bot's hand-over last"]
	got = promptOf(p, nil, "billing", "tier1")
	if len(got) != 2 || got[1].Content != "I was charged twice." ||
		!strings.HasSuffix(got[0].Content, "The bot's last words to the customer: Let me look.\n\nConnecting you to a specialist.") {
		t.Errorf("the bot's hand-over last: %+v", got)
	}
}

// A later turn's prompt is the transcript, then the thread up to the customer message the reply
// answers, ending on it; the customer's messages in a row are one turn, and the agent's reply in
// the thread is the assistant's.
func TestPromptOfALaterTurnEndsOnItsCustomerMessage(t *testing.T) {
	p := handoff.Package{ProblemStatement: "Charged twice.", Transcript: transcripts()["bot's hand-over last"]}
	got := promptOf(p, laterTurnRow(nil).thread, "billing", "tier1")
	var roles []string
	for _, m := range got {
		roles = append(roles, m.Role)
	}
	want := []string{"system", "user", "assistant", "user", "assistant", "user"}
	if strings.Join(roles, " ") != strings.Join(want, " ") {
		t.Fatalf("roles %v, want %v: %+v", roles, want, got)
	}
	if got[2].Content != "Let me look.\n\nConnecting you to a specialist." || got[3].Content != "Dana here, still waiting." ||
		got[4].Content != "An agent is on the way.\n\nHi Dana, looking now." || got[5].Content != "Thanks, which card?\n\nThe one ending 4417?" {
		t.Errorf("turns %+v", got)
	}
	if strings.Contains(got[0].Content, "last words") {
		t.Errorf("the bot's hand-over is a turn of the chat now, not the system's: %q", got[0].Content)
	}
}
