package server_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
)

// An internal note is a form post on the package, at any time: anyone who works its queue and
// supervisors may add one, it shows on the timeline to everyone who may see the package (masked
// for their role), the page after the redirect says it was added, and the bot hears nothing of it.
func TestNotes(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "eli@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "otto@example.com", auth.RoleAgent, "tech_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	dana, eli, otto, sam := app.client(t), app.client(t), app.client(t), app.client(t)
	for c, email := range map[*http.Client]string{dana: "dana@example.com", eli: "eli@example.com", otto: "otto@example.com", sam: "sam@example.com"} {
		app.login(t, c, email)
	}
	pkg := harborFor(t, "billing_t2").(map[string]any)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	notes := app.URL + "/handoffs/" + id + "/notes"
	if status, _, _ := postForm(t, dana, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d", status)
	}
	outbox := func() (n int) {
		t.Helper()
		if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM webhook_outbox WHERE handoff_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	hooks := outbox()

	for _, tc := range []struct {
		text, kept string
	}{
		{"", ""},
		{"   ", ""},
		{strings.Repeat("é", actions.MaxNoteChars+1), ""},
		{"Called •••, no answer", "Called •••, no answer"},
	} {
		status, _, body := postForm(t, eli, notes, url.Values{"text": {tc.text}})
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, "text") || !strings.Contains(body, `data-testid="note-error"`) {
			t.Errorf("note %.20q: %d, want 422 naming the field text beside the form\n%.300s", tc.text, status, body)
		}
		if tc.kept != "" && !strings.Contains(body, ">"+tc.kept+"</textarea>") {
			t.Errorf("the refused note %q is not back in its field", tc.kept)
		}
	}
	for c, who := range map[*http.Client]string{otto: "an agent of another queue"} {
		if status, _, _ := postForm(t, c, notes, url.Values{"text": {"hello"}}); status != http.StatusNotFound {
			t.Errorf("a note by %s: %d, want 404 as for a package that is not there", who, status)
		}
	}
	if status, _, _ := postForm(t, eli, app.URL+"/handoffs/ho_nobody/notes", url.Values{"text": {"hello"}}); status != http.StatusNotFound {
		t.Errorf("a note on no package: %d, want 404", status)
	}

	// A colleague who does not hold it, and a supervisor who works no queue, may both write one;
	// the supervisor heard the customer's name on the phone.
	status, location, _ := postForm(t, eli, notes, url.Values{"text": {"Customer prefers email."}})
	if status != http.StatusSeeOther || location != "/handoffs/"+id {
		t.Fatalf("note: %d to %q, want 303 to the package", status, location)
	}
	page := mustGet(t, eli, app.URL+"/handoffs/"+id)
	if !strings.Contains(page, "Your note was added to the timeline") {
		t.Error("the page after the note does not say it was added")
	}
	if again := mustGet(t, eli, app.URL+"/handoffs/"+id); strings.Contains(again, "Your note was added") {
		t.Error("the notice shows again on the next visit")
	}
	req, err := http.NewRequest(http.MethodPost, notes, strings.NewReader(url.Values{"text": {"Called Dana Whitfield back: she confirmed the card."}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Dest", "iframe")
	resp, err := sam.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/sidebar/"+id {
		t.Fatalf("a note from the sidebar: %d to %q, want 303 to the sidebar", resp.StatusCode, resp.Header.Get("Location"))
	}
	if sidebar := mustGet(t, sam, app.URL+"/sidebar/"+id); !strings.Contains(sidebar, "Your note was added to the timeline") {
		t.Error("the sidebar after the note does not say it was added")
	}

	lines := func(c *http.Client) []string {
		t.Helper()
		var out []string
		for _, m := range regexp.MustCompile(`(?s)data-testid="timeline-line" data-kind="([a-z_]+)">.*?</li>`).FindAllStringSubmatch(mustGet(t, c, app.URL+"/handoffs/"+id), -1) {
			out = append(out, m[1]+": "+strings.Join(strings.Fields(regexp.MustCompile(`<[^>]+>`).ReplaceAllString(m[0][strings.Index(m[0], "</time>"):], " ")), " "))
		}
		return out
	}
	danaSees := strings.Join(lines(dana), "\n")
	for _, want := range []string{"noted: Note by sam: Called D. W. back: she confirmed the card.", "noted: Note by eli: Customer prefers email.",
		"accepted: Accepted by dana", "queued: Handed over by the bot tier1-support to billing_t2 (policy boundary)"} {
		if !strings.Contains(danaSees, want) {
			t.Errorf("the agent's timeline lacks %q:\n%s", want, danaSees)
		}
	}
	if strings.Contains(danaSees, "Whitfield") || strings.Contains(danaSees, "_") && !strings.Contains(danaSees, "billing_t2") {
		t.Errorf("the agent's timeline shows the customer's name or a code:\n%s", danaSees)
	}
	if samSees := strings.Join(lines(sam), "\n"); !strings.Contains(samSees, "Called Dana Whitfield back") {
		t.Errorf("the supervisor's timeline masks the note:\n%s", samSees)
	}

	// After the package is closed, a note still goes on its timeline.
	if status, _, _ := postForm(t, dana, app.URL+"/handoffs/"+id+"/resolve", url.Values{"code": {"solved"}}); status != http.StatusSeeOther {
		t.Fatalf("resolve: %d", status)
	}
	hooks++ // the resolve's
	if status, _, _ := postForm(t, dana, notes, url.Values{"text": {"Customer wrote back to thank us."}}); status != http.StatusSeeOther {
		t.Errorf("a note on a resolved package: %d, want 303", status)
	}
	var noted int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM events e JOIN handoffs h ON h.id = e.handoff_id
		WHERE h.handoff_id = $1 AND e.kind = 'noted'`, id).Scan(&noted); err != nil {
		t.Fatal(err)
	}
	if noted != 3 {
		t.Errorf("%d notes logged, want 3", noted)
	}
	if got := outbox(); got != hooks {
		t.Errorf("the bot's outbox has %d rows for the package, want %d: notes are never sent to the bot", got, hooks)
	}
}

// "My work" lists what the agent holds in every queue, with its status in words, the last thing
// that happened and the customer masked for their role; the top bar counts it; a colleague holds
// none of it.
func TestMine(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2", "tech_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2", "tech_t2")
	app.user(t, "eli@example.com", auth.RoleAgent, "billing_t2")
	dana, eli := app.client(t), app.client(t)
	app.login(t, dana, "dana@example.com")
	app.login(t, eli, "eli@example.com")
	submit := func(queue string, edit func(map[string]any)) string {
		pkg := harborFor(t, queue).(map[string]any)
		pkg["transfer_mode"] = "cold"
		if edit != nil {
			edit(pkg)
		}
		expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
		return pkg["handoff_id"].(string)
	}
	accepted := submit("billing_t2", nil)
	awaiting := submit("billing_t2", func(p map[string]any) { p["refund"] = map[string]any{"amount": "240.00", "currency": "USD"} })
	reserved := submit("tech_t2", nil)
	for _, step := range []struct{ path, note string }{
		{"/handoffs/" + accepted + "/accept", ""},
		{"/handoffs/" + awaiting + "/accept", ""},
		{"/handoffs/" + awaiting + "/approval", "double charge"},
		{"/queues/tech_t2/next", ""},
	} {
		if status, _, body := postForm(t, dana, app.URL+step.path, url.Values{"note": {step.note}}); status != http.StatusSeeOther {
			t.Fatalf("%s: %d\n%.300s", step.path, status, body)
		}
	}

	page := mustGet(t, dana, app.URL+"/mine")
	rows := regexp.MustCompile(`(?s)data-testid="mine-row" data-handoff="([^"]+)".*?</li>`).FindAllStringSubmatch(page, -1)
	if len(rows) != 3 {
		t.Fatalf("/mine lists %d rows, want 3:\n%s", len(rows), page)
	}
	byID := map[string]string{}
	for _, r := range rows {
		byID[r[1]] = r[0]
	}
	for id, want := range map[string][]string{
		accepted: {`data-testid="mine-status">accepted<`, "Last: Accepted by dana", "billing_t2"},
		awaiting: {`data-testid="mine-status">awaiting approval<`, "Last: Refund of 240.00 USD requested by dana"},
		reserved: {`data-testid="mine-status">reserved<`, "Last: Reserved by dana", "tech_t2", `data-accept`},
	} {
		for _, w := range want {
			if !strings.Contains(byID[id], w) {
				t.Errorf("the row of %s lacks %q:\n%s", id, w, byID[id])
			}
		}
	}
	// The SLA runs from arrival to the accept, as search's sla_breached counts it: an accepted
	// package's timer has stopped, a reserved one's still counts down.
	for _, id := range []string{accepted, awaiting} {
		if !strings.Contains(byID[id], `data-testid="sla-stopped"`) || !strings.Contains(byID[id], "accepted within SLA") {
			t.Errorf("the row of %s does not say it was accepted within its SLA:\n%s", id, byID[id])
		}
	}
	if !strings.Contains(byID[reserved], `data-testid="sla-left"`) || !strings.Contains(byID[reserved], "left") {
		t.Errorf("the reserved row does not say how much of its SLA is left")
	}
	if strings.Contains(page, "awaiting_approval") || strings.Contains(page, "Whitfield") {
		t.Error("/mine shows a status code, or the customer's name to an agent below the queue's PII role")
	}
	if !strings.Contains(page, `data-testid="mine-count">3<`) {
		t.Error("the top bar does not count the 3 packages held")
	}
	if home := mustGet(t, dana, app.URL+"/"); !strings.Contains(home, `data-testid="mine-count">3<`) {
		t.Error("the top bar of another page does not count them")
	}
	elis := mustGet(t, eli, app.URL+"/mine")
	if strings.Contains(elis, `data-testid="mine-row"`) || !strings.Contains(elis, `data-testid="mine-count">0<`) {
		t.Error("a colleague's /mine lists Dana's packages")
	}
}

// The socket brings "My work", the top bar's count on every page and "my queues"' counts up to
// date: a package accepted appears, one resolved leaves, a package arriving counts as waiting.
func TestMineAndQueueCountsLive(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	dana := app.client(t)
	app.login(t, dana, "dana@example.com")
	mine, _ := app.dialed(t, dana, "mine=true")
	page, _ := app.dialed(t, dana, "queues=billing_t2")
	home, _ := app.dialed(t, dana, "summaries=true")

	pkg := harborFor(t, "billing_t2").(map[string]any)
	pkg["transfer_mode"] = "cold"
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	if row := readUntil(t, home, "queue-row-billing_t2"); !strings.Contains(row, `data-testid="waiting-count">1<`) {
		t.Errorf("my queues' row after an arrival:\n%s", row)
	}
	if status, _, _ := postForm(t, dana, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d", status)
	}
	if row := readUntil(t, mine, "mine-"+id); !strings.Contains(row, "Accepted by dana") {
		t.Errorf("the row on /mine after the accept:\n%s", row)
	}
	if count := readUntil(t, page, "mine-count"); !strings.Contains(count, ">1<") {
		t.Errorf("the queue page's count after the accept: %s", count)
	}
	if status, _, _ := postForm(t, dana, app.URL+"/handoffs/"+id+"/resolve", url.Values{"code": {"solved"}}); status != http.StatusSeeOther {
		t.Fatalf("resolve: %d", status)
	}
	for {
		f := readFrame(t, mine)
		removed, counted := false, false
		for _, fr := range f.Fragments {
			removed = removed || fr.Target == "mine-"+id && fr.Op == "remove"
			counted = counted || fr.Target == "mine-count" && strings.Contains(fr.HTML, ">0<")
		}
		if removed && counted {
			break
		}
	}
}
