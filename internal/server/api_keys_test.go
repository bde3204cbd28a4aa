package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// Bot keys hear nothing of each other's packages: key B, which may use only secret_q, is not
// refused for what key A sent to billing_t2 for the same contact, and an id A took tells B nothing
// of A's package.
func TestGuardsAndIdsStayWithinTheKeysQueues(t *testing.T) {
	t.Parallel()
	app := setup(t)
	keyA := app.botKey(t, "tier1", "billing_t2")
	keyB := app.botKey(t, "secret-bot", "secret_q")
	send := func(contact, queue, source string) map[string]any {
		return harbor(t, func(p map[string]any) {
			p["contact"].(map[string]any)["id"] = contact
			p["target_profile"] = queue
			p["source_agent"] = source
		})
	}
	closeAll := func(contact string, age string) {
		t.Helper()
		if _, err := app.DB.Exec(t.Context(), `
			UPDATE handoffs SET status = 'canceled', closed_at = now(), created_at = now() - $2::interval
			WHERE contact_id = $1`, contact, age); err != nil {
			t.Fatal(err)
		}
	}

	aPkg := send("c_open", "billing_t2", "bot-a")
	aOpen := app.submit(t, keyA, aPkg)
	expect(t, "A's package", aOpen, http.StatusCreated)
	bOpen := app.submit(t, keyB, send("c_open", "secret_q", "bot-b"))
	if bOpen.Status != http.StatusCreated || strings.Contains(bOpen.Raw, aOpen.Body["handoff_id"].(string)) {
		t.Errorf("B's package for a contact A has open elsewhere: %d %s, want 201 saying nothing of A's", bOpen.Status, bOpen.Raw)
	}
	if bOpen.Status == http.StatusCreated {
		again := app.submit(t, keyB, send("c_open", "secret_q", "bot-c"))
		if again.Status != http.StatusConflict || again.Body["open_handoff_id"] != bOpen.Body["handoff_id"] {
			t.Errorf("B's second package while its own is open: %d %s, want 409 naming B's", again.Status, again.Raw)
		}
	}

	for i := range 3 {
		expect(t, "A within the hourly limit", app.submit(t, keyA, send("c_hour", "billing_t2", fmt.Sprintf("bot-%d", i))), http.StatusCreated)
		closeAll("c_hour", "0")
	}
	if got := app.submit(t, keyB, send("c_hour", "secret_q", "bot-b")); got.Status != http.StatusCreated {
		t.Errorf("B after A's 3 packages this hour: %d %s, want 201", got.Status, got.Raw)
	}

	for i := range 10 {
		expect(t, "A within the daily limit", app.submit(t, keyA, send("c_day", "billing_t2", fmt.Sprintf("bot-%d", i))), http.StatusCreated)
		closeAll("c_day", "2 hours")
	}
	if got := app.submit(t, keyB, send("c_day", "secret_q", "bot-b")); got.Status != http.StatusCreated {
		t.Errorf("B after A's 10 packages today: %d %s, want 201", got.Status, got.Raw)
	}

	stolen := send("c_id", "secret_q", "bot-b")
	stolen["handoff_id"] = aOpen.Body["handoff_id"]
	first, retry := app.submit(t, keyB, stolen), app.submit(t, keyB, stolen)
	fields, _ := first.Body["fields"].([]any)
	if first.Status != http.StatusUnprocessableEntity || len(fields) != 1 ||
		fields[0].(map[string]any)["field"] != "handoff_id" || fields[0].(map[string]any)["rule"] != "taken" {
		t.Errorf("B sending A's id: %d %s, want 422 on handoff_id, rule taken", first.Status, first.Raw)
	}
	for _, secret := range []string{"billing_t2", "c_open", "queued", "tier1"} {
		if strings.Contains(first.Raw, secret) {
			t.Errorf("B sending A's id hears %q: %s", secret, first.Raw)
		}
	}
	if retry.Status != first.Status || retry.Raw != first.Raw {
		t.Errorf("B's retry answered %d %s, want the first answer again", retry.Status, retry.Raw)
	}
	expect(t, "A's own replay", app.submit(t, keyA, aPkg), http.StatusOK)
}
