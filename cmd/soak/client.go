package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// maxAnswerRead bounds how much of an answer is read: an error body is short, and a page's
// content is no business of the tool's.
const maxAnswerRead = 64 << 10

// A page the tool reads (a package's approval, a ring after a reload) is read whole, within
// pageTimeout; so is a socket's upgrade.
const (
	maxPageRead = 4 << 20
	pageTimeout = 30 * time.Second
)

// answer is what one request got: a status, or a transport error.
type answer struct {
	status     int
	reason     string // an error body's "reason", if any
	retryAfter string
	location   string
	err        error
	took       time.Duration
}

func (a answer) ok() bool { return a.err == nil && a.status >= 200 && a.status < 400 }

// retryable is an answer a careful client tries again: no answer at all, or a 5xx.
func (a answer) retryable() bool { return a.err != nil || a.status >= 500 }

// kind names an answer for a tally: its status, its reason and whether it said when to retry,
// or the sort of transport error.
func (a answer) kind() string {
	if a.err != nil {
		switch {
		case errors.Is(a.err, context.DeadlineExceeded):
			return "no answer in time (client left)"
		case strings.Contains(a.err.Error(), "connection refused"):
			return "connection refused"
		case strings.Contains(a.err.Error(), "connection reset"), errors.Is(a.err, io.EOF), errors.Is(a.err, io.ErrUnexpectedEOF):
			return "connection reset"
		}
		return "transport error"
	}
	k := fmt.Sprint(a.status)
	if a.reason != "" {
		k += " " + a.reason
	}
	if a.retryAfter != "" {
		k += " (Retry-After " + a.retryAfter + ")"
	}
	return k
}

// do sends req and reads the answer, at most timeout long (0: as long as ctx allows).
func (s *soak) do(ctx context.Context, req *http.Request, timeout time.Duration) answer {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	t := time.Now()
	resp, err := s.client.Do(req.WithContext(ctx))
	if err != nil {
		return answer{err: err, took: time.Since(t)}
	}
	defer func() { _ = resp.Body.Close() }() // the body has been read; a close error cannot change the answer
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerRead))
	a := answer{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), location: resp.Header.Get("Location"),
		err: err, took: time.Since(t)}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		var e struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(body, &e) == nil {
			a.reason = e.Reason
		}
	}
	return a
}

// get is a GET with no credentials: health checks.
func (s *soak) get(ctx context.Context, u string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }() // the body has been read; a close error cannot change the answer
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerRead))
	return resp.StatusCode, strings.TrimSpace(string(body)), err
}

// body is the example package as a bot sends it, with its own id and contact, so that no
// per-contact guard refuses it, and addressed to queue.
func (s *soak) body(id, queue string) ([]byte, error) { return s.bodyAs(id, queue, "") }

// bodyAs is body sent warm or cold (mode), or as the example is ("").
func (s *soak) bodyAs(id, queue, mode string) ([]byte, error) {
	p := maps.Clone(s.example)
	contact := maps.Clone(s.example["contact"].(map[string]any))
	contact["id"] = "cust_" + id
	p["contact"], p["handoff_id"], p["target_profile"] = contact, id, queue
	if mode != "" {
		p["transfer_mode"] = mode
	}
	return json.Marshal(p)
}

// submit posts a package as a bot does. The package's handoff_id is its idempotency key: sending
// the same body again is safe, and is answered 200 with the first answer if the first committed.
func (s *soak) submit(ctx context.Context, base, key string, body []byte, timeout time.Duration) answer {
	req, err := http.NewRequest(http.MethodPost, base+"/api/v1/handoffs", bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	return s.do(ctx, req, timeout)
}

// read asks for a package's status as a bot does.
func (s *soak) read(ctx context.Context, base, key, id string) answer {
	req, err := http.NewRequest(http.MethodGet, base+"/api/v1/handoffs/"+url.PathEscape(id), nil)
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Authorization", "Bearer "+key)
	return s.do(ctx, req, 0)
}

// form posts a form as a logged-in browser does: session cookie, and the same-origin headers
// that the desk's cross-origin check asks of every state change.
func (s *soak) form(ctx context.Context, base, path, token string, values url.Values) answer {
	req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(values.Encode()))
	if err != nil {
		return answer{err: err}
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if token != "" {
		req.Header.Set("Cookie", loadtest.SessionCookie+"="+token)
	}
	return s.do(ctx, req, 0)
}

// page GETs a desk page as a logged-in browser does and returns its status and HTML.
func (s *soak) page(ctx context.Context, base, path, token string) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, pageTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Cookie", loadtest.SessionCookie+"="+token)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }() // the body has been read; a close error cannot change the answer
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxPageRead))
	return resp.StatusCode, string(body), err
}

// dialSocket opens a desk page's websocket on base, watching what query asks, as the page's
// script does: the session cookie, the page's own origin. It reads the hello.
func (s *soak) dialSocket(ctx context.Context, base, token, query string) (*websocket.Conn, error) {
	d := websocket.Dialer{HandshakeTimeout: pageTimeout}
	header := http.Header{"Origin": {base}, "Cookie": {loadtest.SessionCookie + "=" + token}}
	conn, resp, err := d.DialContext(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws?"+query, header)
	if resp != nil && resp.Body != nil {
		_ = resp.Body.Close() // a refusal's body says nothing the status does not
	}
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("dial %s: %d", base, resp.StatusCode)
		}
		return nil, err
	}
	var hello socketFrame
	_ = conn.SetReadDeadline(time.Now().Add(pageTimeout))
	if err := conn.ReadJSON(&hello); err != nil || hello.Type != "hello" {
		_ = conn.Close()
		return nil, fmt.Errorf("the socket's first frame: %q, %v; want hello", hello.Type, err)
	}
	return conn, nil
}

// socketFrame is what a desk page's websocket sends, as far as the soak reads it.
type socketFrame struct {
	Type      string `json:"type"`
	Fragments []struct {
		Target string `json:"target"`
		HTML   string `json:"html"`
	} `json:"fragments"`
}

// login logs in through the login form as a browser does (GET the form, POST it) and returns the
// session token.
func (s *soak) login(ctx context.Context, base, email string) (string, error) {
	if status, _, err := s.get(ctx, base+"/login"); err != nil || status != http.StatusOK {
		return "", fmt.Errorf("GET /login: %d %v", status, err)
	}
	return loadtest.Login(ctx, s.client, base, email, password)
}
