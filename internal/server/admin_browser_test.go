package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/handoff"
)

// check ticks the checkbox labelled label in a form field of choices.
func check(field, label string) chromedp.Action[chromedp.Void] {
	f, _ := json.Marshal(`[data-testid="field-` + field + `"] label`)
	l, _ := json.Marshal(label)
	return chromedp.Evaluate[chromedp.Void](`(() => {
		const box = [...document.querySelectorAll(` + string(f) + `)].find(e => e.innerText.trim() === ` + string(l) + `);
		if (!box) throw new Error("no choice " + ` + string(l) + `);
		box.querySelector("input").checked = true;
	})()`)
}

// adminLogin logs a browser in as an admin, who may see no queues yet.
func adminLogin(t *testing.T, ctx context.Context, base, email string) {
	t.Helper()
	if err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/login"),
		chromedp.WaitVisible(`[data-testid="login-form"]`),
		chromedp.SendKeys(`input[name="email"]`, email),
		chromedp.SendKeys(`input[name="password"]`, testPassword),
		chromedp.Submit(`[data-testid="login-form"]`),
		chromedp.WaitVisible(`[data-testid="nav-admin"]`),
	); err != nil {
		t.Fatalf("login %s: %v", email, err)
	}
}

// TestBrowserAdminWalkthrough is docs/admins.md's walk through the console: an admin creates a queue,
// a user and a key in /admin; a package posted with the new key shows on the new user's queue
// page; the admin lowers the queue's PII role and the user's open package shows the contact on
// its next render; the admin revokes the key and its next request gets 401.
func TestBrowserAdminWalkthrough(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	admin := browser(t)
	adminLogin(t, admin, app.URL, "ada@example.com")

	if err := chromedp.Do(admin,
		chromedp.Click(`[data-testid="nav-admin"]`),
		chromedp.WaitVisible(`[data-testid="queue-form"]`),
		chromedp.SetValue(`#f-name`, "vip"),
		chromedp.Submit(`[data-testid="queue-form"]`),
		chromedp.WaitVisible(`[data-testid="queue-members"]`),
	); err != nil {
		t.Fatalf("create the queue: %v", err)
	}
	if err := chromedp.Do(admin,
		chromedp.Navigate(app.URL+"/admin/users"),
		chromedp.WaitVisible(`[data-testid="user-form"]`),
		chromedp.SendKeys(`#f-email`, "val@example.com"),
		chromedp.SendKeys(`#f-password`, testPassword),
		chromedp.SendKeys(`#f-name`, "Val"),
		check("queues", "vip"),
		chromedp.Submit(`[data-testid="user-form"]`),
		chromedp.WaitVisible(`[data-testid="user-row"][data-email="val@example.com"]`),
	); err != nil {
		t.Fatalf("create the user: %v", err)
	}
	waitForJS(t, admin, "the notice that the user was created", `document.querySelector('[data-testid="notice"]').textContent.includes("The user was created")`,
		`document.querySelector('[data-testid="notice"]')?.outerHTML`)
	checkA11y(t, admin, axeSource(t), "/admin/users after creating a user")
	if err := chromedp.Do(admin,
		chromedp.Navigate(app.URL+"/admin/keys"),
		chromedp.WaitVisible(`[data-testid="key-form"]`),
		chromedp.SendKeys(`#f-name`, "vip-bot"),
		check("queues", "vip"),
		chromedp.Submit(`[data-testid="key-form"]`),
		chromedp.WaitVisible(`[data-testid="secret-key"]`),
	); err != nil {
		t.Fatalf("create the key: %v", err)
	}
	key := text(t, admin, `[data-testid="secret-key"]`)
	secret := text(t, admin, `[data-testid="secret-signing-secret"]`)
	if !strings.HasPrefix(key, "hdk_") || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("the key page shows key %q and secret %q", key, secret)
	}

	pkg := harbor(t, func(p map[string]any) { p["target_profile"] = "vip" })
	id := pkg["handoff_id"].(string)
	expect(t, "a package with the new key", app.submit(t, key, pkg), http.StatusCreated)

	agent := browser(t)
	browserLogin(t, agent, app.URL, "val@example.com")
	if got := text(t, agent, `[data-testid="queue-row"][data-queue="vip"]`); got == "" {
		t.Fatal("the new user's queues do not list vip")
	}
	openQueue(t, agent, app.URL, "vip")
	if err := chromedp.Do(agent, chromedp.WaitVisible(`#card-`+id)); err != nil {
		t.Fatalf("the package is not on the new user's queue page: %v", err)
	}
	email := `[data-testid="contact-email"]`
	if err := chromedp.Do(agent, chromedp.Navigate(app.URL+"/handoffs/"+id), chromedp.WaitVisible(email)); err != nil {
		t.Fatal(err)
	}
	if got := text(t, agent, email); !strings.HasPrefix(got, handoff.Masked) {
		t.Fatalf("an agent sees the contact's email %q under the default PII role, want it masked", got)
	}

	if err := chromedp.Do(admin,
		chromedp.Navigate(app.URL+"/admin/queues"),
		chromedp.WaitVisible(`[data-testid="queue-tree"]`),
	); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, admin, axeSource(t), "/admin/queues")
	if err := chromedp.Do(admin,
		chromedp.Click(`[data-testid="queue-row"][data-queue="vip"] a`),
		chromedp.WaitVisible(`[data-testid="queue-form"]`),
		chromedp.SetValue(`#f-pii_min_role`, "agent"),
		chromedp.Submit(`[data-testid="queue-form"]`),
		chromedp.WaitReady(`#f-pii_min_role option[value="agent"][selected]`),
	); err != nil {
		t.Fatalf("change the PII role: %v", err)
	}
	if err := chromedp.Do(agent, chromedp.Reload(), chromedp.WaitVisible(email)); err != nil {
		t.Fatal(err)
	}
	if got := text(t, agent, email); got != "dana.whitfield@example.com" {
		t.Errorf("after the PII role went to agent, the agent's next render shows %q, want the email", got)
	}

	// The signing secret is rotated with the default overlap, and the new one shown once.
	if err := chromedp.Do(admin,
		chromedp.Navigate(app.URL+"/admin/keys"),
		chromedp.Click(`[data-testid="key-row"][data-key="vip-bot"] a`),
		chromedp.WaitVisible(`[data-testid="rotate-form"]`),
		chromedp.Submit(`[data-testid="rotate-form"]`),
		chromedp.WaitVisible(`[data-testid="secret-signing-secret"]`),
	); err != nil {
		t.Fatalf("rotate the signing secret: %v", err)
	}
	if rotated := text(t, admin, `[data-testid="secret-signing-secret"]`); !strings.HasPrefix(rotated, "whsec_") || rotated == secret {
		t.Errorf("the rotation shows %q, want a new whsec_ secret", rotated)
	}

	if err := chromedp.Do(admin,
		chromedp.Navigate(app.URL+"/admin/keys"),
		chromedp.Click(`[data-testid="key-row"][data-key="vip-bot"] a`),
		chromedp.WaitVisible(`[data-testid="revoke-key"]`),
		chromedp.Click(`[data-testid="revoke-key"]`),
		chromedp.WaitVisible(`[data-testid="confirm-revoke"]`),
	); err != nil {
		t.Fatalf("revoke the key: %v", err)
	}
	checkA11y(t, admin, axeSource(t), "the confirmation of revoking a key")
	expect(t, "a request with the key before the revocation is confirmed", app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, key, nil), http.StatusOK)
	if err := chromedp.Do(admin,
		chromedp.Click(`[data-testid="confirm"]`),
		chromedp.WaitVisible(`[data-testid="key-revoked"]`),
	); err != nil {
		t.Fatalf("revoke the key: %v", err)
	}
	if page := text(t, admin, "body"); strings.Contains(page, key) || strings.Contains(page, secret) {
		t.Error("the key's page shows its key or signing secret again")
	}
	expect(t, "a request with the revoked key", app.api(t, http.MethodGet, "/api/v1/handoffs/"+id, key, nil), http.StatusUnauthorized)

	var kinds []string
	if err := app.DB.QueryRow(context.Background(), `
		SELECT array_agg(kind ORDER BY seq) FROM events e JOIN users u ON u.id = e.actor_user
		WHERE u.email = 'ada@example.com'`).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	if want := []string{"queue_created", "user_created", "api_key_created", "queue_changed", "webhook_secret_rotated", "api_key_revoked"}; strings.Join(kinds, " ") != strings.Join(want, " ") {
		t.Errorf("the log has the admin's changes %v, want %v", kinds, want)
	}
}

// TestBrowserAdminDisablesUser disables an agent who holds a package and has a queue page open. The
// admin is first told what will happen, and nothing happens until they confirm; then the agent's
// page leaves for the login page at once, the package is back in its queue, with an event, and the
// agent's page in the console says disabled.
func TestBrowserAdminDisablesUser(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	key := app.botKey(t, "tier1", "billing_t2")
	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)

	agent := browser(t)
	browserLogin(t, agent, app.URL, "dana@example.com")
	if err := chromedp.Do(agent, chromedp.Navigate(app.URL+"/handoffs/"+id), chromedp.Click(`[data-testid="accept"]`),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`)); err != nil {
		t.Fatalf("accept: %v", err)
	}
	openQueue(t, agent, app.URL, "billing_t2")

	admin := browser(t)
	adminLogin(t, admin, app.URL, "ada@example.com")
	if err := chromedp.Do(admin,
		chromedp.Navigate(app.URL+"/admin/users"),
		chromedp.Click(`[data-testid="user-row"][data-email="dana@example.com"] a`),
		chromedp.WaitVisible(`[data-testid="disable-user"]`),
		chromedp.Click(`[data-testid="disable-user"]`),
		chromedp.WaitVisible(`[data-testid="confirm-disable"]`),
	); err != nil {
		t.Fatalf("disable: %v", err)
	}
	said := text(t, admin, `[data-testid="consequences"]`)
	for _, want := range []string{"1 held package goes back to billing_t2", "Their open session ends"} {
		if !strings.Contains(said, want) {
			t.Errorf("the confirmation does not say %q:\n%s", want, said)
		}
	}
	checkA11y(t, admin, axeSource(t), "the confirmation of disabling a user")
	if live, err := chromedp.Run(agent, chromedp.Evaluate[bool](`window.sameDocument === true && !!document.querySelector('[data-testid="cards"]')`)); err != nil || !live {
		t.Fatalf("before the admin confirms, the agent's queue page is gone (%v)", err)
	}
	if err := chromedp.Do(admin, chromedp.Click(`[data-testid="confirm"]`), chromedp.WaitVisible(`[data-testid="user-disabled"]`)); err != nil {
		t.Fatalf("confirm: %v", err)
	}
	checkA11y(t, admin, axeSource(t), "a disabled user's page")
	wait, stop := context.WithTimeout(agent, waitDeadline)
	defer stop()
	if err := chromedp.Do(wait, chromedp.WaitVisible(`[data-testid="login-form"]`)); err != nil {
		t.Fatalf("the disabled agent's queue page never left for the login page: %v", err)
	}

	var status string
	var assignee *int64
	if err := app.DB.QueryRow(context.Background(), `SELECT status, assignee_id FROM handoffs WHERE handoff_id = $1`, id).Scan(&status, &assignee); err != nil {
		t.Fatal(err)
	}
	if status != "queued" || assignee != nil {
		t.Errorf("the disabled agent's package is %s held by %v, want queued and held by nobody", status, assignee)
	}
	var released int
	if err := app.DB.QueryRow(context.Background(), `
		SELECT count(*) FROM events e JOIN handoffs h ON h.id = e.handoff_id
		WHERE h.handoff_id = $1 AND e.kind = 'released' AND e.detail->>'reason' = 'assignee_disabled' AND (e.detail->>'from_assignee')::bigint = $2`,
		id, dana.ID).Scan(&released); err != nil {
		t.Fatal(err)
	}
	if released != 1 {
		t.Errorf("%d events say the package went back to its queue, want 1", released)
	}
}

// TestBrowserAdminValidationPerField submits bad forms: each bad field shows its own complaint,
// all at once, and what was typed stays.
func TestBrowserAdminValidationPerField(t *testing.T) {
	t.Parallel()
	app := setup(t)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	admin := browser(t)
	adminLogin(t, admin, app.URL, "ada@example.com")

	if err := chromedp.Do(admin,
		chromedp.Navigate(app.URL+"/admin/queues"),
		chromedp.WaitVisible(`[data-testid="queue-form"]`),
		chromedp.SetValue(`#f-name`, "Not A Name"),
		chromedp.SetValue(`#f-ttl`, "soon"),
		chromedp.SetValue(`#f-guard_contact_hourly`, "0"),
		chromedp.SetValue(`#f-overflow_policy`, "route"),
		chromedp.Submit(`[data-testid="queue-form"]`),
		chromedp.WaitVisible(`[data-testid="error-name"]`),
	); err != nil {
		t.Fatalf("submit a bad queue: %v", err)
	}
	for field, want := range map[string]string{
		"name": "must be 1-63", "ttl": "not a duration", "guard_contact_hourly": "not a whole number",
		"overflow_queue": "needs an overflow queue",
	} {
		if got := text(t, admin, `[data-testid="error-`+field+`"]`); !strings.Contains(got, want) {
			t.Errorf("field %s says %q, want %q", field, got, want)
		}
	}
	if kept, err := chromedp.Run(admin, chromedp.Value(`#f-name`)); err != nil || kept != "Not A Name" {
		t.Errorf("the name field holds %q after the refusal (%v), want what was typed", kept, err)
	}

	// A circle of parents is refused on the field that would close it.
	for _, name := range []string{"top", "child"} {
		if err := chromedp.Do(admin,
			chromedp.Navigate(app.URL+"/admin/queues"),
			chromedp.WaitVisible(`[data-testid="queue-form"]`),
			chromedp.SetValue(`#f-name`, name),
			chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("#f-parent");
				const top = [...s.options].find(o => o.text === "top"); if (top) s.value = top.value; })()`),
			chromedp.Submit(`[data-testid="queue-form"]`),
			chromedp.WaitVisible(`[data-testid="queue-members"]`),
		); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	if err := chromedp.Do(admin,
		chromedp.Navigate(app.URL+"/admin/queues"),
		chromedp.Click(`[data-testid="queue-row"][data-queue="top"] a`),
		chromedp.WaitVisible(`[data-testid="queue-form"]`),
		chromedp.Evaluate[chromedp.Void](`(() => { const s = document.querySelector("#f-parent");
			s.value = [...s.options].find(o => o.text === "child").value; })()`),
		chromedp.Submit(`[data-testid="queue-form"]`),
		chromedp.WaitVisible(`[data-testid="error-parent"]`),
	); err != nil {
		t.Fatalf("make a circle: %v", err)
	}
	if got := text(t, admin, `[data-testid="error-parent"]`); !strings.Contains(got, "child is already under top") {
		t.Errorf("the circle is refused with %q", got)
	}

	if err := chromedp.Do(admin,
		chromedp.Navigate(app.URL+"/admin/users"),
		chromedp.WaitVisible(`[data-testid="user-form"]`),
		chromedp.SendKeys(`#f-email`, "not-an-address"),
		chromedp.SendKeys(`#f-password`, "short"),
		chromedp.SetValue(`#f-capacity`, "0"),
		chromedp.Submit(`[data-testid="user-form"]`),
		chromedp.WaitVisible(`[data-testid="error-email"]`),
	); err != nil {
		t.Fatalf("submit a bad user: %v", err)
	}
	for _, field := range []string{"email", "password", "name", "capacity"} {
		if got := text(t, admin, `[data-testid="error-`+field+`"]`); got == "" {
			t.Errorf("field %s shows no complaint", field)
		}
	}
}

// axe-core finds no serious or critical violation on the console's pages, a refused form among
// them.
func TestBrowserAdminAccessibility(t *testing.T) {
	t.Parallel()
	source, err := os.ReadFile(axePath)
	if err != nil {
		t.Fatalf("axe-core is missing: run `npm install` (make generate does): %v", err)
	}
	app := setup(t)
	app.user(t, "ada@example.com", auth.RoleAdmin)
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.botKey(t, "tier1", "billing_t2")
	var queueID, keyID string
	if err := app.DB.QueryRow(context.Background(), `SELECT (SELECT id FROM queues)::text, (SELECT id FROM api_keys)::text`).Scan(&queueID, &keyID); err != nil {
		t.Fatal(err)
	}
	ctx := browser(t)
	adminLogin(t, ctx, app.URL, "ada@example.com")
	for _, page := range []string{"/admin/queues", "/admin/queues/" + queueID, "/admin/users", "/admin/users/" + itoa(dana.ID),
		"/admin/keys", "/admin/keys/" + keyID, "/admin/settings", "/password"} {
		if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+page), chromedp.WaitVisible(`form`)); err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		checkA11y(t, ctx, string(source), page)
	}
	if err := chromedp.Do(ctx, chromedp.Navigate(app.URL+"/admin/queues"), chromedp.SetValue(`#f-ttl`, "soon"),
		chromedp.Submit(`[data-testid="queue-form"]`), chromedp.WaitVisible(`[data-testid="error-ttl"]`)); err != nil {
		t.Fatal(err)
	}
	checkA11y(t, ctx, string(source), "a refused queue form")
}
