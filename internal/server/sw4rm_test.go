package server_test

import (
	"encoding/json"
	"net/http"
	"os"
	"testing"
)

func sw4rmRequest(t *testing.T, edit func(r map[string]any)) map[string]any {
	t.Helper()
	raw, err := os.ReadFile("../handoff/sw4rm/testdata/harbor-request.json")
	if err != nil {
		t.Fatal(err)
	}
	var r map[string]any
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(r)
	}
	return r
}

func TestSW4RMAdapter(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "swarm", "billing_t2", "refunds")
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET skills = '{billing_refunds,goodwill}' WHERE name = 'refunds'`); err != nil {
		t.Fatal(err)
	}
	const path = "/api/v1/sw4rm/handoff-requests"

	first := app.api(t, http.MethodPost, path, key, sw4rmRequest(t, nil))
	expect(t, "handoff request", first, 201)
	if first.Body["accepted"] != true || first.Body["status"] != "PENDING" || first.Body["handoff_id"] != "ho_sw4rm_8f3a91c2" {
		t.Fatalf("response: %s", first.Raw)
	}
	if meta := first.Body["metadata"].(map[string]any); meta["queue"] != "billing_t2" {
		t.Errorf("to_agent billing_t2 routed to %v", meta["queue"])
	}
	expect(t, "identical retry", app.api(t, http.MethodPost, path, key, sw4rmRequest(t, nil)), 200)

	refused := app.api(t, http.MethodPost, path, key, sw4rmRequest(t, func(r map[string]any) { r["request_id"] = "ho_sw4rm_second" }))
	expect(t, "second for the same contact", refused, 409)
	meta := refused.Body["metadata"].(map[string]any)
	if refused.Body["accepted"] != false || refused.Body["status"] != "REJECTED" || meta["open_handoff_id"] != "ho_sw4rm_8f3a91c2" {
		t.Errorf("refusal should be a HandoffResponse naming the open handoff: %s", refused.Raw)
	}

	routed := app.api(t, http.MethodPost, path, key, sw4rmRequest(t, func(r map[string]any) {
		r["request_id"], r["to_agent"] = "ho_sw4rm_routed", ""
		r["metadata"].(map[string]any)["contact_id"] = "cust_other"
	}))
	expect(t, "routing by capability", routed, 201)
	if routed.Body["metadata"].(map[string]any)["queue"] != "refunds" {
		t.Errorf("capabilities [billing_refunds] routed to %v, want refunds", routed.Body["metadata"])
	}
	unroutable := app.api(t, http.MethodPost, path, key, sw4rmRequest(t, func(r map[string]any) {
		r["request_id"], r["to_agent"], r["capabilities_required"] = "ho_sw4rm_lost", "", []string{"astrophysics"}
	}))
	expect(t, "no queue fits", unroutable, 422)
	if f := unroutable.Body["fields"].([]any)[0].(map[string]any); f["field"] != "to_agent" {
		t.Errorf("422 should name to_agent: %s", unroutable.Raw)
	}
	expect(t, "malformed", app.api(t, http.MethodPost, path, key, []byte(`{"from_agent":`)), 400)
	expect(t, "no contact", app.api(t, http.MethodPost, path, key, sw4rmRequest(t, func(r map[string]any) {
		delete(r["metadata"].(map[string]any), "contact_id")
	})), 422)
}
