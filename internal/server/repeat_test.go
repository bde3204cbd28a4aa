package server_test

import (
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

var earlierItem = regexp.MustCompile(`data-testid="earlier-item" data-handoff="([^"]+)"`)

// earlierSection is the package view's list of the contact's earlier handoffs, and the ids in it.
func earlierSection(t *testing.T, page string) (string, []string) {
	t.Helper()
	start := strings.Index(page, `data-testid="earlier"`)
	if start < 0 {
		return "", nil
	}
	section := page[start:]
	section = section[:strings.Index(section, "</section>")]
	var ids []string
	for _, m := range earlierItem.FindAllStringSubmatch(section, -1) {
		ids = append(ids, m[1])
	}
	return section, ids
}

// cardOn is the card of package id on a queue page.
func cardOn(t *testing.T, page, id string) string {
	t.Helper()
	start := strings.Index(page, `<li id="card-`+id+`"`)
	if start < 0 {
		t.Fatalf("no card %s on the queue page", id)
	}
	card := page[start:]
	return card[:strings.Index(card, "</li>")]
}

// An agent opening a repeat contact's package sees the contact's earlier handoffs in the queues
// they work, with how each ended and who handled it, on the package page and in the sidebar; the
// one in a queue they do not work is not there at all. A supervisor sees both. The queue card says
// "repeat" because the contact's package was resolved minutes ago.
func TestPackageViewListsTheContactsEarlierHandoffs(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2", "fraud_t2")
	app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sue@example.com", auth.RoleSupervisor)
	// Bea may not see the contact's details in billing_t2: the earlier list must not show them either.
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET pii_min_role = 'supervisor' WHERE name = 'billing_t2'`); err != nil {
		t.Fatal(err)
	}
	bea, sue := app.client(t), app.client(t)
	app.login(t, bea, "bea@example.com")
	app.login(t, sue, "sue@example.com")
	contact := func(queue, trigger string) func(map[string]any) {
		return func(p map[string]any) {
			p["target_profile"], p["trigger"] = queue, trigger
			p["contact"].(map[string]any)["id"] = "cust_repeat"
		}
	}

	resolved := harbor(t, contact("billing_t2", "tool_failure"))
	resolvedID := resolved["handoff_id"].(string)
	expect(t, "submit the first", app.submit(t, key, resolved), http.StatusCreated)
	if status, _, body := postForm(t, bea, app.URL+"/handoffs/"+resolvedID+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d %s", status, body)
	}
	if status, _, body := postForm(t, bea, app.URL+"/handoffs/"+resolvedID+"/resolve", url.Values{"code": {"refunded"}}); status != http.StatusSeeOther {
		t.Fatalf("resolve: %d %s", status, body)
	}
	fraud := harbor(t, contact("fraud_t2", "low_confidence"))
	fraudID := fraud["handoff_id"].(string)
	expect(t, "submit to fraud", app.submit(t, key, fraud), http.StatusCreated)
	expect(t, "cancel", app.api(t, http.MethodPost, "/api/v1/handoffs/"+fraudID+"/cancel", key, nil), http.StatusOK)
	// From another bot: the intake guard refuses the same bot handing the contact to the same queue
	// again within 30 minutes.
	current := harbor(t, contact("billing_t2", "user_request"))
	current["source_agent"] = "voice-support"
	currentID := current["handoff_id"].(string)
	expect(t, "submit the repeat", app.submit(t, key, current), http.StatusCreated)
	first := harbor(t, func(p map[string]any) { p["contact"].(map[string]any)["id"] = "cust_first" })
	expect(t, "submit a first contact", app.submit(t, key, first), http.StatusCreated)

	for _, path := range []string{"/handoffs/" + currentID, "/sidebar/" + currentID} {
		status, page := fetchPage(t, bea, app.URL+path)
		if status != http.StatusOK {
			t.Fatalf("agent GET %s: %d", path, status)
		}
		section, ids := earlierSection(t, page)
		if !slices.Equal(ids, []string{resolvedID}) {
			t.Errorf("agent GET %s: earlier handoffs %v, want [%s]", path, ids, resolvedID)
		}
		for _, want := range []string{`href="/handoffs/` + resolvedID + `"`, "billing_t2", "tool failure", "resolved: refunded", "by bea"} {
			if !strings.Contains(section, want) {
				t.Errorf("agent GET %s: earlier handoffs lack %q:\n%s", path, want, section)
			}
		}
		for _, leak := range []string{fraudID, "fraud_t2", "dana.whitfield@example.com", "+1-415-555-0134"} {
			if strings.Contains(page, leak) {
				t.Errorf("agent GET %s shows %q", path, leak)
			}
		}
	}

	status, page := fetchPage(t, sue, app.URL+"/handoffs/"+currentID)
	if status != http.StatusOK {
		t.Fatalf("supervisor GET: %d", status)
	}
	section, ids := earlierSection(t, page)
	if !slices.Equal(ids, []string{fraudID, resolvedID}) {
		t.Errorf("supervisor: earlier handoffs %v, want [%s %s]", ids, fraudID, resolvedID)
	}
	if !strings.Contains(section, "canceled") || !strings.Contains(section, "low confidence") {
		t.Errorf("supervisor: the canceled fraud package is not listed as such:\n%s", section)
	}

	status, page = fetchPage(t, bea, app.URL+"/queues/billing_t2")
	if status != http.StatusOK {
		t.Fatalf("queue page: %d", status)
	}
	if card := cardOn(t, page, currentID); !strings.Contains(card, `data-testid="repeat"`) {
		t.Errorf("the repeat contact's card has no repeat badge:\n%s", card)
	}
	if card := cardOn(t, page, first["handoff_id"].(string)); strings.Contains(card, `data-testid="repeat"`) {
		t.Errorf("a first contact's card says repeat:\n%s", card)
	}
}
