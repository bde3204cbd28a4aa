// Package demochat is the demo customer chat that `make run` serves beside the desk (serve
// -demo-chat): a page where a newcomer types as the customer, and a small rules-based support bot
// behind it that plays the whole loop through the desk's public bot API, as a real bot would.
// It answers a few questions itself, hands the customer to a person on "refund" or "human" with a
// full package and a draft, relays every later customer message with a fresh draft (POST
// /api/v1/handoffs/{id}/messages), verifies the desk's webhooks per Standard Webhooks, and shows
// the agent's replies in the customer's page as they come (server-sent events).
//
// It uses nothing of the desk but HTTP: its key, its webhook secret and the desk's address are all
// it knows. Chats live in memory: it is a demo, and a restart starts every chat again.
package demochat

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Config is what the bot knows of the desk.
type Config struct {
	DeskURL       string // the desk's base URL, e.g. http://localhost:8080
	BotKey        string // the bot's API key
	WebhookSecret string // the key's signing secret, whsec_…
	Queue         string // the queue the bot hands off to (the package's target_profile)
	// SignIn tells the newcomer how to sign in at the desk as an agent of Queue ("": the page says
	// only "sign in as an agent").
	SignIn string
	Logger *slog.Logger
}

// Who wrote a line of the customer's page.
const (
	Customer = "customer"
	Bot      = "bot"
	Agent    = "agent"
	Notice   = "notice" // what happened, in words: a person joined, the conversation was closed
)

// MaxText bounds what the customer may type in one message, below the desk's 8,000 characters.
const MaxText = 2000

// Line is a line of the customer's page.
type Line struct {
	Seq    int       `json:"seq"`
	Who    string    `json:"who"`
	Author string    `json:"author,omitempty"` // agents: their display name
	Text   string    `json:"text"`
	At     time.Time `json:"at"`
}

// chat is one customer's conversation. Its fields but turn are guarded by Server.mu.
type chat struct {
	id string
	// turn is held while a customer message is handled, so that the bot relays a customer's
	// messages in the order they were typed.
	turn       sync.Mutex
	lines      []Line
	transcript []turn // the conversation with the bot, for the next package
	handoffID  string // the package that holds the conversation now; "" while the bot does
	handoffs   int    // packages made so far, for the next one's id
	written    int    // messages the customer wrote, for the message_id of the next one relayed
	subs       map[chan Line]struct{}
}

// Server is the demo chat: the customer's page, its live stream, and the bot's webhook receiver.
type Server struct {
	cfg  Config
	desk desk
	mux  *http.ServeMux

	mu        sync.Mutex
	chats     map[string]*chat
	byHandoff map[string]*chat
	seen      map[string]bool // webhook ids handled: deliveries are at least once
	seenOrder []string
}

// maxSeen bounds the webhook ids remembered: a redelivery comes within the desk's retry window,
// long before this many others.
const maxSeen = 4096

// New returns the demo chat for the desk cfg names.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, desk: desk{base: cfg.DeskURL, key: cfg.BotKey, client: &http.Client{Timeout: 15 * time.Second}},
		chats: map[string]*chat{}, byHandoff: map[string]*chat{}, seen: map[string]bool{}}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", s.page)
	s.mux.Handle("GET /static/", http.FileServerFS(staticFS))
	s.mux.HandleFunc("POST /say", s.say)
	s.mux.HandleFunc("GET /lines", s.linesJSON)
	s.mux.HandleFunc("GET /events", s.events)
	s.mux.HandleFunc("POST /webhook", s.webhook)
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The page loads its own script and style, and nothing else; no other site frames it.
	w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	s.mux.ServeHTTP(w, r)
}

// Serve serves the demo chat on ln until ctx ends; the live streams end with it.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
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

//go:embed static
var staticFS embed.FS

var pageTemplate = template.Must(template.New("chat").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Demo customer chat</title>
<link rel="stylesheet" href="/static/chat.css">
<script src="/static/chat.js" defer></script>
</head>
<body>
<main>
<h1>Demo customer chat</h1>
<p class="intro">You are the customer, writing to a support bot. It answers questions about opening
hours, plans and delivery. Ask for a <strong>refund</strong>, or type <strong>human</strong>, and it hands
you to a person at the desk (<a href="{{.DeskURL}}">{{.DeskURL}}</a>, {{if .SignIn}}{{.SignIn}}{{else}}sign in as an agent there{{end}});
what you write then reaches them, and their replies appear here.</p>
<div role="log" aria-label="Conversation"><ol id="lines" data-testid="lines"></ol></div>
<form id="say" action="/say" method="post">
<label for="text">Your message</label>
<div class="row">
<input id="text" name="text" type="text" autocomplete="off" required maxlength="{{.MaxText}}">
<button type="submit">Send</button>
</div>
<p id="status" role="status"></p>
</form>
</main>
</body>
</html>
`))

const cookieName = "demo_chat"

// page is the customer's page. A browser without the chat cookie starts a chat of its own.
func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	if _, ok := s.chatOf(r); !ok {
		c := s.newChat()
		// Not Secure: the demo chat is served over plain HTTP on this machine's loopback only.
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: c.id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode}) //nolint:gosec // G124: plain HTTP on loopback, see above.
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := pageTemplate.Execute(w, map[string]any{"DeskURL": s.cfg.DeskURL, "SignIn": s.cfg.SignIn, "MaxText": MaxText}); err != nil {
		s.cfg.Logger.Warn("demo chat page", "err", err)
	}
}

func (s *Server) newChat() *chat {
	c := &chat{id: rand.Text()[:12], subs: map[chan Line]struct{}{}}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.chats[c.id] = c
	return c
}

func (s *Server) chatOf(r *http.Request) (*chat, bool) {
	cookie, err := r.Cookie(cookieName)
	if err != nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.chats[cookie.Value]
	return c, ok
}

// refuse answers a request the chat cannot take, saying what was wrong.
func refuse(w http.ResponseWriter, status int, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": fmt.Sprintf(format, args...)})
}

// say takes a customer's message: JSON {"text": …}. A cross-site form cannot send JSON, which is
// what keeps other sites from typing in a customer's chat.
func (s *Server) say(w http.ResponseWriter, r *http.Request) {
	c, ok := s.chatOf(r)
	if !ok {
		refuse(w, http.StatusBadRequest, "no chat: open the chat page first, which starts one")
		return
	}
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/json" {
		refuse(w, http.StatusUnsupportedMediaType, "send the message as application/json: {\"text\": \"…\"}")
		return
	}
	var body struct {
		Text string `json:"text"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 64<<10)).Decode(&body); err != nil {
		refuse(w, http.StatusBadRequest, "the body is not JSON of the form {\"text\": \"…\"}")
		return
	}
	switch n := utf8.RuneCountInString(body.Text); {
	case len(strings.TrimSpace(body.Text)) == 0:
		refuse(w, http.StatusUnprocessableEntity, "text: the message is empty")
		return
	case n > MaxText:
		refuse(w, http.StatusUnprocessableEntity, "text: the message is %d characters; at most %d are taken", n, MaxText)
		return
	}
	seq := s.handle(r.Context(), c, strings.TrimSpace(body.Text))
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string]int{"seq": seq})
}

// handle is the bot's turn on a customer message: relayed to the person holding the
// conversation, or answered, or handed over. It returns the seq of the customer's line.
func (s *Server) handle(ctx context.Context, c *chat, text string) int {
	c.turn.Lock()
	defer c.turn.Unlock()
	now := time.Now().UTC()
	seq := s.add(c, Line{Who: Customer, Text: text, At: now})
	s.mu.Lock()
	handoffID := c.handoffID
	c.written++
	messageID := fmt.Sprintf("m%d", c.written)
	s.mu.Unlock()
	if handoffID != "" {
		err := s.desk.relay(ctx, handoffID, messageID, text, draftFor(text), now)
		var refused *deskError
		switch {
		case err == nil:
			return seq
		case errors.As(err, &refused) && (refused.Status == http.StatusConflict || refused.Status == http.StatusNotFound):
			// The package is closed for good: the bot has the conversation again.
			s.botHasIt(c, handoffID)
			s.add(c, Line{Who: Notice, Text: "The support team has closed your earlier conversation; the bot is back.", At: now})
		default:
			s.cfg.Logger.Warn("demo chat: relaying a message", "handoff", handoffID, "err", err)
			s.add(c, Line{Who: Notice, Text: "Your message did not reach the support team; please send it again.", At: now})
			return seq
		}
	}
	if trigger := handoffTrigger(text); trigger != "" {
		s.handOff(ctx, c, trigger, text, now)
		return seq
	}
	reply := answer(text)
	s.mu.Lock()
	c.transcript = append(c.transcript, turn{"user", text, now}, turn{"assistant", reply, now})
	s.mu.Unlock()
	s.add(c, Line{Who: Bot, Text: reply, At: now})
	return seq
}

// handOff hands the conversation to the desk with a package of everything the bot knows.
func (s *Server) handOff(ctx context.Context, c *chat, trigger, text string, now time.Time) {
	const handover = "I'm passing you to a person on our support team. Keep writing here: they'll read everything you write."
	s.mu.Lock()
	c.transcript = append(c.transcript, turn{"user", text, now})
	transcript := append(c.transcript[:len(c.transcript):len(c.transcript)], turn{"assistant", handover, now})
	c.handoffs++
	pkg := packageFor(c, s.cfg.Queue, trigger, text, transcript, now)
	s.mu.Unlock()
	h, err := s.desk.handOff(ctx, pkg)
	if err != nil {
		s.cfg.Logger.Warn("demo chat: handing off", "err", err)
		s.add(c, Line{Who: Bot, Text: "I couldn't reach a person just now (" + err.Error() + "). Please try again in a moment.", At: now})
		return
	}
	s.mu.Lock()
	c.transcript = transcript
	c.handoffID = h.HandoffID
	s.byHandoff[h.HandoffID] = c
	s.mu.Unlock()
	line := handover
	if h.Position > 0 {
		line += fmt.Sprintf(" You are number %d in line.", h.Position)
	}
	s.add(c, Line{Who: Bot, Text: line, At: now})
}

// botHasIt gives the conversation back to the bot, if handoffID still holds it.
func (s *Server) botHasIt(c *chat, handoffID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.handoffID == handoffID {
		c.handoffID = ""
	}
}

// add appends a line to the chat and sends it to every open page of it; a page that fell behind
// is dropped, not waited for: its EventSource reconnects and catches up from its last line.
func (s *Server) add(c *chat, l Line) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	l.Seq = len(c.lines) + 1
	c.lines = append(c.lines, l)
	for ch := range c.subs {
		select {
		case ch <- l:
		default:
			delete(c.subs, ch)
			close(ch)
		}
	}
	return l.Seq
}

func (s *Server) linesAfter(c *chat, after int) []Line {
	if after < 0 || after > len(c.lines) {
		after = 0
	}
	return append([]Line(nil), c.lines[after:]...)
}

// linesJSON is the chat's lines after ?after=SEQ, for a script or a test that does not stream.
func (s *Server) linesJSON(w http.ResponseWriter, r *http.Request) {
	c, ok := s.chatOf(r)
	if !ok {
		refuse(w, http.StatusBadRequest, "no chat: open the chat page first, which starts one")
		return
	}
	after, _ := strconv.Atoi(r.URL.Query().Get("after"))
	s.mu.Lock()
	lines := s.linesAfter(c, after)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string][]Line{"lines": lines})
}

// keepAlive is how often an idle stream sends a comment, so that proxies keep it open.
const keepAlive = 15 * time.Second

// events streams the chat's lines as server-sent events: those after Last-Event-ID (every one on
// a first connection), then each as it comes.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	c, ok := s.chatOf(r)
	if !ok {
		refuse(w, http.StatusBadRequest, "no chat: open the chat page first, which starts one")
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		refuse(w, http.StatusInternalServerError, "this server cannot stream")
		return
	}
	after, _ := strconv.Atoi(r.Header.Get("Last-Event-ID"))
	ch := make(chan Line, 64)
	s.mu.Lock()
	backlog := s.linesAfter(c, after)
	c.subs[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if _, ok := c.subs[ch]; ok {
			delete(c.subs, ch)
			close(ch)
		}
		s.mu.Unlock()
	}()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	send := func(l Line) error {
		data, err := json.Marshal(l)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "id: %d\ndata: %s\n\n", l.Seq, data)
		return err
	}
	for _, l := range backlog {
		if send(l) != nil {
			return
		}
	}
	flusher.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case l, open := <-ch:
			if !open || send(l) != nil {
				return
			}
		case <-tick.C:
			if _, err := io.WriteString(w, ": still here\n\n"); err != nil {
				return
			}
		}
		flusher.Flush()
	}
}

// event is what the bot reads of the desk's webhook body.
type event struct {
	Event     string `json:"event"`
	HandoffID string `json:"handoff_id"`
	Assignee  string `json:"assignee"`
	Text      string `json:"text"`
	Seq       int    `json:"seq"`
}

// webhook takes the desk's deliveries: signed per Standard Webhooks, at least once, about any
// package of the bot's key (seed-demo's own among them, which no chat here holds).
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		refuse(w, http.StatusBadRequest, "reading the body: %v", err)
		return
	}
	if err := Verify(s.cfg.WebhookSecret, r.Header, body, time.Now()); err != nil {
		s.cfg.Logger.Warn("demo chat: a webhook that does not verify", "err", err)
		refuse(w, http.StatusUnauthorized, "webhook refused: %v", err)
		return
	}
	var e event
	if err := json.Unmarshal(body, &e); err != nil {
		refuse(w, http.StatusBadRequest, "the body is not a JSON event: %v", err)
		return
	}
	id := r.Header.Get("Webhook-Id")
	s.mu.Lock()
	c := s.byHandoff[e.HandoffID]
	again := s.seen[id]
	if !again {
		s.seen[id] = true
		s.seenOrder = append(s.seenOrder, id)
		if len(s.seenOrder) > maxSeen {
			delete(s.seen, s.seenOrder[0])
			s.seenOrder = s.seenOrder[1:]
		}
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	if again || c == nil {
		return
	}
	now := time.Now().UTC()
	who := e.Assignee
	if who == "" {
		who = "The support team"
	}
	switch e.Event {
	case "accepted":
		s.add(c, Line{Who: Notice, Text: who + " from the support team joined the chat.", At: now})
	case "reply":
		s.add(c, Line{Who: Agent, Author: e.Assignee, Text: e.Text, At: now})
	case "resolved":
		s.add(c, Line{Who: Notice, Text: who + " marked your question as solved. Write again if there is anything else.", At: now})
	case "transferred", "reassigned":
		s.add(c, Line{Who: Notice, Text: "You have been passed to a colleague; they can read the conversation so far.", At: now})
	case "returned_to_bot", "canceled", "expired":
		s.botHasIt(c, e.HandoffID)
		s.add(c, Line{Who: Notice, Text: "The support team passed the conversation back to the bot.", At: now})
	}
}
