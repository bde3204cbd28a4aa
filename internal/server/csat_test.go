package server_test

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// The customer's verdict is taken once per leg, after the package closed, and only on the legs it
// had; every refusal names what was wrong.
func TestCSATOncePerLegAfterTheClose(t *testing.T) {
	t.Parallel()
	d := newConversation(t)
	path := "/api/v1/handoffs/" + d.id + "/csat"
	human := map[string]any{"score": 4, "comment": "Quick, but I had to repeat myself.", "leg": "human"}

	if ans := d.api(t, http.MethodPost, path, d.key, human); ans.Status != http.StatusConflict || ans.Body["reason"] != "handoff_open" ||
		ans.Body["status"] != "queued" {
		t.Errorf("a verdict on an open package: %d %s", ans.Status, ans.Raw)
	}
	bad := d.api(t, http.MethodPost, path, d.key, map[string]any{"score": 0, "leg": "agent", "comment": strings.Repeat("x", 2001), "stars": 5})
	var fields []string
	for _, f := range bad.Body["fields"].([]any) {
		fields = append(fields, f.(map[string]any)["field"].(string))
	}
	if bad.Status != http.StatusUnprocessableEntity || !strings.Contains(bad.Raw, "the survey is invalid") {
		t.Errorf("an invalid survey: %d %s", bad.Status, bad.Raw)
	}
	for _, want := range []string{"score", "leg", "comment", "stars"} {
		if !slices.Contains(fields, want) {
			t.Errorf("the 422 names %v, not %s", fields, want)
		}
	}

	d.act(t, "accept", nil)
	d.act(t, "return", url.Values{"reason": {"resolved_by_policy"}})
	if ans := d.api(t, http.MethodPost, path, d.botKey(t, "other-bot", "sales"), human); ans.Status != http.StatusNotFound {
		t.Errorf("another key's package: %d %s", ans.Status, ans.Raw)
	}
	got := d.api(t, http.MethodPost, path, d.key, human)
	expect(t, "the human leg", got, http.StatusCreated)
	if got.Body["handoff_id"] != d.id || got.Body["leg"] != "human" || got.Body["score"] != 4.0 || got.Body["comment"] != human["comment"] {
		t.Errorf("the verdict reads %s", got.Raw)
	}
	if again := d.api(t, http.MethodPost, path, d.key, human); again.Status != http.StatusConflict || again.Body["reason"] != "csat_given" ||
		again.Body["given_at"] == nil {
		t.Errorf("the human leg again: %d %s", again.Status, again.Raw)
	}
	expect(t, "the bot's leg", d.api(t, http.MethodPost, path, d.key, map[string]any{"score": 2, "leg": "bot"}), http.StatusCreated)
	var agent *int64
	var queue string
	if err := d.DB.QueryRow(t.Context(), `SELECT c.agent_id, q.name FROM csat c JOIN queues q ON q.id = c.queue_id JOIN handoffs h ON h.id = c.handoff_id
		WHERE h.handoff_id = $1 AND c.leg = 'human'`, d.id).Scan(&agent, &queue); err != nil || agent == nil || queue != "billing_t2" {
		t.Errorf("the human leg rates agent %v in %q (%v)", agent, queue, err)
	}

	// A package canceled before anyone took it has no human leg; its bot's leg may be rated.
	pkg := harbor(t, func(p map[string]any) {
		p["contact"].(map[string]any)["id"] = "cust_left"
		p["transfer_mode"] = "cold"
	})
	expect(t, "submit", d.submit(t, d.key, pkg), http.StatusCreated)
	left := "/api/v1/handoffs/" + pkg["handoff_id"].(string)
	expect(t, "cancel", d.api(t, http.MethodPost, left+"/cancel", d.key, nil), http.StatusOK)
	if ans := d.api(t, http.MethodPost, left+"/csat", d.key, human); ans.Status != http.StatusConflict || ans.Body["reason"] != "no_human_leg" {
		t.Errorf("the human leg of a package nobody took: %d %s", ans.Status, ans.Raw)
	}
	expect(t, "the bot's leg of a canceled package", d.api(t, http.MethodPost, left+"/csat", d.key, map[string]any{"score": 1, "leg": "bot"}), http.StatusCreated)
}
