package server_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/evals/evalstest"
)

// A package of five turns yields five eval pairs, each with the draft of its own turn and a
// prompt that is the conversation up to the customer message it answers, and every line of every
// trainer format passes that trainer's rules, whole and redacted (SPEC §3).
func TestMultiTurnLinesPassTheTrainersRules(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	d.user(t, "sue@example.com", auth.RoleSupervisor)
	sup := d.client(t)
	d.login(t, sup, "sue@example.com")
	pkgDraft := harbor(t, nil)["draft_reply"].(string)

	type turn struct {
		customer []map[string]any // what the customer writes before the reply
		reply    string
		draft    string // the draft the reply's record holds
		ends     string // the last user turn of the reply's prompt
	}
	msg := func(id, text, draft string) map[string]any {
		m := map[string]any{"message_id": id, "role": "user", "text": text}
		if draft != "" {
			m["draft_reply"] = draft
		}
		return m
	}
	turns := []turn{
		// The first answer answers the package: its draft is the package's.
		{reply: "Hi Dana, I see both charges and I am reversing one now.", draft: pkgDraft,
			ends: "I was charged twice for my subscription this month."},
		{customer: []map[string]any{msg("m1", "This is Dana Whitfield. Which card gets it?", "It goes back to your Visa.")},
			reply: "It goes back to the Visa ending 4417.", draft: "It goes back to your Visa.", ends: "This is Dana Whitfield. Which card gets it?"},
		// A turn without a fresh draft was written from scratch, never against an older draft.
		{customer: []map[string]any{msg("m2", "How long does it take?", "")},
			reply: "Three to five business days.", draft: "", ends: "How long does it take?"},
		// Two messages in a row are one turn; the latest draft is the turn's.
		{customer: []map[string]any{msg("m3", "And the second month?", "Next month is fine."), msg("m4", "Will it happen again?", "It will not happen again.")},
			reply: "No, the duplicate came from a retry we fixed.", draft: "It will not happen again.", ends: "And the second month?\n\nWill it happen again?"},
		{customer: []map[string]any{msg("m5", "Thanks!", "You're welcome, Dana.")},
			reply: "You're welcome, Dana.", draft: "You're welcome, Dana.", ends: "Thanks!"},
	}
	d.act(t, "accept", nil)
	for _, tu := range turns {
		for _, m := range tu.customer {
			expect(t, "the customer writes", d.post(t, m), http.StatusCreated)
		}
		d.act(t, "reply", url.Values{"text": {tu.reply}})
	}

	export := func(query string) []string {
		t.Helper()
		resp, err := sup.Get(d.URL + "/evals/export.jsonl?" + query)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			t.Fatalf("export %s: %d %s", query, resp.StatusCode, body)
		}
		var lines []string
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		return lines
	}

	var recs []evals.Record
	for _, line := range export("kind=reply") {
		var r evals.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, r)
	}
	if len(recs) != len(turns) {
		t.Fatalf("%d reply records, want one per turn (%d)", len(recs), len(turns))
	}
	for i, r := range recs {
		if *r.Final != turns[i].reply || *r.Draft != turns[i].draft {
			t.Errorf("turn %d: record draft %q final %q, want draft %q final %q", i+1, *r.Draft, *r.Final, turns[i].draft, turns[i].reply)
		}
	}
	if recs[0].InReplyTo != nil || len(recs[0].Thread) != 0 {
		t.Errorf("the first answer answers the package, yet names message %v and a thread of %d", recs[0].InReplyTo, len(recs[0].Thread))
	}
	if last := recs[3].Thread; recs[3].InReplyTo == nil || len(last) == 0 || last[len(last)-1].Seq != *recs[3].InReplyTo ||
		last[len(last)-1].Text != "Will it happen again?" {
		t.Errorf("turn 4 answers %v after the thread %+v, want it to end on the customer's last message", recs[3].InReplyTo, last)
	}

	for _, f := range evals.Formats()[1:] {
		for _, redact := range []bool{false, true} {
			lines := export(fmt.Sprintf("format=%s&redact=%v", f, redact))
			var prompts []string
			for _, line := range lines {
				if err := evalstest.Check(string(f), []byte(line)); err != nil {
					t.Errorf("%s (redact %v): %v\n%s", f, redact, err, line)
				}
				if redact && strings.Contains(line, "Whitfield") {
					t.Errorf("%s redacted: the customer's name in the thread reaches the line\n%s", f, line)
				}
				prompts = append(prompts, lastUserTurn(t, string(f), line))
			}
			// Which turns each format has: SFT every reply; the preference formats those with a
			// draft the agent changed; KTO every final plus each changed draft.
			want := map[evals.Format][]int{
				evals.FormatOpenAISFT: {0, 1, 2, 3, 4}, evals.FormatOpenAIDPO: {0, 1, 3}, evals.FormatTRLPreference: {0, 1, 3},
				evals.FormatKTO: {0, 0, 1, 1, 2, 3, 3, 4},
			}[f]
			if len(prompts) != len(want) {
				t.Fatalf("%s (redact %v): %d lines, want %d", f, redact, len(prompts), len(want))
			}
			for i, ti := range want {
				if ends := turns[ti].ends; !redact && prompts[i] != ends {
					t.Errorf("%s line %d ends on %q, want turn %d's %q", f, i+1, prompts[i], ti+1, ends)
				}
			}
			// The package's own draft belongs to the first answer's pair only.
			for i, line := range lines {
				if strings.Contains(line, "reversing the duplicate now") && want[i] != 0 {
					t.Errorf("%s line %d (turn %d) carries the package's draft\n%s", f, i+1, want[i]+1, line)
				}
			}
		}
	}

	// A queue that withholds the transcript from the exporter's role withholds the thread too: the
	// customer's words after the handoff are the conversation as much as those before it.
	if _, err := d.DB.Exec(t.Context(), `UPDATE queues SET pii_min_role = 'admin', withhold_transcript = true WHERE name = 'billing_t2'`); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"records", "openai-sft"} {
		lines := export("format=" + f)
		if len(lines) == 0 {
			t.Fatalf("%s withheld: no lines", f)
		}
		for _, line := range lines {
			if strings.Contains(line, "How long does it take?") || strings.Contains(line, "charged twice for my subscription") {
				t.Errorf("%s withheld: the conversation reaches the line\n%s", f, line)
			}
			if f != "records" {
				if err := evalstest.Check(f, []byte(line)); err != nil {
					t.Errorf("%s withheld: %v\n%s", f, err, line)
				}
			}
		}
	}
}

// lastUserTurn is the content of the last message of a line's prompt, which the rules hold to be
// the customer's.
func lastUserTurn(t *testing.T, format, line string) string {
	t.Helper()
	var l struct {
		Messages []msg `json:"messages"`
		Input    struct {
			Messages []msg `json:"messages"`
		} `json:"input"`
		Prompt []msg `json:"prompt"`
	}
	if err := json.Unmarshal([]byte(line), &l); err != nil {
		t.Fatal(err)
	}
	prompt := map[string][]msg{"openai-sft": l.Messages, "openai-dpo": l.Input.Messages, "trl-preference": l.Prompt, "kto": l.Prompt}[format]
	if format == "openai-sft" && len(prompt) > 0 {
		prompt = prompt[:len(prompt)-1]
	}
	if len(prompt) == 0 {
		return ""
	}
	return prompt[len(prompt)-1].Content
}
