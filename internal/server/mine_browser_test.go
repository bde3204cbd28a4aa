package server_test

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoffdesk/desk/internal/auth"
)

// In Chromium: Dana's "My work" in one session shows the package she accepts in another, and
// counts it in the top bar, without a reload; the package's timeline shows a supervisor's note
// live; her own note lands on the timeline with a confirmation; J/K and Enter work on "My work".
func TestBrowserMineAndTimelineLive(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	app.user(t, "dana@example.com", auth.RoleAgent, "billing_t2")
	app.user(t, "sam@example.com", auth.RoleSupervisor)
	sam := app.client(t)
	app.login(t, sam, "sam@example.com")
	var ids []string
	for range 2 {
		pkg := harborFor(t, "billing_t2").(map[string]any)
		pkg["transfer_mode"] = "cold"
		expect(t, "submit", app.submit(t, key, pkg), http.StatusCreated)
		ids = append(ids, pkg["handoff_id"].(string))
	}

	watching, working := browser(t), browser(t)
	browserLogin(t, watching, app.URL, "dana@example.com")
	browserLogin(t, working, app.URL, "dana@example.com")
	if err := chromedp.Do(watching,
		chromedp.Navigate(app.URL+"/mine"),
		chromedp.WaitVisible(`[data-testid="mine-empty"]`),
		chromedp.WaitReady(`body[data-live="online"]`),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`),
	); err != nil {
		t.Fatalf("open /mine: %v", err)
	}
	for i, id := range ids {
		if err := chromedp.Do(working, chromedp.Navigate(app.URL+"/handoffs/"+id), chromedp.Click(`[data-testid="accept"]`),
			chromedp.WaitVisible(`[data-testid="reply-editor"]`)); err != nil {
			t.Fatalf("accept %s in the other session: %v", id, err)
		}
		waitForJS(t, watching, "the accepted package on /mine, counted, without a reload",
			`window.sameDocument && !!document.getElementById("mine-`+id+`") &&
				document.getElementById("mine-count").textContent.trim() === "`+strconv.Itoa(i+1)+`" &&
				document.getElementById("empty").classList.contains("hidden")`,
			`document.getElementById("cards").innerText + " / " + document.getElementById("mine-count").textContent`)
	}
	if got := text(t, watching, `#mine-`+ids[0]+` [data-testid="mine-last"]`); !strings.HasPrefix(got, "Last: Accepted by dana") {
		t.Errorf("the row's last thing that happened reads %q", got)
	}
	// J moves to the second row, Enter opens it.
	if err := chromedp.Do(watching, chromedp.Focus(`#mine-`+ids[0]), chromedp.KeyEvent("j"), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(`[data-testid="timeline"]`)); err != nil {
		t.Fatalf("J and Enter on /mine: %v", err)
	}
	if got := evalString(t, watching, `location.pathname`); got != "/handoffs/"+ids[1] {
		t.Errorf("J, Enter opened %s, want the second row's package", got)
	}
	if err := chromedp.Do(watching,
		chromedp.WaitReady(`body[data-live="online"]`),
		chromedp.Evaluate[chromedp.Void](`window.sameDocument = true`),
	); err != nil {
		t.Fatal(err)
	}

	if status, _, body := postForm(t, sam, app.URL+"/handoffs/"+ids[1]+"/notes", url.Values{"text": {"Called the bank: the second charge is a hold."}}); status != http.StatusSeeOther {
		t.Fatalf("the supervisor's note: %d\n%.300s", status, body)
	}
	waitForJS(t, watching, "the supervisor's note on the timeline, without a reload",
		`window.sameDocument && document.getElementById("timeline-lines-`+ids[1]+`").innerText.includes("Note by sam: Called the bank: the second charge is a hold.")`,
		`document.getElementById("timeline-lines-`+ids[1]+`").innerText`)

	if err := chromedp.Do(watching,
		chromedp.SendKeys(`[data-testid="note-text"]`, "Customer prefers email."),
		chromedp.Click(`[data-testid="add-note"]`),
		chromedp.WaitVisible(`[data-testid="timeline-status"]`),
	); err != nil {
		t.Fatalf("add a note: %v", err)
	}
	if got := text(t, watching, `[data-testid="timeline-status"]`); got != "Your note was added to the timeline. Only the desk sees it." {
		t.Errorf("the confirmation reads %q", got)
	}
	if got := text(t, watching, `[data-testid="timeline-line"]`); !strings.Contains(got, "Note by dana: Customer prefers email.") {
		t.Errorf("the newest line reads %q, want Dana's note", got)
	}
}
