package server_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/queue"
)

// An agent cannot push a package from one top-level queue into another, one they do not work and
// whose admin never linked it, unless that queue accepts top-level transfers: the answer is a 403
// that says so, and the package page does not offer it. Transfers between siblings still work.
func TestTransferToAnotherTopLevelQueueNeedsItsConsent(t *testing.T) {
	t.Parallel()
	app := setup(t)
	ctx := context.Background()
	for _, n := range []queue.New{
		{Name: "billing_t2"}, {Name: "tech_t2"},
		{Name: "billing_t2-refunds", Parent: "billing_t2"}, {Name: "billing_t2-disputes", Parent: "billing_t2"},
	} {
		if _, err := app.Queues.Create(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	key := app.botKey(t, "tier1", "billing_t2", "billing_t2-refunds")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2", "billing_t2-refunds")
	c := app.client(t)
	app.login(t, c, "dana@example.com")

	topLevel := harbor(t, nil)
	expect(t, "submit to billing_t2", app.submit(t, key, topLevel), http.StatusCreated)
	sibling := harbor(t, func(p map[string]any) {
		p["target_profile"] = "billing_t2-refunds"
		p["contact"].(map[string]any)["id"] = "cust_sibling"
	})
	expect(t, "submit to billing_t2-refunds", app.submit(t, key, sibling), http.StatusCreated)

	transfer := func(pkg map[string]any, to string) (int, string, string) {
		t.Helper()
		resp, err := c.PostForm(app.URL+"/handoffs/"+pkg["handoff_id"].(string)+"/transfer", url.Values{"queue": {to}, "note": {"n"}})
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Location"), string(body)
	}
	option := regexp.MustCompile(`<option value="([^"]+)"`)
	offered := func(pkg map[string]any) []string {
		t.Helper()
		resp, err := c.Get(app.URL + "/handoffs/" + pkg["handoff_id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		page := string(raw)
		start := strings.Index(page, `data-testid="transfer-form"`)
		if resp.StatusCode != http.StatusOK || start < 0 {
			t.Fatalf("the package page answers %d without a transfer form:\n%s", resp.StatusCode, page)
		}
		form := page[start : start+strings.Index(page[start:], "</form>")]
		var names []string
		for _, m := range option.FindAllStringSubmatch(form, -1) {
			names = append(names, m[1])
		}
		return names
	}

	if got, want := offered(topLevel), []string{"billing_t2-disputes", "billing_t2-refunds"}; !slices.Equal(got, want) {
		t.Errorf("a package in billing_t2 may be transferred to %v, want %v", got, want)
	}
	status, _, body := transfer(topLevel, "tech_t2")
	if why := "tech_t2 does not accept transfers from other top-level queues"; status != http.StatusForbidden || !strings.Contains(body, why) {
		t.Fatalf("transfer from billing_t2 to tech_t2: %d, want 403 saying %q\n%s", status, why, body)
	}
	if rec := app.api(t, http.MethodGet, "/api/v1/handoffs/"+topLevel["handoff_id"].(string), key, nil); rec.Body["queue"] != "billing_t2" {
		t.Errorf("after the refused transfer the bot reads %s, want the package still in billing_t2", rec.Raw)
	}

	if status, location, body := transfer(sibling, "billing_t2-disputes"); status != http.StatusSeeOther || location != "/queues/billing_t2-refunds" {
		t.Errorf("transfer between siblings: %d to %q, want 303 to /queues/billing_t2-refunds\n%s", status, location, body)
	}

	if _, err := app.DB.Exec(ctx, `UPDATE queues SET accepts_top_level_transfers = true WHERE name = 'tech_t2'`); err != nil {
		t.Fatal(err)
	}
	if got := offered(topLevel); !slices.Contains(got, "tech_t2") {
		t.Errorf("once tech_t2 accepts top-level transfers, billing_t2 offers %v", got)
	}
	if status, _, body := transfer(topLevel, "tech_t2"); status != http.StatusSeeOther {
		t.Errorf("transfer to tech_t2 once it accepts top-level transfers: %d, want 303\n%s", status, body)
	}
}
