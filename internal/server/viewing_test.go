package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/timeline"
)

// viewingUntil reads frames until the socket's "who is viewing" of package id says what want
// holds of, and returns it.
func viewingUntil(t *testing.T, conn *websocket.Conn, id, what string, want func(string) bool) string {
	t.Helper()
	for range 50 {
		for _, fr := range readFrame(t, conn).Fragments {
			if fr.Target == "viewing-"+id && want(fr.HTML) {
				return fr.HTML
			}
		}
	}
	t.Fatalf("no frame says %s", what)
	return ""
}

// viewers counts the viewing rows of user on package id, on every instance.
func viewers(t *testing.T, app *testApp, userID int64, id string) int {
	t.Helper()
	var n int
	if err := app.DB.QueryRow(context.Background(), `SELECT count(*) FROM viewing v JOIN handoffs h ON h.id = v.handoff_id
		WHERE v.user_id = $1 AND h.handoff_id = $2`, userID, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Two agents on one package, each on another instance, see each other, live: Bea's page on the
// child instance says Alex is viewing when it loads, Alex's page hears of Bea's opening, Bea's of
// Alex's leaving and coming back; no one is shown themselves. When the child instance is killed
// with kill -9, Bea leaves Alex's page once its lease has lapsed, and her rows are gone.
func TestAgentsOnOnePackageSeeEachOther(t *testing.T) {
	t.Parallel()
	app := setup(t)
	key := app.botKey(t, "tier1", "billing_t2")
	alex := app.user(t, "alex@example.com", auth.RoleAgent, "billing_t2")
	bea := app.user(t, "bea@example.com", auth.RoleAgent, "billing_t2")
	p := harborFor(t, "billing_t2").(map[string]any)
	expect(t, "submit", app.submit(t, key, p), http.StatusCreated)
	id := p["handoff_id"].(string)
	child, kill := app.killable(t)
	ac, bc := app.client(t), app.client(t)
	app.login(t, ac, "alex@example.com")
	app.login(t, bc, "bea@example.com")

	alexConn, _ := app.dialed(t, ac, "handoff="+id)
	waitFor(t, "Alex's viewing row", func() bool { return viewers(t, app, alex.ID, id) == 1 })
	_, page := get(t, bc, child.URL+"/handoffs/"+id)
	if !strings.Contains(page, "alex is viewing") {
		t.Fatalf("Bea's page on the other instance does not say Alex is viewing:\n%.3000s", page)
	}
	if _, own := get(t, ac, app.URL+"/handoffs/"+id); strings.Contains(own, "is viewing") {
		t.Fatal("Alex's page shows Alex viewing")
	}
	beaConn, _ := child.dialed(t, bc, "handoff="+id)
	if html := viewingUntil(t, alexConn, id, "bea is viewing", func(h string) bool { return strings.Contains(h, "bea is viewing") }); strings.Contains(html, "alex") {
		t.Fatalf("Alex is shown themselves: %s", html)
	}

	// A clean close: Alex leaves Bea's page, live, across instances; and comes back.
	_ = alexConn.Close()
	waitFor(t, "Alex's viewing row to go", func() bool { return viewers(t, app, alex.ID, id) == 0 })
	viewingUntil(t, beaConn, id, "nobody else is viewing", func(h string) bool { return !strings.Contains(h, "is viewing") })
	alexConn, _ = app.dialed(t, ac, "handoff="+id)
	if html := viewingUntil(t, beaConn, id, "alex is viewing", func(h string) bool { return strings.Contains(h, "alex is viewing") }); strings.Contains(html, "bea") {
		t.Fatalf("Bea is shown themselves: %s", html)
	}

	// kill -9: nothing of the child cleans up; its lease lapses and another instance reaps it.
	kill()
	viewingUntil(t, alexConn, id, "Bea gone with her instance", func(h string) bool { return !strings.Contains(h, "bea") })
	waitFor(t, "Bea's viewing rows to go", func() bool { return viewers(t, app, bea.ID, id) == 0 })
	if _, page := get(t, ac, app.URL+"/handoffs/"+id); strings.Contains(page, "is viewing") {
		t.Fatal("Alex's page still shows someone viewing after the only other viewer's instance died")
	}
	// Who had it open is the page's to show now, not the package's history.
	var rowID int64
	if err := app.DB.QueryRow(context.Background(), `SELECT id FROM handoffs WHERE handoff_id = $1`, id).Scan(&rowID); err != nil {
		t.Fatal(err)
	}
	entries, err := timeline.Read(context.Background(), app.DB, rowID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Kind == events.Viewing {
			t.Fatalf("the timeline lists who had the package open: %+v", e)
		}
	}
}
