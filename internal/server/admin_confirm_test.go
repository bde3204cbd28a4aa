package server_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
)

// consequences are the lines a confirmation page says will happen.
var consequence = regexp.MustCompile(`<li data-testid="consequence">([^<]*)</li>`)

func consequences(body string) string {
	var lines []string
	for _, m := range consequence.FindAllStringSubmatch(body, -1) {
		lines = append(lines, m[1])
	}
	return strings.Join(lines, "\n")
}

// Disabling a person first says what it will do, and does nothing until confirmed: their held
// packages by queue, their sessions. Confirmed, it does it; a cross-site confirmation does nothing.
// Their page then says they are disabled.
func TestAdminDisableAsksFirst(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2", "billing")
	key := app.botKey(t, "tier1", "billing_t2", "billing")
	agent, admin := app.client(t), app.client(t)
	app.login(t, agent, "dana@example.com")
	app.login(t, admin, "ada@example.com")
	for i, q := range []string{"billing_t2", "billing_t2", "billing"} {
		pkg := harbor(t, func(p map[string]any) {
			p["handoff_id"], p["target_profile"] = "ho_held_"+strconv.Itoa(i), q
			p["contact"].(map[string]any)["id"] = "cust_held_" + strconv.Itoa(i)
		})
		expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
		if status, _, body := postForm(t, agent, app.URL+"/handoffs/ho_held_"+strconv.Itoa(i)+"/accept", nil); status != http.StatusSeeOther {
			t.Fatalf("accept: %d %.300s", status, body)
		}
	}
	held := func() int {
		t.Helper()
		var n int
		if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM handoffs WHERE assignee_id = $1`, dana.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	path := app.URL + "/admin/users/" + strconv.FormatInt(dana.ID, 10)

	status, _, body := postForm(t, admin, path+"/disable", nil)
	if status != http.StatusOK || !strings.Contains(body, `data-testid="confirm-disable"`) {
		t.Fatalf("disable without confirm: %d, want the confirmation page:\n%.500s", status, body)
	}
	said := consequences(body)
	for _, want := range []string{
		"dana can no longer log in",
		"Their open session ends",
		"3 held packages go back to their queues (1 to billing, 2 to billing_t2)",
	} {
		if !strings.Contains(said, want) {
			t.Errorf("the confirmation does not say %q:\n%s", want, said)
		}
	}
	if !strings.Contains(body, `<input type="hidden" name="confirm" value="yes">`) {
		t.Errorf("the confirmation's form does not confirm:\n%s", body)
	}
	if n := held(); n != 3 {
		t.Fatalf("before confirming, dana holds %d packages, want still 3", n)
	}
	if resp, _ := get(t, agent, app.URL+"/"); resp.StatusCode != http.StatusOK {
		t.Fatalf("before confirming, dana's session answers %d, want 200", resp.StatusCode)
	}

	// A forged confirmation from another site is refused like every cross-site form.
	req, _ := http.NewRequest(http.MethodPost, path+"/disable", strings.NewReader("confirm=yes"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := admin.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || held() != 3 {
		t.Fatalf("a cross-site confirmation: %d, dana holds %d; want 403 and 3", resp.StatusCode, held())
	}

	if status, where, body := postForm(t, admin, path+"/disable", url.Values{"confirm": {"yes"}}); status != http.StatusSeeOther || !strings.HasSuffix(where, "/admin/users/"+strconv.FormatInt(dana.ID, 10)) {
		t.Fatalf("confirmed disable: %d to %q\n%.300s", status, where, body)
	}
	if n := held(); n != 0 {
		t.Errorf("after confirming, dana holds %d packages, want none", n)
	}
	if resp, _ := get(t, agent, app.URL+"/"); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("after confirming, dana's session answers %d, want a redirect to the login", resp.StatusCode)
	}
	page := mustGet(t, admin, path)
	if !strings.Contains(page, `data-testid="user-disabled"`) || !strings.Contains(page, `data-testid="enable-user"`) {
		t.Errorf("the disabled user's page does not say disabled:\n%s", page)
	}
	if row := regexp.MustCompile(`data-email="dana@example.com">(?s:.*?)data-testid="user-status">([^<]*)<`).FindStringSubmatch(mustGet(t, admin, app.URL+"/admin/users")); row == nil || row[1] != "disabled" {
		t.Errorf("the user list's status for dana: %q, want disabled", row)
	}
	// Disabling them again asks nothing and changes nothing.
	if status, where, _ := postForm(t, admin, path+"/disable", nil); status != http.StatusSeeOther || !strings.HasSuffix(where, path[len(app.URL):]) {
		t.Errorf("disable a disabled user: %d to %q, want back to their page", status, where)
	}
}

// A disabled person who types the right password is told their account is disabled; a wrong
// password, or an email nobody has, is told only that the email or password is wrong.
func TestLoginTellsADisabledPersonOnlyAfterThePassword(t *testing.T) {
	t.Parallel()
	app := setup(t)
	dana := app.user(t, "dana@example.com", auth.RoleAgent)
	if _, err := app.DB.Exec(t.Context(), `UPDATE users SET disabled = true WHERE id = $1`, dana.ID); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		email, password, want string
	}{
		{"dana@example.com", testPassword, "your account is disabled"},
		{"dana@example.com", testPassword + "x", "email or password is wrong"},
		{"nobody@example.com", testPassword, "email or password is wrong"},
	} {
		status, _, body := postForm(t, app.client(t), app.URL+"/login", url.Values{"email": {c.email}, "password": {c.password}})
		if status != http.StatusUnauthorized || !strings.Contains(body, c.want) {
			t.Errorf("%s / %s: %d, want 401 saying %q:\n%.500s", c.email, c.password, status, c.want, body)
		}
		if c.want != "your account is disabled" && strings.Contains(body, "disabled") {
			t.Errorf("%s / %s: a wrong password is told the account is disabled", c.email, c.password)
		}
	}
}

// Revoking a key first says what it will do: the bot is refused from its next request, and its
// open packages stay. Until confirmed the key still works.
func TestAdminRevokeKeyAsksFirst(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	admin := app.client(t)
	app.login(t, admin, "ada@example.com")
	key := app.botKey(t, "tier1", "billing_t2")
	for i := range 2 {
		expect(t, "submit", app.submit(t, key, harbor(t, func(p map[string]any) {
			p["handoff_id"] = "ho_open_" + strconv.Itoa(i)
			p["contact"].(map[string]any)["id"] = "cust_open_" + strconv.Itoa(i)
		})), http.StatusCreated)
	}
	var id int64
	if err := app.DB.QueryRow(t.Context(), `SELECT id FROM api_keys WHERE name = 'tier1'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	path := app.URL + "/admin/keys/" + strconv.FormatInt(id, 10)

	status, _, body := postForm(t, admin, path+"/revoke", nil)
	if status != http.StatusOK || !strings.Contains(body, `data-testid="confirm-revoke"`) {
		t.Fatalf("revoke without confirm: %d, want the confirmation page:\n%.500s", status, body)
	}
	said := consequences(body)
	for _, want := range []string{"requests with key tier1", "cannot be undone", "Its 2 open packages stay in their queues"} {
		if !strings.Contains(said, want) {
			t.Errorf("the confirmation does not say %q:\n%s", want, said)
		}
	}
	expect(t, "the key before confirming", app.api(t, http.MethodGet, "/api/v1/handoffs/ho_open_0", key, nil), http.StatusOK)

	if status, where, body := postForm(t, admin, path+"/revoke", url.Values{"confirm": {"yes"}}); status != http.StatusSeeOther || !strings.HasSuffix(where, path[len(app.URL):]) {
		t.Fatalf("confirmed revoke: %d to %q\n%.300s", status, where, body)
	}
	expect(t, "the key after confirming", app.api(t, http.MethodGet, "/api/v1/handoffs/ho_open_0", key, nil), http.StatusUnauthorized)
	if page := mustGet(t, admin, path); !strings.Contains(page, `data-testid="key-revoked"`) {
		t.Errorf("the revoked key's page does not say so:\n%s", page)
	}
}

// Creating a user says so on the page it leads to, once.
func TestAdminCreateUserSaysSo(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	admin := app.client(t)
	app.login(t, admin, "ada@example.com")
	status, where, body := postForm(t, admin, app.URL+"/admin/users", url.Values{"email": {"val@example.com"}, "password": {testPassword},
		"name": {"Val"}, "role": {"agent"}, "capacity": {"3"}})
	if status != http.StatusSeeOther || where != "/admin/users" {
		t.Fatalf("create a user: %d to %q\n%.300s", status, where, body)
	}
	page := mustGet(t, admin, app.URL+where)
	if !strings.Contains(page, `data-testid="notice"`) || !strings.Contains(page, "The user was created") {
		t.Errorf("the users page after creating one says nothing:\n%s", page)
	}
	if again := mustGet(t, admin, app.URL+where); strings.Contains(again, `data-testid="notice"`) {
		t.Error("the notice shows again on the next visit")
	}
}
