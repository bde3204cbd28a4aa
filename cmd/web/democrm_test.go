package main

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// `make run`'s demo CRM: serve -demo-crm serves, on a second loopback origin, a page that frames
// the sidebar of a seeded package, and the desk lets that origin frame it (FRAME_ANCESTORS).
func TestServeFramesTheSidebarInTheDemoCRM(t *testing.T) {
	t.Parallel()
	// A free port for the CRM, which FRAME_ANCESTORS must name before serve starts.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	crmAddr := ln.Addr().String()
	ln.Close()
	getenv := env(t, "FRAME_ANCESTORS", "http://"+crmAddr)
	if out, err := runCommand(t, getenv, "seed-demo"); err != nil {
		t.Fatalf("seed-demo: %v\n%s", err, out)
	}
	out := &syncBuffer{}
	base, _ := startServeTo(t, getenv, out, "-demo-crm", crmAddr)
	if !strings.Contains(out.String(), "url=http://"+crmAddr) {
		t.Errorf("serve does not print the demo CRM's address:\n%s", out)
	}

	resp, err := http.Get("http://" + crmAddr + "/?ticket=ho_demo_refund_pending")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	// The desk's BASE_URL, which the CRM frames, is http://localhost:<its port> by default.
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	if want := `<iframe title="Handoff Desk" src="http://localhost:` + port + `/sidebar/ho_demo_refund_pending">`; resp.StatusCode != http.StatusOK || !strings.Contains(string(page), want) {
		t.Fatalf("the demo CRM = %d, want the sidebar framed (%s):\n%s", resp.StatusCode, want, page)
	}

	// A package the list does not have is framed as a ticket of its own; what is no handoff id, not.
	for ticket, want := range map[string]string{"ho_day_1": "/sidebar/ho_day_1\"", "..%2Fadmin": "/sidebar/ho_demo_refund_queued\""} {
		resp, err := http.Get("http://" + crmAddr + "/?ticket=" + ticket)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(page), want) {
			t.Errorf("the demo CRM's ticket %s frames not %s:\n%s", ticket, want, page)
		}
	}

	// The frame's first page, the sign-in, may be framed by the CRM's origin.
	req, err := http.NewRequest(http.MethodGet, base+"/login?next=%2Fsidebar%2Fho_demo_refund_pending", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Sec-Fetch-Dest", "iframe")
	framed, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	framed.Body.Close()
	if csp := framed.Header.Get("Content-Security-Policy"); framed.StatusCode != http.StatusOK || !strings.Contains(csp, "frame-ancestors http://"+crmAddr+";") {
		t.Errorf("the sign-in in the demo CRM's frame = %d with CSP %q, want it framable by http://%s", framed.StatusCode, csp, crmAddr)
	}
}

func TestDemoCRMNeedsALoopbackOriginTheDeskLetsFrameIt(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		addr, ancestors, want string
	}{
		{"127.0.0.1:8081", "", "FRAME_ANCESTORS must name http://127.0.0.1:8081"},
		{"127.0.0.1:8081", "https://crm.example.com", "FRAME_ANCESTORS must name http://127.0.0.1:8081"},
		{"192.0.2.7:8081", "http://192.0.2.7:8081", "not a loopback address"},
		{"8081", "", "is not a host and port"},
	} {
		_, err := demoCRMOrigin(c.addr, strings.Fields(c.ancestors))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("-demo-crm %s with FRAME_ANCESTORS %q: %v, want %q", c.addr, c.ancestors, err, c.want)
		}
	}
	if origin, err := demoCRMOrigin("127.0.0.1:8081", []string{"http://127.0.0.1:8081"}); err != nil || origin != "http://127.0.0.1:8081" {
		t.Errorf("the demo CRM's origin = %q, %v", origin, err)
	}
}
