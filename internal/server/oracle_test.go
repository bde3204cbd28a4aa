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
		if n, more, _ := answer(q); n != 0 || more != "" {
			t.Errorf("q=%s: %d rows and next link %q, want none and none", q, n, more)
		}
	}
	// The agent writes the word into the notes of 50 packages they may see: page one is those 50,
	// and the hidden packages behind them offer no page two.
	copies(t, d, d.harbor, "ho_seen_", "A duplicate charge on the card.", 50)
	if _, err := d.app.DB.Exec(t.Context(), `
		INSERT INTO handoff_notes (handoff_id, author_id, body)
		SELECT h.id, u.id, 'asked about Whitfield and Zebulon' FROM handoffs h, users u
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

// TestNotesConfirmNoGuess: a note reads to its writer as they wrote it, on the page and in search,
// so a right guess and a wrong one read alike; to another agent a right email reads as a wrong
// one; a supervisor's note that names the contact is masked for agents.
func TestNotesConfirmNoGuess(t *testing.T) {
	t.Parallel()
	d := newSearchDesk(t)
	d.app.user(t, "agent2@example.com", auth.RoleAgent, "s_billing")
	agent2 := d.app.client(t)
	d.app.login(t, agent2, "agent2@example.com")
	guess := "guess1: Whitfield; guess2: Bartholomew; mail dana.whitfield@example.com or bart@example.com"
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
	if got := notes(d.agent); !slices.Contains(got, guess) || !slices.Contains(got, "W. prefers a callback on Tuesdays") {
		t.Errorf("the writer reads %q; want their note as written and the supervisor's masked", got)
	}
	other := "guess1: W.; guess2: Bartholomew; mail •••@example.com or •••@example.com"
	if got := notes(agent2); !slices.Contains(got, other) {
		t.Errorf("another agent reads %q; want %q: the contact's name masked, the right and the wrong email alike", got, other)
	}
	if got := notes(d.sup); !slices.Contains(got, guess) {
		t.Errorf("the supervisor reads %q; want the note as written", got)
	}
	for _, q := range []string{"Whitfield", "Bartholomew"} {
		if _, ids, _, _ := searchIDs(t, d.app, d.agent, url.Values{"q": {q}}); !slices.Equal(ids, []string{d.named}) {
			t.Errorf("agent q=%s finds %v, want the package whose note they wrote", q, ids)
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
