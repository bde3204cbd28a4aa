// Package workday walks an agent's working day at the desk in headless Chromium, as a person does
// it: a warm package rings, the agent accepts it, notes something, asks a supervisor to approve the
// refund before telling the customer anything, the supervisor grants it in a session of their own,
// the agent edits the reply the desk suggests to tell the customer and sends it, and resolves the
// package as refunded, while "My work" in another tab follows every step live. The agent works
// either on the 1440 px package page or in the desk's 380 px sidebar framed by a CRM.
//
// The Chromium test (internal/server) walks it against a test desk and checks each page with
// axe-core; `make screenshots` (cmd/screenshots) walks it against the demo desk and photographs
// the pictures of docs/agents.md at its steps. Both see the day the same way, through Step.
package workday

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Desk is the desk a walk runs on and the people who work it.
type Desk struct {
	URL      string // the desk as the browser reaches it
	BotKey   string // a bot key of Queue, which sends the package
	Queue    string // warm, with a refund threshold below the package's refund
	Password string // the agent's and the supervisor's
	Agent    string // emails
	Super    string
	// AgentName is the agent's display name, whom the warm package must ring.
	AgentName string
	// CRM is the address of a CRM's page that frames the desk's sidebar of a package at 380 px
	// (Frame); Surface "frame" needs it.
	CRM func(handoffID string) string
	// Package is the package the bot sends: warm, for Queue, asking a refund that needs approval,
	// with a draft reply; its handoff_id and contact are its own.
	Package map[string]any
	// Wait bounds each wait for the page to show a step's result.
	Wait time.Duration
}

// Surface is where the agent works the package.
type Surface string

const (
	Page  Surface = "page"  // the package page at 1440 px
	Frame Surface = "frame" // the sidebar at 380 px, framed by a CRM's page on another origin
)

// Step is a moment of the day: its name, the top-level tab that shows it (a picture's subject), and
// the document that holds it (the tab's page, or the sidebar's frame inside it).
type Step struct {
	Name     string
	Tab      context.Context
	Document context.Context
}

// Browsers are the agent's and the supervisor's Chromium, one each (sessions of their own), with
// the viewport the walk needs set by the walk.
type Browsers struct {
	Agent, Super context.Context
}

// Walk walks the day on surface and calls at with each step once it shows; at's error stops the
// walk. It returns what went wrong first, in words that say what was expected.
func Walk(ctx context.Context, d Desk, surface Surface, b Browsers, at func(Step) error) error {
	w := &walk{d: d, at: at}
	defer func() {
		for _, cancel := range w.cancels {
			cancel()
		}
	}()
	id, _ := d.Package["handoff_id"].(string)
	w.id = id
	if d.Wait == 0 {
		w.d.Wait = 90 * time.Second
	}

	// The agent's desk: the queue page (where the ring shows), My work in a tab of its own.
	work := b.Agent
	if err := chromedp.Do(work, chromedp.EmulateViewport(1440, 900)); err != nil {
		return err
	}
	if err := w.login(work, d.Agent); err != nil {
		return err
	}
	mine, cancelMine := chromedp.NewContext(work)
	defer cancelMine()
	if err := chromedp.Do(mine, chromedp.EmulateViewport(1440, 900), chromedp.Navigate(d.URL+"/mine")); err != nil {
		return err
	}
	if err := w.until(mine, "My work, live", `document.body.dataset.live === "online" && !document.querySelector('#mine-`+id+`')`); err != nil {
		return err
	}
	if err := chromedp.Do(work, chromedp.Navigate(d.URL+"/queues/"+d.Queue)); err != nil {
		return err
	}
	if err := w.until(work, "the queue page, live", `document.body.dataset.live === "online"`); err != nil {
		return err
	}

	// The supervisor watches the approvals.
	sup := b.Super
	if err := chromedp.Do(sup, chromedp.EmulateViewport(1440, 900)); err != nil {
		return err
	}
	if err := w.login(sup, d.Super); err != nil {
		return err
	}
	if err := chromedp.Do(sup, chromedp.Navigate(d.URL+"/approvals")); err != nil {
		return err
	}
	if err := w.until(sup, "the approvals page, live", `document.body.dataset.live === "online"`); err != nil {
		return err
	}

	// A warm package rings the agent, who accepts it.
	if err := w.submit(ctx); err != nil {
		return err
	}
	ring := `#ring [data-testid="ring"][data-handoff="` + id + `"]`
	if err := w.until(work, "the ring", `!!document.querySelector('`+ring+`')`); err != nil {
		return err
	}
	if err := w.step("ring", work, work); err != nil {
		return err
	}
	if err := w.click(work, ring+` [data-ring-accept]`); err != nil {
		return err
	}
	if err := w.said(work, "You accepted the package", "/handoffs/"+id); err != nil {
		return err
	}
	if err := w.mineShows(mine, "accepted", ""); err != nil {
		return err
	}

	// Where the agent works it: the page, or the CRM's frame.
	doc, tab, here := work, work, "/handoffs/"+id
	if surface == Frame {
		crm, cancel := chromedp.NewContext(work)
		defer cancel()
		if err := chromedp.Do(crm, chromedp.EmulateViewport(1280, 720), chromedp.Navigate(d.CRM(id))); err != nil {
			return err
		}
		frame, err := w.frame(crm)
		if err != nil {
			return err
		}
		if err := w.signInFrame(crm, frame); err != nil {
			return err
		}
		doc, tab, here = frame, crm, "/sidebar/"+id
	}
	// The refund needs a supervisor: asking is the next step, before any reply promises it.
	if err := w.until(doc, "the package accepted, asking for approval its next step",
		primaryIs("Request approval")+` && !!document.querySelector('[data-testid="reply-awaiting"]')`); err != nil {
		return err
	}
	if err := w.step("accepted", tab, doc); err != nil {
		return err
	}

	// A note.
	if err := w.typeInto(doc, `[data-testid="note-text"]`, "Customer prefers email; the CRM ticket has the bank statement."); err != nil {
		return err
	}
	if err := w.click(doc, `[data-testid="add-note"]`); err != nil {
		return err
	}
	if err := w.said(doc, "Your note was added", here); err != nil {
		return err
	}
	if err := w.mineShows(mine, "accepted", "note"); err != nil {
		return err
	}
	if err := w.step("note", tab, doc); err != nil {
		return err
	}

	// The request for approval.
	if err := w.typeInto(doc, `[data-testid="request-approval-form"] input[name="note"]`, "Charged twice; full refund per goodwill policy 4.2."); err != nil {
		return err
	}
	if err := w.click(doc, `[data-testid="request-approval"]`); err != nil {
		return err
	}
	if err := w.said(doc, "You asked a supervisor to approve the refund", here); err != nil {
		return err
	}
	if err := w.mineShows(mine, "awaiting approval", ""); err != nil {
		return err
	}
	if err := w.step("requested", tab, doc); err != nil {
		return err
	}

	// The supervisor sees the request arrive, and grants it.
	card := `[data-testid="approval"][data-handoff="` + id + `"]`
	if err := w.until(sup, "the request on /approvals, live", `!!document.querySelector('`+card+`')`); err != nil {
		return err
	}
	if err := w.step("approvals", sup, sup); err != nil {
		return err
	}
	if err := w.typeInto(sup, card+` [data-testid="approve-form"] input[name="note"]`, "Within the goodwill policy."); err != nil {
		return err
	}
	if err := w.click(sup, card+` [data-testid="approve"]`); err != nil {
		return err
	}
	if err := w.said(sup, "You approved the refund", "/approvals"); err != nil {
		return err
	}

	// The agent sees the grant live, and the reply that tells the customer is next, suggested.
	if err := w.until(doc, "the grant, live, and the reply telling it the next step",
		`!!document.querySelector('[data-testid="approval-decision"][data-state="granted"]') && `+primaryIs("Send reply")+
			` && !!document.querySelector('[data-testid="reply-suggested"]') && document.querySelector("#reply-text").value.includes("approved")`); err != nil {
		return err
	}
	if err := w.mineShows(mine, "accepted", "approved"); err != nil {
		return err
	}
	if err := w.step("approved", tab, doc); err != nil {
		return err
	}

	// The suggested reply, edited, with why, sent.
	if err := w.typeInto(doc, `#reply-text`, " Thank you for your patience."); err != nil {
		return err
	}
	if err := w.until(doc, "the edit in the live diff", `!!document.querySelector("#reply-diff ins")`); err != nil {
		return err
	}
	if err := w.click(doc, `[data-testid="tag-missing_info"]`); err != nil {
		return err
	}
	if err := w.step("editing", tab, doc); err != nil {
		return err
	}
	if err := w.click(doc, `[data-testid="send-reply"]`); err != nil {
		return err
	}
	if err := w.said(doc, "Your reply is in the conversation", here); err != nil {
		return err
	}
	if err := w.mineShows(mine, "accepted", "reply"); err != nil {
		return err
	}

	// Resolving as refunded is next.
	if err := w.until(doc, "Resolve as refunded the next step",
		primaryIs("Resolve")+` && document.querySelector('[data-testid="resolve-form"] select').value === "refunded"`); err != nil {
		return err
	}
	if err := w.step("replied", tab, doc); err != nil {
		return err
	}
	if err := w.click(doc, `[data-testid="resolve"][data-primary]`); err != nil {
		return err
	}
	resolvedAt := "/queues/" + d.Queue
	if surface == Frame {
		resolvedAt = here
	}
	if err := w.said(doc, "You resolved the package", resolvedAt); err != nil {
		return err
	}
	if err := w.until(mine, "the package gone from My work, live", `!document.querySelector('#mine-`+id+`')`); err != nil {
		return err
	}
	if err := w.step("resolved", tab, doc); err != nil {
		return err
	}
	return w.step("mine", mine, mine)
}

type walk struct {
	d       Desk
	id      string
	at      func(Step) error
	cancels []context.CancelFunc // of the frames it attached to
}

func (w *walk) step(name string, tab, doc context.Context) error {
	if err := w.at(Step{Name: name, Tab: tab, Document: doc}); err != nil {
		return fmt.Errorf("at %s: %w", name, err)
	}
	return nil
}

// primaryIs is true when the document shows one primary button, reading want.
func primaryIs(want string) string {
	return `(() => { const p = [...document.querySelectorAll("[data-primary]")].filter(el => el.checkVisibility());
		return p.length === 1 && p[0].textContent.trim().startsWith(` + quote(want) + `) })()`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// until waits until js is true in the document, asking again across page loads: an action
// navigates, and a question asked while the next page loads is lost with the old one.
func (w *walk) until(doc context.Context, what, js string) error {
	deadline := time.Now().Add(w.d.Wait)
	for {
		ok, err := chromedp.Run(doc, chromedp.Evaluate[bool](`(() => { try { return !!(`+js+`) } catch (e) { return false } })()`))
		if err == nil && ok {
			return nil
		}
		if time.Now().After(deadline) {
			seen, _ := chromedp.Run(doc, chromedp.Evaluate[string](`location.pathname + ": " + (document.body ? document.body.innerText.slice(0, 600) : "")`))
			return fmt.Errorf("waiting for %s (%v); the page showed %q", what, err, seen)
		}
		select {
		case <-doc.Done():
			return doc.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// said waits until the document stands at path, a page address, and its live region says want.
func (w *walk) said(doc context.Context, want, path string) error {
	return w.until(doc, fmt.Sprintf("%s to say %q", path, want), `location.pathname === `+quote(path)+
		` && document.getElementById("announcer").textContent.includes(`+quote(want)+`)`)
}

// mineShows waits until My work lists the package with status and, if given, its last event
// speaks of last.
func (w *walk) mineShows(mine context.Context, status, last string) error {
	row := `#mine-` + w.id
	js := `document.querySelector('` + row + ` [data-testid="mine-status"]').textContent.trim() === ` + quote(status)
	if last != "" {
		js += ` && document.querySelector('` + row + ` [data-testid="mine-last"]').textContent.toLowerCase().includes(` + quote(last) + `)`
	}
	return w.until(mine, fmt.Sprintf("My work to show %s %s, live", status, last), js)
}

// click clicks what sel finds as a person does (the browser lets such a click open a popup).
func (w *walk) click(doc context.Context, sel string) error {
	if err := w.until(doc, sel+" to click", `document.querySelector(`+quote(sel)+`).checkVisibility()`); err != nil {
		return err
	}
	_, err := chromedp.Run(doc, chromedp.Evaluate[bool](`document.querySelector(`+quote(sel)+`).click(), true`,
		func(p *runtime.EvaluateParams) { gesture := true; p.UserGesture = &gesture }))
	return err
}

// typeInto types text at the end of the field sel finds, as a person's typing arrives.
func (w *walk) typeInto(doc context.Context, sel, text string) error {
	if err := w.until(doc, sel+" to type into", `document.querySelector(`+quote(sel)+`).checkVisibility()`); err != nil {
		return err
	}
	typed, err := chromedp.Run(doc, chromedp.Evaluate[bool](`(() => { const f = document.querySelector(`+quote(sel)+`);
		f.focus(); f.setSelectionRange(f.value.length, f.value.length);
		return document.execCommand("insertText", false, `+quote(text)+`) })()`))
	if err == nil && !typed {
		err = fmt.Errorf("%s took no text", sel)
	}
	return err
}

// login signs the browser in at the desk's login page.
func (w *walk) login(b context.Context, email string) error {
	return chromedp.Do(b,
		chromedp.Navigate(w.d.URL+"/login"),
		chromedp.WaitVisible(`[data-testid="login-form"]`),
		chromedp.SendKeys(`input[name="email"]`, email),
		chromedp.SendKeys(`input[name="password"]`, w.d.Password),
		chromedp.Submit(`[data-testid="login-form"]`),
		chromedp.WaitVisible(`[data-testid="my-queues"]`),
	)
}

// frame attaches to the CRM's frame of the desk. A frame of another site runs in a process of
// its own (an out-of-process iframe), which the CRM page's DOM does not reach; its own target
// does, and stays the frame's while the frame goes from one desk page to the next.
func (w *walk) frame(crm context.Context) (context.Context, error) {
	deadline := time.Now().Add(w.d.Wait)
	for {
		targets, err := chromedp.Targets(crm)
		if err != nil {
			return nil, err
		}
		for _, t := range targets {
			if t.Type == "iframe" && strings.HasPrefix(t.URL, w.d.URL) {
				frame, cancel := chromedp.NewContext(crm, chromedp.WithTargetID(t.TargetID))
				w.cancels = append(w.cancels, cancel)
				return frame, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no frame of %s in the CRM's page", w.d.URL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signInFrame signs the frame in when it asks: through the popup its Sign in opens, which hands
// the agent's sign-in over at once when the browser is signed in to the desk already, and asks
// for the password otherwise. A frame that shares the desk's cookies shows the package at once.
func (w *walk) signInFrame(crm, frame context.Context) error {
	if err := w.until(frame, "the frame's sign-in or the package", `!!document.querySelector('[data-testid="signin-popup"], [data-testid="handoff"]')`); err != nil {
		return err
	}
	asks, err := chromedp.Run(frame, chromedp.Evaluate[bool](`!!document.querySelector('[data-testid="signin-popup"]')`))
	if err != nil || !asks {
		return err
	}
	if err := w.step("frame sign-in", crm, frame); err != nil {
		return err
	}
	popups := chromedp.WaitNewTarget(crm, func(info *target.Info) bool { return info.Type == "page" })
	if err := w.click(frame, `[data-testid="signin-popup"]`); err != nil {
		return err
	}
	var popupID target.ID
	select {
	case popupID = <-popups:
	case <-time.After(w.d.Wait):
		return errors.New("the frame's Sign in opened no popup")
	}
	popup, cancel := chromedp.NewContext(crm, chromedp.WithTargetID(popupID))
	defer cancel()
	// Signed in already, the popup hands over and closes at once; otherwise it asks.
	if form, err := chromedp.Run(popup, chromedp.Evaluate[bool](`!!document.querySelector('[data-testid="login-form"]')`)); err == nil && form {
		if err := chromedp.Do(popup,
			chromedp.SendKeys(`input[name="email"]`, w.d.Agent),
			chromedp.SendKeys(`input[name="password"]`, w.d.Password),
			chromedp.Submit(`[data-testid="login-form"]`)); err != nil {
			return fmt.Errorf("sign in in the popup: %w", err)
		}
	}
	return w.said(frame, "You are logged in", "/sidebar/"+w.id)
}

// submit sends the package as the bot, for the walk's agent first (preferred_agent), as a bot
// that knows who took the customer before: whoever else of the queue is online, a supervisor
// watching approvals among them, is not rung before them.
func (w *walk) submit(ctx context.Context) error {
	pkg := maps.Clone(w.d.Package)
	pkg["preferred_agent"] = w.d.Agent
	body, err := json.Marshal(pkg)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.d.URL+"/api/v1/handoffs", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+w.d.BotKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }() // the status says how it went
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("the bot's package: %d %s", resp.StatusCode, answer)
	}
	var got struct {
		OfferedTo string `json:"offered_to"`
	}
	if err := json.Unmarshal(answer, &got); err != nil || got.OfferedTo != w.d.AgentName {
		return fmt.Errorf("the warm package does not ring %s: %s", w.d.AgentName, answer)
	}
	return nil
}
