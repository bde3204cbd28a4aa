package main

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/handoffdesk/desk/internal/queue"
)

var (
	shownKey    = regexp.MustCompile(`data-testid="secret-key">([^<]+)<`)
	queueTarget = regexp.MustCompile(`^/admin/queues/([0-9]+)$`)
)

// TestReadmeWalkthrough is docs/admins.md's "A first setup, in the console", as `make run` serves it: log in
// as the demo admin, create a queue, a user and a key in /admin, post a package with the new key,
// and find it on the new user's queue page.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	getenv := env(t, "WEBHOOK_ALLOW_PRIVATE", "1")
	if out, err := runCommand(t, getenv, "seed-demo"); err != nil {
		t.Fatalf("seed-demo: %v\n%s", err, out)
	}
	base, _ := startServe(t, getenv)
	browse := func(email string) *http.Client {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.PostForm(base+"/login", url.Values{"email": {email}, "password": {demoPassword}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("login %s: %d", email, resp.StatusCode)
		}
		return c
	}
	post := func(c *http.Client, path string, form url.Values, want int) (string, *http.Response) {
		t.Helper()
		resp, err := c.PostForm(base+path, form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("POST %s: %d, want %d\n%s", path, resp.StatusCode, want, body)
		}
		return string(body), resp
	}

	admin := browse("admin@example.com")
	form := url.Values(queue.Values(queue.Defaults()))
	form.Set("name", "vip")
	_, resp := post(admin, "/admin/queues", form, http.StatusSeeOther)
	m := queueTarget.FindStringSubmatch(resp.Header.Get("Location"))
	if m == nil {
		t.Fatalf("the new queue's page is %q", resp.Header.Get("Location"))
	}
	post(admin, "/admin/users", url.Values{"email": {"val@example.com"}, "password": {demoPassword}, "name": {"Val"},
		"role": {"agent"}, "queues": {m[1]}, "capacity": {"3"}}, http.StatusSeeOther)
	page, _ := post(admin, "/admin/keys", url.Values{"name": {"vip-bot"}, "queues": {m[1]}, "webhook_url": {"http://127.0.0.1:9/hooks"}}, http.StatusCreated)
	k := shownKey.FindStringSubmatch(page)
	if k == nil {
		t.Fatalf("the new key is not shown:\n%s", page)
	}
	key := html.UnescapeString(k[1])

	raw, err := os.ReadFile("../../internal/handoff/testdata/harbor-v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var pkg map[string]any
	if err := json.Unmarshal(raw, &pkg); err != nil {
		t.Fatal(err)
	}
	pkg["target_profile"], pkg["handoff_id"] = "vip", "ho_readme_1"
	body, _ := json.Marshal(pkg)
	if status := submit(t, base, key, body); status != http.StatusCreated {
		t.Fatalf("the package with the new key: %d, want 201", status)
	}

	val := browse("val@example.com")
	resp, err = val.Get(base + "/queues/vip")
	if err != nil {
		t.Fatal(err)
	}
	queuePage, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(queuePage), `id="card-ho_readme_1"`) {
		t.Errorf("the new user's queue page: %d, want 200 with the package's card", resp.StatusCode)
	}
}
