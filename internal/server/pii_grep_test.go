package server_test

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/auth"
)

// The customer of the grep test's package, in strings found nowhere else.
const (
	grepName    = "Quillon Zephyrbrook"
	grepEmail   = "quillon.zephyr.7731@example.test"
	grepPhone   = "+1 415 867 2291"
	grepAccount = "ACCT-ZX99417"
	// grepTurn is a transcript line: its PII must not reach an agent, its other words must.
	grepTurn      = "Hello, I am " + grepName + ", account " + grepAccount + ", mail " + grepEmail + " or call " + grepPhone + " about the marmalade invoice."
	grepTurnWords = "about the marmalade invoice."
)

// grepLeaks are the strings an agent below the queue's PII role must never receive, each part of
// the name, the address and the phone number however written included.
var grepLeaks = []string{grepName, "Quillon", "Zephyrbrook", grepEmail, "quillon.zephyr", grepPhone, "867 2291", "4158672291",
	grepAccount, "ZX99417"}

// grepPackage is the spec's example package for queue, its customer named by the grep strings in
// the contact, an entity the queue counts as PII, the free text and the transcript.
func grepPackage(t *testing.T, queue string) map[string]any {
	return harbor(t, func(p map[string]any) {
		p["target_profile"] = queue
		p["contact"] = map[string]any{"id": "cust_" + p["handoff_id"].(string), "display_name": grepName, "email": grepEmail, "phone": grepPhone}
		p["structured_entities"].(map[string]any)["account_id"] = grepAccount
		p["problem_statement"] = grepName + " was charged twice on " + grepAccount + "."
		p["draft_reply"] = "Hi Quillon, I see two charges; we'll write to " + grepEmail + "."
		p["transcript"] = append(p["transcript"].([]any), map[string]any{"role": "user", "content": grepTurn})
		p["privacy_flags"] = map[string]any{}
	})
}

// An agent is sent none of the customer's details anywhere: pages, the sidebar, websocket frames,
// the API, exports, the audit, the package's refund approval panel. A supervisor's package page and
// /approvals show them, and each read is recorded.
func TestPIIGrep(t *testing.T) {
	t.Parallel()
	app := setup(t)
	const q = "pii"
	key := app.botKey(t, "pii_bot", q)
	agentUser := app.user(t, "agent@example.com", auth.RoleAgent, q)
	sup := app.user(t, "sup@example.com", auth.RoleSupervisor)
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET pii_entity_keys = '{account_id}' WHERE name = $1`, q); err != nil {
		t.Fatal(err)
	}
	agent, supervisor := app.client(t), app.client(t)
	app.login(t, agent, "agent@example.com")
	app.login(t, supervisor, "sup@example.com")

	var seen []string // everything the agent received, by where
	grep := func(where, body string) {
		t.Helper()
		seen = append(seen, where)
		for _, leak := range grepLeaks {
			if strings.Contains(body, leak) {
				t.Errorf("%s shows the agent %q:\n%.2000s", where, leak, body)
			}
		}
	}
	queueSocket, _ := app.dialed(t, agent, "queues="+q)
	frames := collectFrames(t, queueSocket)

	pkg := grepPackage(t, q)
	// Above the queue's threshold (50 USD): the agent asks a supervisor to approve it below.
	pkg["refund"] = map[string]any{"amount": "120.00", "currency": "USD"}
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	var rowID int64
	if err := app.DB.QueryRow(t.Context(), `SELECT id FROM handoffs WHERE handoff_id = $1`, id).Scan(&rowID); err != nil {
		t.Fatal(err)
	}
	// A note by someone who saw the customer unmasked names them: the timeline masks it.
	if status, _, body := postForm(t, supervisor, app.URL+"/handoffs/"+id+"/notes", map[string][]string{"text": {"Called " + grepName + " on " + grepPhone}}); status != http.StatusSeeOther {
		t.Fatalf("the supervisor's note: %d %s", status, body)
	}
	packageSocket, _ := app.dialed(t, agent, "handoff="+id)
	packageFrames := collectFrames(t, packageSocket)
	mineSocket, _ := app.dialed(t, agent, "mine=true")
	mineFrames := collectFrames(t, mineSocket)

	getAll := func(stage string) {
		for _, path := range []string{"/", "/mine", "/queues/" + q, "/handoffs/" + id, "/sidebar/" + id, "/api/v1/handoffs/" + id,
			"/api/v1/handoffs?contact_id=cust_" + id, "/evals/export.jsonl", "/audit?package=" + id,
			"/audit/export.csv?package=" + id, "/audit/export.jsonl?package=" + id, "/approvals",
			// Search, by what the agent may see and by the customer's name: no row, no next link.
			"/packages?q=" + id, "/packages?q=Zephyrbrook", "/packages?q=" + url.QueryEscape(grepEmail)} {
			resp, body := get(t, agent, app.URL+path)
			if strings.HasPrefix(path, "/packages?q=") {
				// The search box keeps what the agent typed; what follows it is what the desk answered.
				_, form, _ := strings.Cut(body, `data-testid="search-form"`)
				_, body, _ = strings.Cut(form, "</form>")
				if path != "/packages?q="+id && (strings.Contains(body, `data-testid="search-row"`) || strings.Contains(body, `data-testid="more"`)) {
					t.Errorf("%s GET %s finds the package by its customer, or offers a next page", stage, path)
				}
			}
			grep(stage+" GET "+path+" ("+resp.Status+")", body)
		}
	}
	getAll("queued:")
	page := mustGet(t, agent, app.URL+"/handoffs/"+id)
	if !strings.Contains(page, grepTurnWords) || !strings.Contains(page, `data-testid="transcript-masked"`) {
		t.Errorf("the agent's page lacks the masked transcript's other words %q:\n%s", grepTurnWords, page)
	}
	if !strings.Contains(page, "<details") {
		t.Error("the transcript is not collapsed")
	}

	status, _, body := postForm(t, agent, app.URL+"/handoffs/"+id+"/accept", nil)
	if status != http.StatusSeeOther {
		t.Fatalf("accept: %d %s", status, body)
	}
	getAll("accepted:")
	// The customer writes again, naming themselves in the text, the bot's draft and an attachment:
	// the thread shows it masked on the pages and in the frame that brings it.
	said := "I am " + grepName + ", write to " + grepEmail + " or call " + grepPhone + " about " + grepAccount
	expect(t, "the customer's message", app.api(t, http.MethodPost, "/api/v1/handoffs/"+id+"/messages", key, map[string]any{
		"message_id": "m1", "role": "user", "text": said, "draft_reply": "Hi Quillon, we will write to " + grepEmail + ".",
		"attachments": []map[string]any{{"url": "https://files.example.com/" + grepEmail + ".pdf", "name": grepEmail + ".pdf", "size": 2048}},
	}), http.StatusCreated)
	waitFrames := func(what string, fs *frameLog, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !strings.Contains(fs.text(), want) {
			if time.Now().After(deadline) {
				t.Fatalf("no %s frame with %q", what, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFrames("package", packageFrames, `id=\"msg-`+id+`-1\"`)
	waitFrames("package", packageFrames, `id=\"draft-offer-`+id+`\"`)
	getAll("the customer wrote:")
	if page := mustGet(t, agent, app.URL+"/handoffs/"+id); !strings.Contains(page, `data-testid="message-text">I am Q. Z., write to`) ||
		!strings.Contains(page, `data-testid="draft-offer"`) {
		t.Errorf("the agent's page lacks the customer's message, masked, or the turn's draft:\n%s", page)
	}
	status, _, body = postForm(t, agent, app.URL+"/handoffs/"+id+"/reply", map[string][]string{"text": {"Hi Q., the duplicate is refunded."}})
	if status != http.StatusSeeOther {
		t.Fatalf("reply: %d %s", status, body)
	}
	getAll("replied:")
	// The request's note: what the agent wrote reads back to them as written (a note naming the
	// customer is masked for others: TestApprovalsMaskPerViewer, TestNotesConfirmNoGuess).
	requestNote := "Refund the customer for the double charge on the account"
	status, _, body = postForm(t, agent, app.URL+"/handoffs/"+id+"/approval", map[string][]string{"note": {requestNote}})
	if status != http.StatusSeeOther {
		t.Fatalf("request approval: %d %s", status, body)
	}
	getAll("awaiting approval:")
	page = mustGet(t, agent, app.URL+"/handoffs/"+id)
	for _, want := range []string{`data-testid="approval-panel"`, `data-testid="approval-line" data-state="pending"`, "120.00 USD", "for the double charge on"} {
		if !strings.Contains(page, want) {
			t.Errorf("the agent's package page lacks the approval panel's %q", want)
		}
	}

	// The frames of the arrival, the accept and the reply have come by now.
	waitFrames("queue", frames, "card-"+id)
	waitFrames("package", packageFrames, "status-"+id)
	waitFrames("package", packageFrames, "approval-panel")
	waitFrames("package", packageFrames, "timeline-lines-"+id)
	waitFrames("My work", mineFrames, "mine-"+id)
	grep("the queue socket's frames", frames.text())
	grep("the package socket's frames", packageFrames.text())
	grep("the My work socket's frames", mineFrames.text())
	if !strings.Contains(packageFrames.text(), "Called Q. Z. on") {
		t.Error("the package socket's timeline lacks the supervisor's note, masked")
	}

	var agentReads int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM pii_views WHERE user_id = $1`, agentUser.ID).Scan(&agentReads); err != nil {
		t.Fatal(err)
	}
	if agentReads != 0 {
		t.Errorf("%d PII reads recorded for an agent who was shown none", agentReads)
	}

	supPage := mustGet(t, supervisor, app.URL+"/handoffs/"+id)
	for _, want := range []string{grepName, grepEmail, grepPhone, grepAccount, grepTurn, said} {
		if !strings.Contains(supPage, want) {
			t.Errorf("the supervisor's package page lacks %q", want)
		}
	}
	if !strings.Contains(supPage, `href="/audit?package=`+id+`"`) {
		t.Error("the package page does not link to its history")
	}
	var fields []string
	err := app.DB.QueryRow(t.Context(), `SELECT fields FROM pii_views WHERE user_id = $1 AND via = 'page' AND handoff_ids @> ARRAY[$2::bigint]`,
		sup.ID, rowID).Scan(&fields)
	if err != nil {
		t.Fatalf("no pii_views record of the supervisor's page view: %v", err)
	}
	for _, f := range []string{"name", "email", "phone", "transcript", "entity:account_id", "messages"} {
		if !slices.Contains(fields, f) {
			t.Errorf("the record of the supervisor's read lacks %s: %v", f, fields)
		}
	}
	mustGet(t, supervisor, app.URL+"/sidebar/"+id)
	var sidebarReads int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM pii_views WHERE user_id = $1 AND via = 'sidebar' AND handoff_ids = ARRAY[$2::bigint]`,
		sup.ID, rowID).Scan(&sidebarReads); err != nil || sidebarReads != 1 {
		t.Errorf("the supervisor's sidebar view: %d records (%v), want 1", sidebarReads, err)
	}

	// /approvals shows the supervisor the request beside the package's contact and its context,
	// unmasked, and records the read.
	var lastRead int64
	if err := app.DB.QueryRow(t.Context(), `SELECT coalesce(max(id), 0) FROM pii_views`).Scan(&lastRead); err != nil {
		t.Fatal(err)
	}
	approvalsPage := mustGet(t, supervisor, app.URL+"/approvals")
	for _, want := range []string{`data-handoff="` + id + `"`, grepName, requestNote} {
		if !strings.Contains(approvalsPage, want) {
			t.Errorf("the supervisor's /approvals lacks %q", want)
		}
	}
	var reads []string
	if err := app.DB.QueryRow(t.Context(), `
		SELECT coalesce(array_agg(via || ' ' || array_to_string(handoff_ids, ',') || ' ' || array_to_string(fields, ',') ORDER BY id), '{}')
		FROM pii_views WHERE user_id = $1 AND id > $2`, sup.ID, lastRead).Scan(&reads); err != nil {
		t.Fatal(err)
	}
	// The card's timeline holds the request's note, which names the customer: a read too.
	if want := "page " + strconv.FormatInt(rowID, 10) + " name,note"; !slices.Equal(reads, []string{want}) {
		t.Errorf("the supervisor's /approvals recorded %q, want one record %q", reads, want)
	}

	// The supervisor's decision note names the customer too; the agent sees it live and masked.
	approvalID := approvalIDOf(t, supervisor, app.URL, id)
	status, _, body = postForm(t, supervisor, app.URL+"/approvals/"+approvalID+"/approve", map[string][]string{"note": {"Called " + grepPhone + ", fine"}})
	if status != http.StatusSeeOther {
		t.Fatalf("approve: %d %s", status, body)
	}
	getAll("approved:")
	waitFrames("package", packageFrames, "approval-decision-note")
	grep("the package socket's frames after the decision", packageFrames.text())
	if page := mustGet(t, agent, app.URL+"/handoffs/"+id); !strings.Contains(page, `data-testid="approval-decision-note"`) {
		t.Error("the agent's package page lacks the decision's note")
	}
	t.Logf("grepped %d answers and frames", len(seen))
}

// A supervisor watching a queue is shown its cards unmasked in frames: each such frame is recorded
// once, naming the packages it showed.
func TestFramesShowingPIIAreRecorded(t *testing.T) {
	t.Parallel()
	app := setup(t)
	const q = "pii"
	key := app.botKey(t, "pii_bot", q)
	sup := app.user(t, "sup@example.com", auth.RoleSupervisor)
	supervisor := app.client(t)
	app.login(t, supervisor, "sup@example.com")
	socket, _ := app.dialed(t, supervisor, "queues="+q)
	pkg := grepPackage(t, q)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	if card := readUntil(t, socket, "card-"+id); !strings.Contains(card, grepName) {
		t.Fatalf("the supervisor's card masks the name:\n%s", card)
	}
	var via string
	var fields []string
	err := app.DB.QueryRow(t.Context(), `
		SELECT v.via, v.fields FROM pii_views v JOIN handoffs h ON h.id = ANY (v.handoff_ids)
		WHERE v.user_id = $1 AND h.handoff_id = $2`, sup.ID, id).Scan(&via, &fields)
	if err != nil {
		t.Fatalf("no record of the frame: %v", err)
	}
	if via != "frame" || !slices.Contains(fields, "name") {
		t.Errorf("the frame's record: via %s, fields %v", via, fields)
	}
}

func mustGet(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, body := get(t, c, u)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", u, resp.StatusCode, body)
	}
	return body
}

// frameLog is every frame a socket received, read in the background until the test ends.
type frameLog struct {
	ch     chan string
	frames []string
}

func collectFrames(t *testing.T, conn *websocket.Conn) *frameLog {
	t.Helper()
	l := &frameLog{ch: make(chan string, 1024)}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		defer close(l.ch)
		for ctx.Err() == nil {
			_, data, err := conn.ReadMessage()
			if err != nil {
				return
			}
			l.ch <- string(data)
		}
	}()
	return l
}

// text is every frame received so far.
func (l *frameLog) text() string {
	for {
		select {
		case f, ok := <-l.ch:
			if !ok {
				return strings.Join(l.frames, "\n")
			}
			l.frames = append(l.frames, f)
		default:
			return strings.Join(l.frames, "\n")
		}
	}
}

// A queue can withhold the transcript from roles below its PII role instead of masking it.
func TestQueueCanWithholdTheTranscript(t *testing.T) {
	t.Parallel()
	app := setup(t)
	const q = "withheld"
	key := app.botKey(t, "pii_bot", q)
	app.user(t, "agent@example.com", auth.RoleAgent, q)
	app.user(t, "sup@example.com", auth.RoleSupervisor)
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET withhold_transcript = true WHERE name = $1`, q); err != nil {
		t.Fatal(err)
	}
	agent, supervisor := app.client(t), app.client(t)
	app.login(t, agent, "agent@example.com")
	app.login(t, supervisor, "sup@example.com")
	pkg := grepPackage(t, q)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	for _, path := range []string{"/handoffs/", "/sidebar/"} {
		page := mustGet(t, agent, app.URL+path+id)
		if strings.Contains(page, "marmalade") || !strings.Contains(page, `data-testid="transcript-hidden"`) {
			t.Errorf("%s: the agent gets the transcript the queue withholds:\n%s", path, page)
		}
	}
	if page := mustGet(t, supervisor, app.URL+"/handoffs/"+id); !strings.Contains(page, grepTurn) {
		t.Error("the supervisor lacks the transcript")
	}
}
