package main

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"net"
	"net/http"
	"regexp"
	"slices"
	"time"
)

// handoffID is what a handoff_id may be (the package schema's rule).
var handoffID = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,128}$`)

// The demo CRM: `make run` shows the sidebar where it is meant to be, framed beside a ticket in
// a CRM's page, served on a second loopback origin (serve -demo-crm) that FRAME_ANCESTORS names.
// It is a page of a few lines, not a CRM: tickets whose packages seed-demo made, and the desk's
// sidebar of the one chosen, in an iframe as a CRM embeds it.

// demoTicket is a ticket of the CRM: a customer, what they wrote about, and the desk's package of it.
type demoTicket struct{ Handoff, Customer, Subject string }

// demoTickets are the CRM's tickets, each the package of one of seed-demo's customers.
var demoTickets = []demoTicket{
	{"ho_demo_refund_queued", "Maya Ortiz", "Billed for a year's plan after cancelling in the trial"},
	{"ho_demo_refund_pending", "Noor Haddad", "Order 7730 arrived broken twice"},
	{"ho_demo_reply_edited", "Sam Patel", "Charged twice for the June plan"},
}

var demoCRMPage = template.Must(template.New("crm").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Demo CRM · {{.Ticket.Customer}}</title>
<style>
body { margin: 0; font: 14px/1.4 system-ui, sans-serif; color: #1e293b; display: grid; grid-template-columns: 15rem 1fr 380px; height: 100vh; }
nav { background: #0f172a; color: #e2e8f0; padding: 1rem; }
nav a { display: block; color: #cbd5e1; padding: .4rem .5rem; border-radius: .25rem; text-decoration: none; }
nav a[aria-current] { background: #334155; color: #fff; }
main { padding: 1.5rem; overflow: auto; }
iframe { border: 0; border-left: 1px solid #e2e8f0; width: 380px; height: 100vh; }
.note { color: #64748b; }
</style>
</head>
<body>
<nav aria-label="Tickets">
<p><strong>Demo CRM</strong></p>
{{range .Tickets}}<a href="?ticket={{.Handoff}}"{{if eq .Handoff $.Ticket.Handoff}} aria-current="page"{{end}}>{{.Customer}}</a>
{{end}}</nav>
<main>
<h1>{{.Ticket.Customer}}</h1>
<p>{{.Ticket.Subject}}</p>
<p class="note">This page stands for your CRM, on another origin than the desk. The panel on the
right is Handoff Desk's sidebar of the customer's handoff ({{.Ticket.Handoff}}), framed as a CRM
embeds it: the origin of this page is in the desk's FRAME_ANCESTORS. Sign in there with a demo
user (password handoff-demo); the sign-in opens in a small window.</p>
</main>
<iframe title="Handoff Desk" src="{{.Sidebar}}"></iframe>
</body>
</html>
`))

// demoCRM is the CRM's page: its tickets, the one chosen (?ticket=, the first by default) and the
// desk at deskURL's sidebar of that ticket's package. A package the list does not have, a bot's
// under development or make screenshots', is framed as a ticket of its own.
func demoCRM(deskURL string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		asked := r.URL.Query().Get("ticket")
		ticket := demoTickets[0]
		if i := slices.IndexFunc(demoTickets, func(t demoTicket) bool { return t.Handoff == asked }); i >= 0 {
			ticket = demoTickets[i]
		} else if handoffID.MatchString(asked) {
			ticket = demoTicket{Handoff: asked, Customer: "Ticket " + asked, Subject: "A customer's ticket, escalated by a bot."}
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_ = demoCRMPage.Execute(w, map[string]any{"Tickets": demoTickets, "Ticket": ticket, "Sidebar": deskURL + "/sidebar/" + ticket.Handoff})
	})
}

// demoCRMOrigin checks the demo CRM's address, a loopback host and port, and that the desk lets
// its origin frame the sidebar, and returns that origin.
func demoCRMOrigin(addr string, frameAncestors []string) (string, error) {
	if err := loopback("-demo-crm", addr, "127.0.0.1:8081"); err != nil {
		return "", err
	}
	origin := "http://" + addr
	if !slices.Contains(frameAncestors, origin) {
		return "", fmt.Errorf("-demo-crm: FRAME_ANCESTORS must name %s, or the desk refuses to be framed by the demo CRM", origin)
	}
	return origin, nil
}

// loopback checks that a demo's address (of flag, such as example) is a loopback host and port:
// the demos are for a desk on this machine.
func loopback(flag, addr, example string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" {
		return fmt.Errorf("%s: %q is not a host and port such as %s", flag, addr, example)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%s: %q is not a loopback address: the demo is for a desk on this machine", flag, addr)
	}
	return nil
}

// serveDemoCRM serves the demo CRM on ln until ctx ends.
func serveDemoCRM(ctx context.Context, ln net.Listener, deskURL string) error {
	srv := &http.Server{Handler: demoCRM(deskURL), ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
