package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/evals"
	"github.com/handoffdesk/desk/internal/server"
	"github.com/handoffdesk/desk/internal/webhook"
)

// postForm posts a form with a client and returns the status, the redirect and the body.
func postForm(t *testing.T, c *http.Client, u string, form url.Values) (int, string, string) {
	t.Helper()
	resp, err := c.PostForm(u, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(body)
}

// A reply is a form post on the package: what the desk refuses is a 422 that names the field, a
// package the agent did not accept is not theirs to answer, and a reply sent shows on the page.
func TestReplyForm(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "eli@example.com", auth.RoleAgent, "billing_t2")
	dana, eli := app.client(t), app.client(t)
	app.login(t, dana, "dana@example.com")
	app.login(t, eli, "eli@example.com")
	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	reply := app.URL + "/handoffs/" + id + "/reply"

	if status, _, _ := postForm(t, dana, reply, url.Values{"text": {"Hello"}}); status != http.StatusConflict {
		t.Errorf("reply before accepting: %d, want 409", status)
	}
	if status, _, _ := postForm(t, dana, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d", status)
	}
	for _, tc := range []struct {
		form  url.Values
		field string
	}{
		{url.Values{"text": {"  "}}, "text"},
		{url.Values{}, "text"},
		{url.Values{"text": {strings.Repeat("x", evals.MaxReplyChars+1)}}, "text"},
		{url.Values{"text": {"Hello"}, "tags": {"tone", "rude"}}, "tag &#34;rude&#34;"},
		{url.Values{"text": {"Hello"}, "editing_ms": {"-1"}}, "editing_ms"},
	} {
		status, _, body := postForm(t, dana, reply, tc.form)
		if status != http.StatusUnprocessableEntity || !strings.Contains(body, tc.field) {
			t.Errorf("reply %.40v: %d, want 422 naming %s", tc.form, status, tc.field)
		}
	}
	if status, _, _ := postForm(t, eli, reply, url.Values{"text": {"Hello"}}); status != http.StatusForbidden {
		t.Errorf("a colleague's reply: %d, want 403", status)
	}
	var n int
	if err := app.DB.QueryRow(t.Context(), `SELECT count(*) FROM evals`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("refused replies left %d records (%v)", n, err)
	}

	final := "Hi Dana, the duplicate charge is reversed."
	status, location, _ := postForm(t, dana, reply, url.Values{"text": {final}, "tags": {"too_long"}, "editing_ms": {"12000"}})
	if status != http.StatusSeeOther || location != "/handoffs/"+id {
		t.Fatalf("reply: %d to %q, want 303 to the package", status, location)
	}
	var stored string
	var tags []string
	var ms int
	if err := app.DB.QueryRow(t.Context(), `SELECT final, tags, editing_ms FROM evals WHERE kind = 'reply'`).Scan(&stored, &tags, &ms); err != nil {
		t.Fatal(err)
	}
	if stored != final || fmt.Sprint(tags) != "[too_long]" || ms != 12000 {
		t.Errorf("stored %q, tags %v, %d ms", stored, tags, ms)
	}
	resp, err := dana.Get(app.URL + "/handoffs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `data-testid="reply-editor"`) {
		t.Errorf("the package page no longer offers Dana the editor for another reply")
	}
	resp, err = dana.Get(app.URL + "/sidebar/" + id)
	if err != nil {
		t.Fatal(err)
	}
	sidebar, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(sidebar), `data-testid="reply-editor"`) || !strings.Contains(string(sidebar), `data-testid="reply-final"`) {
		t.Errorf("the sidebar lacks the editor or the reply sent")
	}
	// Dana's role sees the contact masked: the name she typed is her guess, and her reply reads
	// back as she typed it, as a wrong guess would (TestSentReplyConfirmsNoGuess); a supervisor
	// sees it as sent.
	if !strings.Contains(string(page), `data-testid="reply-final">`+final) || !strings.Contains(string(page), "edited the draft") {
		t.Errorf("the package page does not list the reply sent, as Dana typed it")
	}
	sam := app.client(t)
	app.user(t, "sam@example.com", auth.RoleSupervisor, "billing_t2")
	app.login(t, sam, "sam@example.com")
	resp, err = sam.Get(app.URL + "/handoffs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), `data-testid="reply-final">`+final) {
		t.Errorf("the supervisor does not see the reply as sent")
	}
	resp, err = eli.Get(app.URL + "/handoffs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(page), `data-testid="reply-editor"`) {
		t.Errorf("a colleague is offered the editor on a package Dana accepted")
	}
	// The longest reply allowed fits in a form whatever its script: 10,000 four-byte characters
	// are 120,000 bytes once percent-encoded.
	if status, _, body := postForm(t, dana, reply, url.Values{"text": {strings.Repeat("🙂", evals.MaxReplyChars)}}); status != http.StatusSeeOther {
		t.Errorf("a reply of %d emoji: %d, want 303\n%.300s", evals.MaxReplyChars, status, body)
	}
}

// receiver is a bot's webhook endpoint on 127.0.0.1 that hands each delivery's body to the test.
func receiver(t *testing.T) (string, <-chan []byte) {
	t.Helper()
	got := make(chan []byte, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- body
	}))
	t.Cleanup(srv.Close)
	return srv.URL, got
}

// The co-pilot editor in Chromium: accept, E focuses the editor, the edit shows as a live word
// diff, Ctrl+Enter sends; the stored record holds exactly the diff the page showed, and the bot's
// receiver gets the final text.
func TestBrowserEditsTheDraftAndSends(t *testing.T) {
	t.Parallel()
	// Agents see this queue's contact details, so the editor holds the draft as the bot wrote it.
	app, hooks, id, draft := harborForAgent(t, "dana@example.com", "agent")
	final := strings.Replace(draft, "now;", "today;", 1) + " Sorry for the trouble."

	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "dana@example.com")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(app.URL+"/handoffs/"+id),
		chromedp.Click(`[data-testid="accept"]`),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
		pressE(),
	); err != nil {
		t.Fatalf("accept and open the editor: %v", err)
	}
	if got := evalString(t, ctx, `document.activeElement.id`); got != "reply-text" {
		t.Fatalf("after E the focus is on %q, want the editor", got)
	}
	if got := evalString(t, ctx, `document.getElementById("reply-text").value`); got != draft {
		t.Fatalf("the editor holds %q, want the draft", got)
	}
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](`document.getElementById("reply-text").value = ""`),
		chromedp.SendKeys(`#reply-text`, final),
	); err != nil {
		t.Fatalf("edit the draft: %v", err)
	}
	// The keys arrive one by one and the diff follows a frame later: read it only once it shows
	// the whole text.
	waitForJS(t, ctx, "the diff of the whole text", `(() => {
		const d = document.getElementById("reply-diff");
		const text = [...d.childNodes].filter(n => n.nodeType === Node.TEXT_NODE || n.tagName === "INS")
			.map(n => n.nodeType === Node.TEXT_NODE ? n.textContent : n.textContent.slice(n.querySelector(".sr-only").textContent.length)).join("");
		return document.getElementById("reply-text").value === `+jsString(final)+` && text === `+jsString(final)+`;
	})()`, `document.getElementById("reply-diff").textContent`)
	if err := chromedp.Do(ctx,
		chromedp.Click(`[data-testid="tag-policy"]`),
		chromedp.Focus(`#reply-text`),
	); err != nil {
		t.Fatalf("tag the change: %v", err)
	}
	// The diff as the page shows it: text outside ins and del is kept, and the words a screen
	// reader says before each change are left out.
	shown := evalString(t, ctx, `JSON.stringify([...document.getElementById("reply-diff").childNodes].map(n => {
		if (n.nodeType === Node.TEXT_NODE) return {op: "equal", text: n.textContent};
		const said = n.querySelector(".sr-only");
		return {op: n.tagName === "INS" ? "insert" : "delete", text: n.textContent.slice(said.textContent.length), said: said.textContent};
	}))`)
	var page []struct{ Op, Text, Said string }
	if err := json.Unmarshal([]byte(shown), &page); err != nil {
		t.Fatal(err)
	}
	want := evals.Compare(draft, final).Words
	if len(page) != len(want) {
		t.Fatalf("the page shows the diff %+v, want %+v", page, want)
	}
	for i, s := range page {
		if s.Op != string(want[i].Op) || s.Text != want[i].Text || (s.Op != "equal" && strings.TrimSpace(s.Said) == "") {
			t.Errorf("shown segment %d = %+v, want %+v announced", i, s, want[i])
		}
	}
	if err := chromedp.Do(ctx,
		chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.WaitVisible(`[data-testid="reply-final"]`),
	); err != nil {
		t.Fatalf("send with Ctrl+Enter: %v", err)
	}
	if got := evalString(t, ctx, `document.querySelector('[data-testid="reply-final"]').textContent`); got != final {
		t.Errorf("the page lists the reply %q, want %q", got, final)
	}

	var stored []evals.Segment
	var storedFinal string
	var tags []string
	var ms int
	if err := app.DB.QueryRow(t.Context(), `SELECT word_diff, final, tags, editing_ms FROM evals WHERE kind = 'reply'`).
		Scan(&stored, &storedFinal, &tags, &ms); err != nil {
		t.Fatal(err)
	}
	if storedFinal != final || fmt.Sprint(tags) != "[policy]" || ms <= 0 {
		t.Errorf("stored final %q, tags %v, editing %d ms; want the text sent, [policy] and the time the page measured", storedFinal, tags, ms)
	}
	if len(stored) != len(page) {
		t.Fatalf("stored diff %+v, the page showed %+v", stored, page)
	}
	for i := range stored {
		if string(stored[i].Op) != page[i].Op || stored[i].Text != page[i].Text {
			t.Errorf("stored segment %d = %+v, the page showed %+v", i, stored[i], page[i])
		}
	}
	// The export, as a trainer would take it, holds exactly the diff the agent saw.
	app.user(t, "ada@example.com", auth.RoleAdmin)
	ada := app.client(t)
	app.login(t, ada, "ada@example.com")
	resp, body := get(t, ada, app.URL+"/evals/export.jsonl?kind=reply")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("export: %d\n%.300s", resp.StatusCode, body)
	}
	var exported struct {
		Final    string          `json:"final"`
		WordDiff []evals.Segment `json:"word_diff"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSpace(body)), &exported); err != nil {
		t.Fatalf("export is not one record: %v\n%.300s", err, body)
	}
	if exported.Final != final || fmt.Sprint(exported.WordDiff) != fmt.Sprint(stored) {
		t.Errorf("exported %q with diff %+v, want %q with the diff the page showed %+v", exported.Final, exported.WordDiff, final, stored)
	}

	if got := waitForReplyHook(t, hooks, id); got != final {
		t.Errorf("the bot's receiver got %q, want %q", got, final)
	}
}

// harborForAgent is a desk whose bot key delivers to a receiver on loopback, an agent of
// billing_t2 (whose contacts the queue shows from piiMinRole up), and the Harbor package waiting
// there: the deliveries, the package's id and its draft.
func harborForAgent(t *testing.T, email, piiMinRole string) (*testApp, <-chan []byte, string, string) {
	t.Helper()
	app := setupHooks(t, server.Config{}, webhook.Options{AllowPrivate: true, PollInterval: 50 * time.Millisecond})
	hookURL, hooks := receiver(t)
	app.user(t, email, auth.RoleAgent, "billing_t2")
	queue, err := app.Queues.ByName(t.Context(), "billing_t2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.DB.Exec(t.Context(), `UPDATE queues SET pii_min_role = $2 WHERE id = $1`, queue.ID, piiMinRole); err != nil {
		t.Fatal(err)
	}
	k, err := app.Auth.CreateAPIKey(t.Context(), auth.NewAPIKey{Name: "tier1", QueueIDs: []int64{queue.ID}, WebhookURL: hookURL, AllowPrivateWebhook: true})
	if err != nil {
		t.Fatal(err)
	}
	pkg := harbor(t, nil)
	expect(t, "submit", app.submit(t, k.Key, pkg), http.StatusCreated)
	return app, hooks, pkg["handoff_id"].(string), pkg["draft_reply"].(string)
}

// waitForReplyHook waits for the reply webhook of package id among the deliveries and returns
// its text.
func waitForReplyHook(t *testing.T, hooks <-chan []byte, id string) string {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	var seen []string
	for {
		select {
		case body := <-hooks:
			var hook struct {
				Event, Text string
				HandoffID   string `json:"handoff_id"`
			}
			if err := json.Unmarshal(body, &hook); err != nil {
				t.Fatal(err)
			}
			seen = append(seen, hook.Event)
			if hook.Event == "reply" && hook.HandoffID == id {
				return hook.Text
			}
		case <-deadline:
			t.Fatalf("the bot's receiver never got the reply webhook of %s; it got %v", id, seen)
		}
	}
}

// waitForJS waits until the expression js is true on the page, and fails naming what for and
// what the expression last showed when it is not.
func waitForJS(t *testing.T, ctx context.Context, what, js, show string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](js, pollEvery, chromedp.WithPollingTimeout(waitDeadline))); err != nil {
		last, _ := chromedp.Run(ctx, chromedp.Evaluate[string](show))
		t.Fatalf("waiting for %s: %v; last seen: %q", what, err, last)
	}
}

// jsString is s as a JavaScript string literal.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// insertText types text where the caret is, as an input method does: one beforeinput and one
// input event, which the composer's token handling sees.
func insertText(text string) chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: text})
		return err
	})
}

// The co-pilot editor for an agent who sees the contact masked, in Chromium: the draft holds a
// token, typing inside it types after it, a token inserted from the list and then Backspace
// removes it whole, and the bot's receiver gets exactly the text the agent meant, the token
// filled with the customer's name.
func TestBrowserMaskedAgentEditsAroundATokenAndSends(t *testing.T) {
	t.Parallel()
	app, hooks, id, draft := harborForAgent(t, "bea@example.com", "supervisor")
	shown := strings.Replace(draft, "Dana", "⟦first name⟧", 1)

	ctx := browser(t)
	browserLogin(t, ctx, app.URL, "bea@example.com")
	if err := chromedp.Do(ctx,
		chromedp.Navigate(app.URL+"/handoffs/"+id),
		chromedp.Click(`[data-testid="accept"]`),
		chromedp.WaitVisible(`[data-testid="reply-editor"]`),
		pressE(),
	); err != nil {
		t.Fatalf("accept and open the editor: %v", err)
	}
	if got := evalString(t, ctx, `document.getElementById("reply-text").value`); got != shown {
		t.Fatalf("the editor holds %q, want %q", got, shown)
	}
	// Inside the token, after "Hi ⟦first": the words go after the token, never into it.
	inside := len([]rune("Hi ⟦first"))
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById("reply-text").setSelectionRange(%d, %d)`, inside, inside)),
		insertText(" and welcome back"),
	); err != nil {
		t.Fatalf("type inside the token: %v", err)
	}
	edited := strings.Replace(shown, "⟦first name⟧", "⟦first name⟧ and welcome back", 1)
	waitForJS(t, ctx, "the words typed after the token", `document.getElementById("reply-text").value === `+jsString(edited),
		`document.getElementById("reply-text").value`)
	end := len([]rune(edited))
	if err := chromedp.Do(ctx,
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById("reply-text").setSelectionRange(%d, %d)`, end, end)),
		insertText(" Call "),
		chromedp.Click(`[data-insert-token="⟦phone⟧"]`),
		chromedp.KeyEvent("\b"),
		insertText("us back; a receipt goes to "),
		chromedp.Click(`[data-insert-token="⟦email⟧"]`),
		insertText("."),
	); err != nil {
		t.Fatalf("insert and delete tokens: %v", err)
	}
	typed := edited + " Call us back; a receipt goes to ⟦email⟧."
	waitForJS(t, ctx, "the phone token deleted whole and the email token kept", `document.getElementById("reply-text").value === `+jsString(typed),
		`document.getElementById("reply-text").value`)
	waitForJS(t, ctx, "the preview with both tokens marked", `[...document.querySelectorAll("#reply-preview mark")].map(m => m.textContent).join() === "⟦first name⟧,⟦email⟧"`+
		` && !document.querySelector("[data-testid=reply-damaged]")`, `document.getElementById("reply-preview").innerHTML`)

	if err := chromedp.Do(ctx,
		chromedp.Focus(`#reply-text`),
		chromedp.KeyEvent("\r", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.WaitVisible(`[data-testid="reply-final"]`),
	); err != nil {
		t.Fatalf("send with Ctrl+Enter: %v", err)
	}
	waitForJS(t, ctx, "the notice that the reply was sent", `document.getElementById("reply-status").textContent.startsWith("Your reply is in the conversation")`,
		`document.getElementById("reply-status").outerHTML`)
	if got := evalString(t, ctx, `document.getElementById("reply-text").value + "|" + document.querySelector('[data-testid="reply-final"]').textContent`); got != "|"+typed {
		t.Errorf("after sending, composer|first reply listed = %q, want an empty composer and %q", got, typed)
	}
	want := strings.Replace(draft, "Dana", "Dana and welcome back", 1) + " Call us back; a receipt goes to dana.whitfield@example.com."
	if got := waitForReplyHook(t, hooks, id); got != want {
		t.Errorf("the bot's receiver got\n%q\nwant\n%q", got, want)
	}
}

// pressE presses E as a keyboard does: one keyDown that carries its text, which the page's
// handler may prevent from typing (chromedp.KeyEvent sends the text as a separate char event,
// which no handler can prevent).
func pressE() chromedp.Action[chromedp.Void] {
	return chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		for _, p := range []input.DispatchKeyEventParams{
			{Type: input.DispatchKeyEventTypeKeyDown, Key: "e", Code: "KeyE", Text: "e", WindowsVirtualKeyCode: 69},
			{Type: input.DispatchKeyEventTypeKeyUp, Key: "e", Code: "KeyE", WindowsVirtualKeyCode: 69},
		} {
			if _, err := cdp.Call(ctx, t, input.DispatchKeyEvent, p); err != nil {
				return err
			}
		}
		return nil
	})
}

func evalString(t *testing.T, ctx context.Context, js string) string {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("%s: %v", js, err)
	}
	return got
}

// An agent who sees the contact masked gets the draft with tokens, none of the contact's values;
// a damaged token is a 422 naming it with the text kept in the composer; the reply sent fills
// the tokens exactly, the page says it was sent, lists it first, and empties the composer.
func TestReplyWithTokensOverHTTP(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	bea := app.client(t)
	app.login(t, bea, "bea@example.com")
	pkg := harbor(t, nil)
	id := pkg["handoff_id"].(string)
	draft := pkg["draft_reply"].(string)
	expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
	if status, _, _ := postForm(t, bea, app.URL+"/handoffs/"+id+"/accept", nil); status != http.StatusSeeOther {
		t.Fatalf("accept: %d", status)
	}
	_, page := get(t, bea, app.URL+"/handoffs/"+id)
	shown := "Hi ⟦first name⟧, I can see two charges of $49.99 on June 1. I&#39;m reversing the duplicate now; you&#39;ll see it on your statement in 3-5 business days."
	if !strings.Contains(page, `">`+shown+`</textarea>`) || strings.Contains(page, "Dana") {
		t.Fatalf("the composer does not hold the draft with a token, or the page names Dana:\n%s", excerpt(page, "reply-text", "Dana"))
	}

	reply := app.URL + "/handoffs/" + id + "/reply"
	typed := "Hi ⟦first nme⟧, the duplicate is reversed."
	status, _, body := postForm(t, bea, reply, url.Values{"text": {typed}})
	if status != http.StatusUnprocessableEntity || !strings.Contains(body, "⟦first nme⟧") || !strings.Contains(body, `">`+typed+`</textarea>`) {
		t.Fatalf("a damaged token: %d, want 422 naming it with the text kept\n%s", status, excerpt(body, "reply-error", "</textarea>"))
	}

	first := strings.Replace(strings.ReplaceAll(shown, "&#39;", "'"), "now;", "today;", 1)
	status, location, _ := postForm(t, bea, reply, url.Values{"text": {first}})
	if status != http.StatusSeeOther || location != "/handoffs/"+id {
		t.Fatalf("reply: %d to %q", status, location)
	}
	_, page = get(t, bea, app.URL+"/handoffs/"+id)
	if !strings.Contains(page, `data-announce="Your reply is in the conversation`) || !strings.Contains(page, `"></textarea>`) ||
		!strings.Contains(page, `data-testid="start-draft"`) {
		t.Errorf("after sending, the page does not announce it, or the composer is not empty with the draft a click away:\n%s", excerpt(page, "reply-status", "</textarea>"))
	}
	if _, again := get(t, bea, app.URL+"/handoffs/"+id); strings.Contains(again, `data-announce="Your reply`) {
		t.Errorf("the notice is announced again on the next visit")
	}
	if status, _, _ := postForm(t, bea, reply, url.Values{"text": {"And ⟦email⟧ has the receipt."}}); status != http.StatusSeeOther {
		t.Fatalf("second reply: %d", status)
	}
	_, page = get(t, bea, app.URL+"/handoffs/"+id)
	page = page[strings.Index(page, `data-testid="thread-messages"`):]
	if second, firstAt := strings.Index(page, "And ⟦email⟧ has the receipt."), strings.Index(page, "Hi ⟦first name⟧, I can see"); second < 0 || firstAt < 0 || second < firstAt {
		t.Errorf("the replies are not in the conversation oldest first with their tokens (at %d and %d)", second, firstAt)
	}

	rows, err := app.DB.Query(t.Context(), `SELECT payload->>'text' FROM webhook_outbox
		WHERE payload->>'handoff_id' = $1 AND event = 'reply' ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		sent = append(sent, s)
	}
	want := []string{strings.Replace(draft, "now;", "today;", 1), "And dana.whitfield@example.com has the receipt."}
	if fmt.Sprint(sent) != fmt.Sprint(want) {
		t.Errorf("the bot is sent %q, want %q", sent, want)
	}
}

// excerpt is what a page holds around each of marks, for a failure message.
func excerpt(page string, marks ...string) string {
	var b strings.Builder
	for _, m := range marks {
		if i := strings.Index(page, m); i >= 0 {
			fmt.Fprintf(&b, "…%s…\n", page[max(0, i-150):min(len(page), i+350)])
		} else {
			fmt.Fprintf(&b, "(no %q)\n", m)
		}
	}
	return b.String()
}
