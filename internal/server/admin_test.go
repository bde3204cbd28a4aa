package server_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/auth"
)

// A key revoked on one instance is refused on another that had it cached: by the time a later
// change of access reaches that instance (its socket closes), the revocation has too.
func TestRevokedKeyIsRefusedOnEveryInstance(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	key := app.botKey(t, "tier1", "billing_t2")
	other := twoInstances(t, app)
	expect(t, "the key on the other instance", other.api(t, http.MethodGet, "/api/v1/handoffs?contact_id=cust_1", key, nil), http.StatusOK)

	watcher := app.client(t)
	app.login(t, watcher, "dana@example.com")
	conn, _ := other.dialed(t, watcher, "queues=billing_t2")

	admin := app.client(t)
	app.login(t, admin, "ada@example.com")
	var keyID string
	if err := app.DB.QueryRow(context.Background(), `SELECT id::text FROM api_keys WHERE name = 'tier1'`).Scan(&keyID); err != nil {
		t.Fatal(err)
	}
	resp, err := admin.PostForm(app.URL+"/admin/keys/"+keyID+"/revoke", url.Values{"confirm": {"yes"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d, want 303", resp.StatusCode)
	}
	expect(t, "the revoked key on the instance that revoked it", app.api(t, http.MethodGet, "/api/v1/handoffs?contact_id=cust_1", key, nil), http.StatusUnauthorized)

	if err := access.New(app.DB, app.Auth).Disable(context.Background(), dana.ID, 0); err != nil {
		t.Fatal(err)
	}
	expectClosed(t, conn, closeAccessChanged, "the later change's socket")
	expect(t, "the revoked key on the other instance", other.api(t, http.MethodGet, "/api/v1/handoffs?contact_id=cust_1", key, nil), http.StatusUnauthorized)
}

func itoa(id int64) string { return strconv.FormatInt(id, 10) }

func readAll(resp *http.Response) (string, error) {
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return string(body), err
}

var shownPassword = regexp.MustCompile(`data-testid="secret-password">([^<]+)<`)

// A reset shows a temporary password once; it logs in only to the page that replaces it.
func TestResetPasswordLeadsToChangePassword(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	admin := app.client(t)
	app.login(t, admin, "ada@example.com")
	resp, err := admin.PostForm(app.URL+"/admin/users/"+itoa(dana.ID)+"/reset-password", nil)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := readAll(resp)
	m := shownPassword.FindStringSubmatch(page)
	if resp.StatusCode != http.StatusOK || m == nil || resp.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("reset: %d, cache %q, password shown: %v", resp.StatusCode, resp.Header.Get("Cache-Control"), m != nil)
	}
	temporary := html.UnescapeString(m[1])

	c := app.client(t)
	resp, err = c.PostForm(app.URL+"/login", url.Values{"email": {"dana@example.com"}, "password": {temporary}, "next": {"/queues/billing_t2"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/password" {
		t.Fatalf("login with the temporary password: %d to %q, want 303 to /password", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := get(t, c, app.URL+"/queues/billing_t2"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/password" {
		t.Errorf("a queue page before the change: %d to %q, want 303 to /password", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, err = c.PostForm(app.URL+"/password", url.Values{"current": {temporary}, "password": {"short"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ = readAll(resp)
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(page, `data-testid="error-password"`) {
		t.Errorf("a short new password: %d, want 422 with the field's complaint", resp.StatusCode)
	}
	resp, err = c.PostForm(app.URL+"/password", url.Values{"current": {temporary}, "password": {"a much longer one"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the change: %d, want 303", resp.StatusCode)
	}
	if resp, _ := get(t, c, app.URL+"/queues/billing_t2"); resp.StatusCode != http.StatusOK {
		t.Errorf("the queue page after the change: %d, want 200", resp.StatusCode)
	}
}

// A queue's page adds and removes members, each change logged as the person's; a form without a
// person says so on its field.
func TestQueueMembersAddAndRemove(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	var queueID string
	if err := app.DB.QueryRow(context.Background(), `SELECT id::text FROM queues WHERE name = 'billing_t2'`).Scan(&queueID); err != nil {
		t.Fatal(err)
	}
	admin := app.client(t)
	app.login(t, admin, "ada@example.com")
	post := func(path string, form url.Values) (int, string) {
		resp, err := admin.PostForm(app.URL+path, form)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := readAll(resp)
		return resp.StatusCode, body
	}
	if status, body := post("/admin/queues/"+queueID+"/members", url.Values{"user": {""}}); status != http.StatusUnprocessableEntity ||
		!strings.Contains(body, `data-testid="form-error"`) {
		t.Errorf("adding nobody: %d, want 422 with the refusal on the form", status)
	}
	if status, _ := post("/admin/queues/"+queueID+"/members/"+itoa(dana.ID)+"/remove", nil); status != http.StatusSeeOther {
		t.Fatalf("remove: %d, want 303", status)
	}
	if status, _ := post("/admin/queues/"+queueID+"/members", url.Values{"user": {itoa(dana.ID)}}); status != http.StatusSeeOther {
		t.Fatalf("add: %d, want 303", status)
	}
	resp, page := get(t, admin, app.URL+"/admin/queues/"+queueID)
	if resp.StatusCode != http.StatusOK || !strings.Contains(page, `data-testid="member" data-email="dana@example.com"`) {
		t.Errorf("the queue page after adding dana: %d, want her among the members", resp.StatusCode)
	}
	var kinds []string
	if err := app.DB.QueryRow(context.Background(), `SELECT array_agg(kind ORDER BY seq) FROM events WHERE subject_user = $1`, dana.ID).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	if strings.Join(kinds, " ") != "member_removed user_changed" {
		t.Errorf("dana's log: %v, want member_removed then user_changed", kinds)
	}
}

// Disabling a queue that holds an open package is refused beside the field that offers where to
// move it; with a queue picked, the package moves and the queue is off.
func TestDisableQueueOffersWhereToMove(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	key := app.botKey(t, "tier1", "billing_t2", "tech_t2")
	pkg := harbor(t, nil)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	var from, to string
	if err := app.DB.QueryRow(context.Background(), `SELECT (SELECT id FROM queues WHERE name = 'billing_t2')::text, (SELECT id FROM queues WHERE name = 'tech_t2')::text`).
		Scan(&from, &to); err != nil {
		t.Fatal(err)
	}
	admin := app.client(t)
	app.login(t, admin, "ada@example.com")
	resp, err := admin.PostForm(app.URL+"/admin/queues/"+from+"/disable", url.Values{"move_to": {""}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := readAll(resp)
	if resp.StatusCode != http.StatusConflict || !strings.Contains(page, `data-testid="error-move_to"`) || !strings.Contains(page, "1 open package") {
		t.Errorf("disabling a queue with an open package: %d, want 409 with the complaint beside move_to\n%s", resp.StatusCode, page)
	}
	resp, err = admin.PostForm(app.URL+"/admin/queues/"+from+"/disable", url.Values{"move_to": {to}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("disable with a target: %d, want 303", resp.StatusCode)
	}
	got := app.api(t, http.MethodGet, "/api/v1/handoffs/"+pkg["handoff_id"].(string), key, nil)
	if got.Body["queue"] != "tech_t2" {
		t.Errorf("the bot reads the package in %v, want tech_t2", got.Body["queue"])
	}
}
