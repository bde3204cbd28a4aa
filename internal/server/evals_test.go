package server_test

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// fetchPage fetches a page with a client and returns its status and body.
func fetchPage(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// elementText is the text of the first element of html opened with the attribute attr, its
// elements but links set apart by a space, and its spaces folded; "" when it holds none (and when there is no such element,
// "missing").
func elementText(html, attr string) string {
	start := strings.Index(html, attr)
	if start < 0 {
		return "missing"
	}
	open := strings.LastIndex(html[:start], "<")
	name := regexp.MustCompile(`^<(\w+)`).FindStringSubmatch(html[open:])[1]
	rest := html[strings.Index(html[start:], ">")+start+1:]
	// The element ends at its closing tag, nested elements of the same name counted.
	depth, end := 1, len(rest)
	for _, m := range regexp.MustCompile(`<(/?)`+name+`\b[^>]*>`).FindAllStringSubmatchIndex(rest, -1) {
		if rest[m[2]:m[3]] == "/" {
			depth--
		} else if !strings.HasSuffix(rest[m[0]:m[1]], "/>") {
			depth++
		}
		if depth == 0 {
			end = m[0]
			break
		}
	}
	// A link sits inside its text; other elements stand apart.
	text := regexp.MustCompile(`</?a\b[^>]*>`).ReplaceAllString(rest[:end], "")
	text = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(text, " ")
	return strings.Join(strings.Fields(strings.NewReplacer("&amp;", "&", "&#39;", "'", "&#34;", `"`).Replace(text)), " ")
}

// agentSection is one source agent's part of the evals page.
func agentSection(t *testing.T, page, agent string) string {
	t.Helper()
	start := strings.Index(page, `data-agent="`+agent+`"`)
	if start < 0 {
		t.Fatalf("the evals page has no section for %s", agent)
	}
	rest := page[start:]
	if end := strings.Index(rest[1:], `data-testid="agent-evals"`); end >= 0 {
		rest = rest[:end+1]
	}
	return rest
}

// The evals page: per source agent over the window, the share of drafts sent as is, the median
// edit distance, the tags, the return rate by reason, a chart and the worst edits, each opening
// its side-by-side diff; records outside the window do not count, and agents may not see it.
func TestEvalsPage(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor, "billing_t2")
	dana, sam := app.client(t), app.client(t)
	app.login(t, dana, "dana@example.com")
	app.login(t, sam, "sam@example.com")

	work := func(n, agent string, act func(base string)) {
		pkg := harbor(t, func(p map[string]any) {
			p["handoff_id"] = "ho_evals_" + n
			p["source_agent"] = agent
			p["contact"].(map[string]any)["id"] = "cust_evals_" + n
		})
		expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
		base := app.URL + "/handoffs/ho_evals_" + n
		if status, _, body := postForm(t, dana, base+"/accept", nil); status != http.StatusSeeOther {
			t.Fatalf("accept %s: %d\n%.300s", n, status, body)
		}
		act(base)
	}
	reply := func(base, text string, tags ...string) {
		if status, _, body := postForm(t, dana, base+"/reply", url.Values{"text": {text}, "tags": tags}); status != http.StatusSeeOther {
			t.Fatalf("reply: %d\n%.300s", status, body)
		}
		// Resolved, so that Dana has room for the next package.
		if status, _, body := postForm(t, dana, base+"/resolve", url.Values{"code": {"refunded"}}); status != http.StatusSeeOther {
			t.Fatalf("resolve: %d\n%.300s", status, body)
		}
	}
	draft := harbor(t, nil)["draft_reply"].(string)
	edited := "Hi Dana, the duplicate charge of $49.99 is reversed; expect it within a week."
	work("1", "tier1-support", func(base string) { reply(base, draft) })
	work("2", "tier1-support", func(base string) { reply(base, edited, "tone", "too_long") })
	work("3", "tier1-support", func(base string) { reply(base, draft+" Anything else?", "tone") })
	work("4", "tier1-support", func(base string) {
		if status, _, body := postForm(t, dana, base+"/return", url.Values{"reason": {"wrong_escalation"}}); status != http.StatusSeeOther {
			t.Fatalf("return: %d\n%.300s", status, body)
		}
	})
	work("5", "returns-bot", func(base string) { reply(base, draft) })
	// A record three days old: outside 24 h, inside 7 d. The table is append-only, so the old
	// record is a copy of a new one rather than a new one made old.
	if _, err := app.DB.Exec(t.Context(), `
		INSERT INTO evals (kind, handoff_id, queue_id, editor_id, at, source_agent, source_run_id, trigger, locale,
			draft, final, word_diff, unified_diff, edit_distance_chars, edit_distance_words, accepted_as_is, tags, editing_ms)
		SELECT kind, handoff_id, queue_id, editor_id, now() - interval '3 days', source_agent, source_run_id, trigger, locale,
			draft, final, word_diff, unified_diff, 500, 90, false, '{policy}', editing_ms
		FROM evals WHERE source_agent = 'returns-bot' AND kind = 'reply'`); err != nil {
		t.Fatal(err)
	}

	if status, _ := fetchPage(t, dana, app.URL+"/evals"); status != http.StatusForbidden {
		t.Errorf("an agent opens /evals: %d, want 403", status)
	}
	if status, body := fetchPage(t, sam, app.URL+"/evals?window=1y"); status != http.StatusBadRequest || !strings.Contains(body, "window") {
		t.Errorf("window=1y: %d, want 400 naming the window", status)
	}

	status, page := fetchPage(t, sam, app.URL+"/evals?window=24h")
	if status != http.StatusOK {
		t.Fatalf("/evals: %d\n%.500s", status, page)
	}
	tier1 := agentSection(t, page, "tier1-support")
	for testid, want := range map[string]string{
		`data-testid="as-is"`:    "33.3% (1 of 3)",
		`data-testid="packages"`: "4",
		`data-value="tone"`:      "tone 2 · 100%",
		// The median of the three drafts' distances: 0 (as is), 15 (" Anything else?") and the edit's.
		`data-testid="median"`:          "15 chars, 2 words (of 3)",
		`data-value="wrong_escalation"`: "wrong escalation 1 · 25%",
		`data-testid="from-scratch"`:    "0",
		`data-testid="as-is-line"`:      "",
		`data-testid="return-dot"`:      "",
		`data-testid="bar"`:             "",
		`data-value="too_long"`:         "too long 1 · 50%",
	} {
		if got := elementText(tier1, testid); got != want {
			t.Errorf("tier1-support's %s reads %q, want %q", testid, got, want)
		}
	}
	worst := regexp.MustCompile(`data-testid="worst-edit"><a href="(/evals/replies/\d+)"[^>]*>(ho_evals_\d)<`).FindAllStringSubmatch(tier1, -1)
	if len(worst) != 2 || worst[0][2] != "ho_evals_2" || worst[1][2] != "ho_evals_3" {
		t.Fatalf("tier1-support's worst edits %v, want the rewrite then the added question (the draft sent as is is no edit)", worst)
	}
	returns := agentSection(t, page, "returns-bot")
	if strings.Contains(returns, "policy") || elementText(returns, `data-testid="as-is"`) != "100.0% (1 of 1)" {
		t.Errorf("the 24 h window counts a record three days old")
	}
	// The window the page opens on is the dashboard's, 7 days.
	_, week := fetchPage(t, sam, app.URL+"/evals")
	if returns := agentSection(t, week, "returns-bot"); !strings.Contains(returns, `data-value="policy"`) || elementText(returns, `data-testid="as-is"`) != "50.0% (1 of 2)" {
		t.Errorf("the 7 d window leaves out a record three days old")
	}

	status, diff := fetchPage(t, sam, app.URL+worst[0][1])
	if status != http.StatusOK {
		t.Fatalf("the worst edit's diff: %d\n%.300s", status, diff)
	}
	for _, want := range []string{`<del class="bg-red-100 text-red-900"><span class="sr-only">deleted: </span>`, `<ins class="bg-emerald-100 text-emerald-900 no-underline"><span class="sr-only">inserted: </span>`, "week.</ins>", "reversing"} {
		if !strings.Contains(diff, want) {
			t.Errorf("the side-by-side diff lacks %s", want)
		}
	}
	// The draft greets the customer by name, shown to the supervisor unmasked: a read of their PII.
	var reads int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM pii_views v JOIN handoffs h ON h.id = ANY (v.handoff_ids)
		WHERE h.handoff_id = $1 AND v.fields = '{reply}'`, worst[0][2]).Scan(&reads); err != nil || reads != 1 {
		t.Errorf("the diff's read of the customer's name: %d records (%v), want 1", reads, err)
	}
	if status, body := fetchPage(t, sam, app.URL+"/evals/replies/999999"); status != http.StatusNotFound || !strings.Contains(body, "999999") {
		t.Errorf("a missing record: %d, want 404 naming it", status)
	}
}
