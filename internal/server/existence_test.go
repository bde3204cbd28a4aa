package server_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// A package in a queue the agent does not work answers, on every route that takes its id, exactly
// as a package that does not exist: the same status and the same words.
func TestForeignPackageAnswersAsAMissingOne(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "bea@example.com", auth.RoleAgent, "tech_t2")
	foreign := harbor(t, nil)
	expect(t, "submit", app.submit(t, key, foreign), http.StatusCreated)
	c := app.client(t)
	app.login(t, c, "bea@example.com")

	// answer requests path with id in place of {id} and returns the status and the body, with the
	// id put back as {id}.
	answer := func(method, path, id string, form url.Values, accept string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(method, app.URL+strings.ReplaceAll(path, "{id}", id), strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		if method == http.MethodPost {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		if accept != "" {
			req.Header.Set("Accept", accept)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.ReplaceAll(string(body), id, "{id}")
	}
	for _, r := range []struct {
		method, path string
		form         url.Values
		accept       string
	}{
		{method: http.MethodGet, path: "/handoffs/{id}"},
		{method: http.MethodGet, path: "/handoffs/{id}", accept: "application/json"},
		{method: http.MethodGet, path: "/sidebar/{id}"},
		{method: http.MethodGet, path: "/ws?handoff={id}"},
		{method: http.MethodPost, path: "/handoffs/{id}/accept"},
		{method: http.MethodPost, path: "/handoffs/{id}/reject", form: url.Values{"reason": {"not mine"}}},
		{method: http.MethodPost, path: "/handoffs/{id}/return", form: url.Values{"reason": {"needs_more_info"}, "note": {"n"}}},
		{method: http.MethodPost, path: "/handoffs/{id}/transfer", form: url.Values{"queue": {"tech_t2"}, "note": {"n"}}},
		{method: http.MethodPost, path: "/handoffs/{id}/resolve", form: url.Values{"code": {"solved"}}},
	} {
		what := r.method + " " + r.path + " " + r.accept
		foreignStatus, foreignBody := answer(r.method, r.path, foreign["handoff_id"].(string), r.form, r.accept)
		missingStatus, missingBody := answer(r.method, r.path, "ho_test_nowhere", r.form, r.accept)
		if missingStatus != http.StatusNotFound {
			t.Errorf("%s, a missing package: %d, want 404", what, missingStatus)
		}
		if foreignStatus != missingStatus || foreignBody != missingBody {
			t.Errorf("%s: a foreign package answers %d\n%s\na missing one %d\n%s", what, foreignStatus, foreignBody, missingStatus, missingBody)
		}
	}
}
