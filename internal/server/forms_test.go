package server_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/queue"
)

// formStep is one POST a browser's form sends, as a person with a cookie jar sends it.
type formStep struct {
	route string // as registered, "POST /handoffs/:id/accept"
	who   *http.Client
	path  func() string // the path it posts to, found when the step runs
	form  func() url.Values
	// notice is what the page the redirect leads to says the action did; "" for a step whose page
	// is not the desk's (the popup's last page, which hands its ticket over).
	notice string
}

// pageAddress is where a page rendered in answer to a POST says it stands.
var pageAddress = regexp.MustCompile(`<meta name="desk-address" content="([^"]+)">`)

// Every POST a browser's form sends answers, once done, with a 303 to a page a GET loads, never
// to the form's own address, and that page says what the action did in a live region (role
// status, announced by page.js), once. A POST whose answer is a page (a refusal with the form as
// it was sent, a confirmation step, a secret shown once) names the page it stands at, a page a
// GET loads, so that a reload sends nothing again. The walk covers every POST route the desk
// registers outside the bots' API: a new form without its row fails here.
func TestEveryFormPostRedirectsAndSaysWhatItDid(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2", "intake_q")
	dana := app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2", "billing_t2-refunds", "intake_q")
	app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor, "billing_t2")
	app.user(t, "ada@example.com", auth.RoleAdmin)
	if _, err := app.DB.Exec(t.Context(), `
		UPDATE queues SET parent_id = (SELECT id FROM queues WHERE name = 'billing_t2') WHERE name = 'billing_t2-refunds';
		UPDATE users SET capacity = 100`); err != nil {
		t.Fatal(err)
	}
	fx := adminFixtures(t, app)
	agent, supervisor, admin := app.client(t), app.client(t), app.client(t)
	app.login(t, agent, "dana@example.com")
	app.login(t, supervisor, "sam@example.com")
	app.login(t, admin, "ada@example.com")

	// submit sends a cold package (warm ones would ring dana) and returns its id; refund, if
	// given, is above billing_t2's threshold.
	n := 0
	submit := func(queueName, refund string) string {
		t.Helper()
		n++
		pkg := harbor(t, func(p map[string]any) {
			p["target_profile"], p["transfer_mode"] = queueName, "cold"
			p["contact"].(map[string]any)["id"] = "cust_form_" + strconv.Itoa(n)
			if refund != "" {
				p["refund"] = map[string]any{"amount": refund, "currency": "USD"}
			}
		})
		expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
		return pkg["handoff_id"].(string)
	}
	do := func(c *http.Client, path string, form url.Values) {
		t.Helper()
		if status, _, body := postForm(t, c, app.URL+path, form); status != http.StatusSeeOther {
			t.Fatalf("POST %s: %d\n%.1000s", path, status, body)
		}
	}
	pending := func(id string) string {
		t.Helper()
		return approvalIDOf(t, supervisor, app.URL, id)
	}

	// The warm package rings dana while her desk is open: she declines it.
	conn, _ := app.dialed(t, agent, "")
	collectFrames(t, conn)
	app.waitOnline(t, dana)
	ringing := harbor(t, func(p map[string]any) { p["contact"].(map[string]any)["id"] = "cust_form_ring" })
	if ans := app.submit(t, key, ringing); ans.Body["offered_to"] != "dana" {
		t.Fatalf("the warm package rings %v, want dana: %s", ans.Body["offered_to"], ans.Raw)
	}
	// Her desk stays open until she declined: closing it would move the ring on.
	defer conn.Close()

	var (
		worked, rejected, returned, transferred = submit("billing_t2", ""), submit("billing_t2", ""), submit("billing_t2", ""), submit("billing_t2", "")
		withdrawn, granted, denied, moved       = submit("billing_t2", "150.00"), submit("billing_t2", "150.00"), submit("billing_t2", "150.00"), submit("billing_t2", "")
		popupPage                               string
		queueForm                               = url.Values(queue.Values(queue.Defaults()))
	)
	submit("intake_q", "") // for "Take next"
	for _, id := range []string{rejected, withdrawn, granted, denied, moved} {
		do(agent, "/handoffs/"+id+"/accept", nil)
	}
	do(agent, "/handoffs/"+granted+"/approval", url.Values{"note": {"double charge"}})
	do(agent, "/handoffs/"+denied+"/approval", url.Values{"note": {"double charge"}})
	at := func(p string) func() string { return func() string { return p } }
	form := func(v url.Values) func() url.Values { return func() url.Values { return v } }
	newQueue, savedQueue := cloneValues(queueForm), cloneValues(queueForm)
	newQueue.Set("name", "form_created")
	savedQueue.Set("name", "mx_admin")

	steps := []formStep{
		{route: "/handoffs/:id/decline", who: agent, path: at("/handoffs/" + ringing["handoff_id"].(string) + "/decline"),
			form: form(url.Values{"next": {"/queues/billing_t2"}}), notice: "You declined the ring"},
		{route: "/queues/:name/next", who: agent, path: at("/queues/intake_q/next"), notice: "The next package is reserved for you"},
		{route: "/handoffs/:id/accept", who: agent, path: at("/handoffs/" + worked + "/accept"), notice: "You accepted the package"},
		{route: "/handoffs/:id/reply", who: agent, path: at("/handoffs/" + worked + "/reply"),
			form: form(url.Values{"text": {"Hi Dana, the duplicate charge is reversed."}}), notice: "Your reply is in the conversation"},
		{route: "/handoffs/:id/notes", who: agent, path: at("/handoffs/" + worked + "/notes"),
			form: form(url.Values{"text": {"Customer prefers email."}}), notice: "Your note was added to the timeline"},
		{route: "/handoffs/:id/resolve", who: agent, path: at("/handoffs/" + worked + "/resolve"),
			form: form(url.Values{"code": {"solved"}}), notice: "You resolved the package"},
		{route: "/handoffs/:id/reject", who: agent, path: at("/handoffs/" + rejected + "/reject"),
			form: form(url.Values{"reason": {"not billing"}}), notice: "You rejected the package"},
		{route: "/handoffs/:id/return", who: agent, path: at("/handoffs/" + returned + "/return"),
			form: form(url.Values{"reason": {"wrong_escalation"}}), notice: "You returned the package to the bot"},
		{route: "/handoffs/:id/transfer", who: agent, path: at("/handoffs/" + transferred + "/transfer"),
			form: form(url.Values{"queue": {"billing_t2-refunds"}, "note": {"refund specialist"}}), notice: "You transferred the package"},
		{route: "/handoffs/:id/approval", who: agent, path: at("/handoffs/" + withdrawn + "/approval"),
			form: form(url.Values{"note": {"double charge"}}), notice: "You asked a supervisor to approve the refund"},
		{route: "/handoffs/:id/approval/withdraw", who: agent, path: at("/handoffs/" + withdrawn + "/approval/withdraw"),
			notice: "You withdrew the refund approval request"},
		{route: "/approvals/:approval_id/approve", who: supervisor, path: func() string { return "/approvals/" + pending(granted) + "/approve" },
			form: form(url.Values{"note": {"within policy"}}), notice: "You approved the refund"},
		{route: "/approvals/:approval_id/deny", who: supervisor, path: func() string { return "/approvals/" + pending(denied) + "/deny" },
			form: form(url.Values{"note": {"over the goodwill limit"}}), notice: "You denied the refund"},
		{route: "/handoffs/:id/reassign", who: supervisor, path: at("/handoffs/" + moved + "/reassign"),
			form: form(url.Values{"to": {"bea@example.com"}}), notice: "The package was reassigned"},
		{route: "/me/status", who: agent, path: at("/me/status"), form: form(url.Values{"status": {"break"}, "next": {"/mine"}}),
			notice: "You are on a break"},
		{route: "/password", who: agent, path: at("/password"), form: form(url.Values{"current": {testPassword}, "password": {"another-horse"}}),
			notice: "Your password was changed"},
		{route: "/logout", who: agent, path: at("/logout"), notice: "You logged out"},
		{route: "/login", who: agent, path: at("/login"), form: form(url.Values{"email": {"dana@example.com"}, "password": {"another-horse"}}),
			notice: "You are logged in"},
		// The popup a CRM's frame opens: the password ends as a ticket on the popup's last page,
		// which the frame trades for a session of its own.
		{route: "/login", who: app.client(t), path: at("/login"),
			form: form(url.Values{"email": {"bea@example.com"}, "password": {testPassword}, "popup": {"1"}, "next": {"/mine"}})},
		{route: "/login/complete", who: app.client(t), path: at("/login/complete"), form: func() url.Values {
			ticket, _, _ := strings.Cut(popupPage[strings.Index(popupPage, `data-ticket="`)+len(`data-ticket="`):], `"`)
			return url.Values{"ticket": {ticket}}
		}, notice: "You are logged in"},

		{route: "/admin/queues", who: admin, path: at("/admin/queues"), form: form(newQueue), notice: "The queue was created"},
		{route: "/admin/queues/:id", who: admin, path: at("/admin/queues/" + fx.queueID), form: form(savedQueue), notice: "The queue&#39;s settings were saved"},
		{route: "/admin/queues/:id/disable", who: admin, path: at("/admin/queues/" + fx.queueID + "/disable"), form: form(url.Values{"move_to": {""}}),
			notice: "The queue is disabled"},
		{route: "/admin/queues/:id/enable", who: admin, path: at("/admin/queues/" + fx.queueID + "/enable"), notice: "The queue is enabled again"},
		{route: "/admin/queues/:id/members", who: admin, path: at("/admin/queues/" + fx.queueID + "/members"),
			form: form(url.Values{"user": {itoa(dana.ID)}}), notice: "The member was added"},
		{route: "/admin/queues/:id/members/:user/remove", who: admin, path: at("/admin/queues/" + fx.queueID + "/members/" + itoa(dana.ID) + "/remove"),
			notice: "The member was removed"},
		{route: "/admin/queues/:id/saved-replies", who: admin, path: at("/admin/queues/" + fx.queueID + "/saved-replies"),
			form: form(url.Values{"title": {"Forms"}, "body": {"Hi ⟦first name⟧."}}), notice: "The saved reply was added"},
		{route: "/admin/queues/:id/saved-replies/:reply/remove", who: admin, path: at("/admin/queues/" + fx.queueID + "/saved-replies/" + fx.savedReplyID + "/remove"),
			notice: "The saved reply was removed"},
		{route: "/admin/users", who: admin, path: at("/admin/users"), form: form(url.Values{"email": {"created@example.com"}, "name": {"Created"},
			"role": {"agent"}, "password": {"a long enough one"}, "capacity": {"3"}}), notice: "The user was created"},
		{route: "/admin/users/:id", who: admin, path: at("/admin/users/" + fx.userID), form: form(url.Values{"name": {"Target"}, "role": {"agent"}, "capacity": {"4"}}),
			notice: "The user&#39;s profile, role and queues were saved"},
		{route: "/admin/users/:id/disable", who: admin, path: at("/admin/users/" + fx.userID + "/disable"), form: form(url.Values{"confirm": {"yes"}}),
			notice: "The user is disabled"},
		{route: "/admin/users/:id/enable", who: admin, path: at("/admin/users/" + fx.userID + "/enable"), notice: "The user is enabled"},
		{route: "/admin/users/:id/sso-only", who: admin, path: at("/admin/users/" + fx.userID + "/sso-only"), form: form(url.Values{"sso_only": {"off"}}),
			notice: "Password login is on again"},
		{route: "/admin/keys/:id", who: admin, path: at("/admin/keys/" + fx.keyID), form: form(url.Values{"queues": {fx.queueID}, "webhook_url": {""}}),
			notice: "The key&#39;s queues and webhook URL were saved"},
		{route: "/admin/keys/:id/deliveries/:delivery/redeliver", who: admin, path: at("/admin/keys/" + fx.keyID + "/deliveries/" + fx.deliveryID + "/redeliver"),
			notice: "The delivery was queued to be sent again"},
		{route: "/admin/keys/:id/revoke", who: admin, path: at("/admin/keys/" + fx.keyID + "/revoke"), form: form(url.Values{"confirm": {"yes"}}),
			notice: "The key is revoked"},
		{route: "/admin/settings", who: admin, path: at("/admin/settings"), form: form(url.Values{"unknown_emails": {"refuse"}}),
			notice: "The single sign-on settings were saved"},
	}
	// The POSTs that answer with a page: a secret shown once, or what an action will do before it
	// is confirmed. They run first, while the key they show a secret of is not revoked.
	pages := []formStep{
		{route: "/admin/users/:id/reset-password", who: admin, path: at("/admin/users/" + fx.userID + "/reset-password")},
		{route: "/admin/keys", who: admin, path: at("/admin/keys"), form: form(url.Values{"name": {"form_key"}, "queues": {fx.queueID}})},
		{route: "/admin/keys/:id/rotate", who: admin, path: at("/admin/keys/" + fx.keyID + "/rotate"), form: form(url.Values{"overlap": {"1h"}})},
		{route: "/admin/users/:id/disable", who: admin, path: at("/admin/users/" + fx.userID + "/disable")},
		{route: "/admin/keys/:id/revoke", who: admin, path: at("/admin/keys/" + fx.keyID + "/revoke")},
	}

	walked := map[string]bool{}
	for _, step := range pages {
		walked["POST "+step.route] = true
		path := step.path()
		var values url.Values
		if step.form != nil {
			values = step.form()
		}
		status, _, body := postForm(t, step.who, app.URL+path, values)
		checkAnswerAt(t, step.who, app.URL, path, status, body)
	}
	for _, step := range steps {
		walked["POST "+step.route] = true
		path := step.path()
		var values url.Values
		if step.form != nil {
			values = step.form()
		}
		status, location, body := postForm(t, step.who, app.URL+path, values)
		if status != http.StatusSeeOther {
			t.Errorf("POST %s: %d, want 303 to a page\n%.1000s", path, status, body)
			continue
		}
		if !strings.HasPrefix(location, "/") || strings.HasPrefix(location, "//") {
			t.Errorf("POST %s leads to %q, want a page of the desk", path, location)
			continue
		}
		resp, page := get(t, step.who, app.URL+location)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("POST %s leads to %s, which a GET answers %d", path, location, resp.StatusCode)
			continue
		}
		if step.notice == "" {
			popupPage = page
			continue
		}
		said := regexp.MustCompile(`role="status"[^>]*data-announce="[^"]*` + regexp.QuoteMeta(step.notice))
		if !said.MatchString(page) {
			t.Errorf("POST %s: the page it leads to (%s) does not say %q in a live region\n%s", path, location, html.UnescapeString(step.notice), excerpt(page, "<main", "</main>"))
		}
		if !strings.Contains(page, `id="announcer" role="status"`) {
			t.Errorf("POST %s: the page it leads to (%s) has no announcer", path, location)
		}
		if _, again := get(t, step.who, app.URL+location); strings.Contains(again, step.notice) {
			t.Errorf("POST %s: %s says %q again on the next visit", path, location, html.UnescapeString(step.notice))
		}
	}
	for _, r := range registeredRoutes(t, app) {
		// The bot API, REST or MCP, takes no form.
		if strings.HasPrefix(r, "POST ") && !strings.HasPrefix(r, "POST /api/") && r != "POST /mcp" && !walked[r] {
			t.Errorf("%s is not walked: add the step of its form, with the page it leads to and what that page says", r)
		}
	}
}

// checkAnswerAt checks that a page a POST answered with names the page it stands at, which a GET
// loads.
func checkAnswerAt(t *testing.T, c *http.Client, base, path string, status int, body string) {
	t.Helper()
	if status == http.StatusSeeOther || status >= http.StatusInternalServerError {
		t.Errorf("POST %s: %d, want a page", path, status)
		return
	}
	m := pageAddress.FindStringSubmatch(body)
	if m == nil {
		t.Errorf("POST %s answers %d with a page that does not say where it stands (desk-address)\n%.600s", path, status, body)
		return
	}
	address := html.UnescapeString(m[1])
	if !strings.HasPrefix(address, "/") || strings.HasPrefix(address, "//") {
		t.Errorf("POST %s answers a page standing at %q, want the address of a page", path, address)
		return
	}
	if resp, _ := get(t, c, base+address); resp.StatusCode != http.StatusOK {
		t.Errorf("POST %s answers a page standing at %s, which a GET answers %d", path, address, resp.StatusCode)
	}
}

// A form the desk refuses comes back as a page with what was wrong, standing at the address of the
// page it shows: a reload loads that page instead of sending the form again.
func TestRefusedFormsStandAtTheirPage(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor, "billing_t2")
	app.user(t, "ada@example.com", auth.RoleAdmin)
	agent, supervisor, admin := app.client(t), app.client(t), app.client(t)
	app.login(t, agent, "dana@example.com")
	app.login(t, supervisor, "sam@example.com")
	app.login(t, admin, "ada@example.com")
	pkg, id := refundPackage(t, "150.00")
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	if status, _, _ := postForm(t, agent, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatal("accept")
	}
	if status, _, _ := postForm(t, agent, app.URL+"/handoffs/"+id+"/approval", url.Values{"note": {"double charge"}}); status != http.StatusSeeOther {
		t.Fatal("ask for approval")
	}
	approval := approvalIDOf(t, supervisor, app.URL, id)

	for _, r := range []struct {
		who        *http.Client
		path       string
		form       url.Values
		status     int
		standingAt string
	}{
		{agent, "/handoffs/" + id + "/reject", url.Values{"reason": {""}}, http.StatusUnprocessableEntity, "/handoffs/" + id},
		{agent, "/handoffs/" + id + "/reply", url.Values{"text": {""}}, http.StatusUnprocessableEntity, "/handoffs/" + id},
		{agent, "/handoffs/" + id + "/notes", url.Values{"text": {""}}, http.StatusUnprocessableEntity, "/handoffs/" + id},
		{agent, "/handoffs/" + id + "/accept", nil, http.StatusConflict, "/handoffs/" + id},
		{agent, "/queues/billing_t2/next", nil, http.StatusNotFound, "/queues/billing_t2"}, // nothing waits
		{supervisor, "/approvals/" + approval + "/approve", url.Values{"note": {""}}, http.StatusUnprocessableEntity, "/approvals"},
		{agent, "/password", url.Values{"current": {"wrong"}, "password": {"another-horse"}}, http.StatusUnprocessableEntity, "/password"},
		{app.client(t), "/login", url.Values{"email": {"dana@example.com"}, "password": {"wrong"}, "next": {"/mine"}}, http.StatusUnauthorized, "/login?next=%2Fmine"},
		{admin, "/admin/queues", url.Values{"name": {""}}, http.StatusUnprocessableEntity, "/admin/queues"},
		{admin, "/admin/users", url.Values{"email": {"not an email"}}, http.StatusUnprocessableEntity, "/admin/users"},
		{admin, "/admin/settings", url.Values{"unknown_emails": {"maybe"}}, http.StatusUnprocessableEntity, "/admin/settings"},
	} {
		status, _, body := postForm(t, r.who, app.URL+r.path, r.form)
		if status != r.status {
			t.Errorf("POST %s: %d, want %d\n%.600s", r.path, status, r.status, body)
			continue
		}
		checkAnswerAt(t, r.who, app.URL, r.path, status, body)
		if m := pageAddress.FindStringSubmatch(body); m != nil && html.UnescapeString(m[1]) != r.standingAt {
			t.Errorf("POST %s refused stands at %q, want %q", r.path, html.UnescapeString(m[1]), r.standingAt)
		}
	}
}
