package server_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// copies stores n more packages like the one with id prefix, as intake would (the trigger indexes
// each), with the given problem statement, newer than every package so far.
func copies(t *testing.T, d searchDesk, of, prefix, problem string, n int) {
	t.Helper()
	if _, err := d.app.DB.Exec(t.Context(), `
		INSERT INTO handoffs (handoff_id, api_key_id, queue_id, status, priority_rank, contact_id, source_agent, package, body_sha256, expires_at)
		SELECT $2 || g, h.api_key_id, h.queue_id, 'queued', 1, 'cust_' || $2 || g, h.source_agent,
			jsonb_set(h.package::jsonb, '{problem_statement}', to_jsonb($3::text))::json, h.body_sha256, h.expires_at
		FROM handoffs h, generate_series(1, $4::int) g WHERE h.handoff_id = $1`, of, prefix, problem, n); err != nil {
		t.Fatal(err)
	}
}

// TestSearchNextLinkIsNoOracle: a word that matches only packages whose contact the agent sees
// masked answers as a word that matches nothing: no rows, no next page. With a page's worth of
// packages the agent may see matching too, the hidden one adds no next page either.
func TestSearchNextLinkIsNoOracle(t *testing.T) {
	t.Parallel()
	d := newSearchDesk(t)
	// 60 packages that name the contact, Dana Whitfield, whom the agent sees as "D. W.".
	copies(t, d, d.named, "ho_hidden_", "Dana Whitfield called again about the card.", 60)
	answer := func(q string) (int, string, string) {
		status, ids, more, body := searchIDs(t, d.app, d.agent, url.Values{"q": {q}})
		if status != http.StatusOK {
			t.Fatalf("q=%s: %d\n%.500s", q, status, body)
		}
		return len(ids), more, body
	}
	for _, q := range []string{"Whitfield", "Zebulon"} {
		if n, more, body := answer(q); n != 0 || more != "" || strings.Contains(body, `data-testid="search-count"`) {
			t.Errorf("q=%s: %d rows and next link %q, or a count line, want none, none and none", q, n, more)
		}
	}
	// The agent writes the word into the notes of 50 packages they may see: page one is those 50,
	// and the hidden packages behind them offer no page two.
	copies(t, d, d.harbor, "ho_seen_", "A duplicate charge on the card.", 50)
	if _, err := d.app.DB.Exec(t.Context(), `
		INSERT INTO handoff_notes (handoff_id, author_id, body, author_saw_contact)
		SELECT h.id, u.id, 'asked about Whitfield and Zebulon', false FROM handoffs h, users u
		WHERE h.handoff_id LIKE 'ho_seen_%' AND u.email = 'agent@example.com'`); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"Whitfield", "Zebulon"} {
		if n, more, _ := answer(q); n != 50 || more != "" {
			t.Errorf("q=%s over 50 seen notes: %d rows and next link %q, want 50 and none", q, n, more)
		}
	}
	// A supervisor, who sees the contact, pages through all of them: the cursor is the last row shown.
	var all []string
	next := "/packages?" + url.Values{"q": {"Whitfield"}}.Encode()
	for next != "" && len(all) < 1000 {
		_, ids, more, _ := searchIDs(t, d.app, d.sup, mustQuery(t, next))
		all, next = append(all, ids...), more
	}
	// 50 seen, 60 hidden from the agent, and the desk's three packages, all about Dana Whitfield.
	sorted := slices.Clone(all)
	slices.Sort(sorted)
	if len(all) != 50+60+3 || len(slices.Compact(sorted)) != len(all) {
		t.Errorf("the supervisor pages through %d (%d different), want 113", len(all), len(slices.Compact(sorted)))
	}
}

// TestNotesConfirmNoGuess: a note typed by an agent who cannot see the contact reads as written to
// every reader, right guesses and wrong ones alike: to its writer, to another agent below the PII
// role, on the page and in search. A supervisor's note naming the contact stays masked for agents,
// by whether they saw the contact when they wrote it, even once they no longer may.
func TestNotesConfirmNoGuess(t *testing.T) {
	t.Parallel()
	d := newSearchDesk(t)
	d.app.user(t, "agent2@example.com", auth.RoleAgent, "s_billing")
	agent2 := d.app.client(t)
	d.app.login(t, agent2, "agent2@example.com")
	// Right: the name Whitfield, the account acct_9912. Wrong: Bartholomew, acct_1234, and the email
	// (the package's is dana.w@example.org).
	guess := "guess1: Whitfield; guess2: Bartholomew; acct_9912 or acct_1234; mail dana.whitfield@example.com or dana.w@example.org"
	if status, _, body := postForm(t, d.agent, d.app.URL+"/handoffs/"+d.named+"/notes", url.Values{"text": {guess}}); status != http.StatusSeeOther {
		t.Fatalf("note: %d\n%s", status, body)
	}
	notes := func(c *http.Client) []string {
		_, body := get(t, c, d.app.URL+"/handoffs/"+d.named)
		var out []string
		for _, m := range regexp.MustCompile(`data-testid="timeline-note">([^<]*)<`).FindAllStringSubmatch(body, -1) {
			out = append(out, html.UnescapeString(m[1]))
		}
		return out
	}
	for _, c := range []struct {
		who    string
		client *http.Client
	}{{"the writer", d.agent}, {"another agent", agent2}, {"the supervisor", d.sup}} {
		if got := notes(c.client); !slices.Contains(got, guess) {
			t.Errorf("%s reads %q; want the agent's note as written: a right guess reads as a wrong one", c.who, got)
		}
	}
	// Demoted, the supervisor's note stays masked for agents: it was written by one who saw.
	if _, err := d.app.DB.Exec(t.Context(), `UPDATE users SET role = 'agent' WHERE email = 'sup@example.com'`); err != nil {
		t.Fatal(err)
	}
	if got := notes(agent2); !slices.Contains(got, "W. prefers a callback on Tuesdays") {
		t.Errorf("another agent reads %q; want the supervisor's note masked", got)
	}
	for _, c := range []struct {
		who    string
		client *http.Client
	}{{"the writer", d.agent}, {"another agent", agent2}} {
		for _, q := range []string{"Whitfield", "Bartholomew", "acct_9912", "acct_1234"} {
			if _, ids, _, _ := searchIDs(t, d.app, c.client, url.Values{"q": {q}}); !slices.Equal(ids, []string{d.named}) {
				t.Errorf("%s: q=%s finds %v, want the package of the note, whether the guess is right or wrong", c.who, q, ids)
			}
		}
	}
}

// TestSentReplyConfirmsNoGuess: a reply typed by an agent who cannot see the contact reads back as
// they submitted it, right guesses and wrong ones alike, to them and to another agent below the
// PII role; a supervisor reads what the customer got, the token filled.
func TestSentReplyConfirmsNoGuess(t *testing.T) {
	t.Parallel()
	app, _, id, _ := harborForAgent(t, "bea@example.com", "supervisor")
	app.user(t, "cy@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sup@example.com", auth.RoleSupervisor)
	bea, cy, sup := app.client(t), app.client(t), app.client(t)
	app.login(t, bea, "bea@example.com")
	app.login(t, cy, "cy@example.com")
	app.login(t, sup, "sup@example.com")
	base := app.URL + "/handoffs/" + id
	if status, _, body := postForm(t, bea, base+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d\n%s", status, body)
	}
	right := "Is this Dana Whitfield? Account acct_9912, mail dana.whitfield@example.com"
	wrong := "Is this Bart Holm? Account acct_1234, mail bart.holm@example.com"
	token := "Thanks, ⟦first name⟧."
	for _, text := range []string{right, wrong, token} {
		if status, _, body := postForm(t, bea, base+"/reply", url.Values{"text": {text}}); status != http.StatusSeeOther {
			t.Fatalf("reply %q: %d\n%s", text, status, body)
		}
	}
	replies := func(c *http.Client) []string {
		_, body := get(t, c, base)
		var out []string
		for _, m := range regexp.MustCompile(`data-testid="reply-final">([^<]*)<`).FindAllStringSubmatch(body, -1) {
			out = append(out, html.UnescapeString(m[1]))
		}
		return out
	}
	for _, c := range []struct {
		who    string
		client *http.Client
		want   []string
	}{
		{"the writer", bea, []string{right, wrong, token}},
		{"another agent", cy, []string{right, wrong, token}},
		{"the supervisor", sup, []string{right, wrong, "Thanks, Dana."}},
	} {
		if got := replies(c.client); !slices.Equal(got, c.want) {
			t.Errorf("%s reads the replies %q, want %q", c.who, got, c.want)
		}
	}
}

// TestSearchPersonFiltersAreNoDirectory: an email no desk user has selects nothing, as one whose
// user did nothing does: the filters do not say who works at the desk.
func TestSearchPersonFiltersAreNoDirectory(t *testing.T) {
	t.Parallel()
	d := newSearchDesk(t)
	d.app.user(t, "idle@example.com", auth.RoleAgent, "s_billing")
	for _, param := range []string{"agent", "record_by"} {
		var answers []string
		for _, email := range []string{"idle@example.com", "nobody@example.com"} {
			status, ids, more, body := searchIDs(t, d.app, d.agent, url.Values{param: {email}})
			packages, records := searchCount(t, body)
			answers = append(answers, strings.Join([]string{http.StatusText(status), strings.Join(ids, ","), more, packages, records}, "|"))
		}
		if answers[0] != answers[1] || !strings.HasPrefix(answers[0], "OK|") {
			t.Errorf("%s: a desk user who did nothing answers %q, an unknown email %q: want the same 200", param, answers[0], answers[1])
		}
	}
}

// TestForeignQueueAnswersAsAMissingOne: a queue the agent does not work answers exactly as one that
// does not exist, on its page, its next-package button and its socket.
func TestForeignQueueAnswersAsAMissingOne(t *testing.T) {
	t.Parallel()
	d := newSearchDesk(t)
	for _, ask := range []func(name string) (int, string){
		func(name string) (int, string) {
			resp, body := get(t, d.agent, d.app.URL+"/queues/"+name)
			return resp.StatusCode, body
		},
		func(name string) (int, string) {
			status, _, body := postForm(t, d.agent, d.app.URL+"/queues/"+name+"/next", url.Values{})
			return status, body
		},
	} {
		fs, foreign := ask("s_sales")
		ms, missing := ask("s_nowhere")
		if fs != http.StatusNotFound || ms != fs || !strings.Contains(foreign, "does not exist, or you do not work it") ||
			strings.ReplaceAll(foreign, "s_sales", "X") != strings.ReplaceAll(missing, "s_nowhere", "X") {
			t.Errorf("foreign %d, missing %d: want the same 404 and the same page\n%.300s", fs, ms, foreign)
		}
	}
}
