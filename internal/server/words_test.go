package server_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
)

// shownText is what a person reads of a page: its text, without its tags, their attributes (a
// form's values are codes, as they should be) or its scripts.
func shownText(page string) string {
	page = regexp.MustCompile(`(?s)<script.*?</script>`).ReplaceAllString(page, " ")
	return html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(page, " "))
}

// deskCodes are the codes the desk stores and sends with underscores in them: statuses, triggers,
// reasons, resolutions, reply tags and what happened. A person reads each as words.
func deskCodes() []string {
	var codes []string
	add := func(c string) {
		if strings.Contains(c, "_") {
			codes = append(codes, c)
		}
	}
	for _, s := range handoff.Statuses() {
		add(string(s))
	}
	for _, tr := range handoff.Triggers() {
		add(string(tr))
	}
	for _, c := range append(handoff.ReturnReasons(), handoff.ResolutionCodes()...) {
		add(c)
	}
	for _, tag := range evals.Tags() {
		add(tag)
	}
	for _, k := range events.Kinds() {
		add(string(k))
	}
	return codes
}

// Status, reason, resolution and tag codes show as words on every page of an agent's and a
// supervisor's day, never as snake_case: the package in each of its states, the sidebar, the
// replies with their tags, the timeline, the contact's earlier handoffs, My work, approvals and
// the package's audit trail, /packages with its filters' selects, the dashboard and evals.
func TestCodesShowAsWords(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor, "billing_t2")
	agent, supervisor := app.client(t), app.client(t)
	app.login(t, agent, "dana@example.com")
	app.login(t, supervisor, "sam@example.com")
	submit := func(contact, refund string, edit func(p map[string]any)) string {
		t.Helper()
		pkg := harbor(t, func(p map[string]any) {
			p["transfer_mode"], p["trigger"] = "cold", "capability_mismatch"
			p["contact"].(map[string]any)["id"] = contact
			if refund != "" {
				p["refund"] = map[string]any{"amount": refund, "currency": "USD"}
			}
			if edit != nil {
				edit(p)
			}
		})
		expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
		return pkg["handoff_id"].(string)
	}
	do := func(path string, form url.Values) {
		t.Helper()
		if status, _, body := postForm(t, agent, app.URL+path, form); status != http.StatusSeeOther {
			t.Fatalf("POST %s: %d\n%.600s", path, status, body)
		}
	}
	returned := submit("cust_words", "", nil)
	do("/handoffs/"+returned+"/return", url.Values{"reason": {"wrong_escalation"}, "note": {"not ours"}})
	resolved := submit("cust_words_2", "", func(p map[string]any) { p["source_agent"] = "voice-support" })
	do("/handoffs/"+resolved+"/accept", nil)
	do("/handoffs/"+resolved+"/reply", url.Values{"text": {"Hi, it is reversed."}, "tags": {"factual_error", "missing_info"}})
	do("/handoffs/"+resolved+"/resolve", url.Values{"code": {"no_fault_found"}})
	// The same customer again: the package lists the two before it, returned and resolved.
	repeat := submit("cust_words", "", func(p map[string]any) { p["source_agent"] = "chat-support" })
	do("/handoffs/"+repeat+"/accept", nil)
	do("/handoffs/"+repeat+"/reply", url.Values{"text": {"Hello again."}, "tags": {"too_long"}})
	awaiting := submit("cust_words_3", "150.00", nil)
	do("/handoffs/"+awaiting+"/accept", nil)
	do("/handoffs/"+awaiting+"/approval", url.Values{"note": {"double charge"}})

	codes := deskCodes()
	for _, p := range []struct {
		who  *http.Client
		path string
	}{
		{agent, "/"},
		{agent, "/queues/billing_t2"},
		{agent, "/mine"},
		{agent, "/handoffs/" + returned},
		{agent, "/handoffs/" + resolved},
		{agent, "/handoffs/" + repeat},
		{agent, "/sidebar/" + repeat},
		{agent, "/handoffs/" + awaiting},
		{agent, "/sidebar/" + awaiting},
		{supervisor, "/approvals"},
		{supervisor, "/handoffs/" + awaiting},
		{supervisor, "/audit?package=" + resolved},
		// The search's list and its selects, and the dashboard's figures and breakdowns.
		{supervisor, "/packages"},
		{supervisor, "/packages?outcome=wrong_escalation"},
		{agent, "/packages?q=duplicate"},
		{supervisor, "/dashboard"},
		{supervisor, "/dashboard?window=7d"},
		{supervisor, "/evals"},
	} {
		text := shownText(mustGet(t, p.who, app.URL+p.path))
		for _, code := range codes {
			if i := regexp.MustCompile(`\b` + code + `\b`).FindStringIndex(text); i != nil {
				t.Errorf("%s shows the code %s: …%s…", p.path, code, strings.Join(strings.Fields(text[max(0, i[0]-80):min(len(text), i[1]+80)]), " "))
			}
		}
	}
}
