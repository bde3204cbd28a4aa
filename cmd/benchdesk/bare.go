package main

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// bareServer is the baseline for fan-out and memory: a trivial gorilla echo server in the
// chat example's shape (a set of clients, one reader and one writer per connection, a buffered
// send channel) with no database, no session, no rendering. broadcast hands the same bytes to
// every connection's writer, so a broadcast costs what writing the frames costs.
type bareServer struct {
	url string
	srv *http.Server

	mu    sync.Mutex
	conns map[*bareConn]struct{}
}

type bareConn struct {
	send chan []byte
}

const bareSendBuffer = 16

func startBare() (*bareServer, error) {
	ln, baseURL, err := loadtest.Listen()
	if err != nil {
		return nil, err
	}
	b := &bareServer{url: baseURL, conns: map[*bareConn]struct{}{}}
	b.srv = &http.Server{Handler: b, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = b.srv.Serve(ln) }()
	return b, nil
}

func (b *bareServer) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeHTTP upgrades with gorilla's defaults, as the desk does (same buffer sizes), says hello,
// echoes what it reads and writes what is broadcast.
func (b *bareServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	upgrader := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	conn, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close() }() // the socket is done with either way
	c := &bareConn{send: make(chan []byte, bareSendBuffer)}
	b.mu.Lock()
	b.conns[c] = struct{}{}
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		delete(b.conns, c)
		b.mu.Unlock()
	}()

	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for {
			_, msg, err := conn.ReadMessage()
			if err != nil {
				return
			}
			select {
			case c.send <- msg:
			default:
			}
		}
	}()
	if err := bareWrite(conn, []byte(`{"type":"hello"}`)); err != nil {
		return
	}
	for {
		select {
		case <-closed:
			return
		case msg := <-c.send:
			if err := bareWrite(conn, msg); err != nil {
				return
			}
		}
	}
}

func bareWrite(conn *websocket.Conn, msg []byte) error {
	_ = conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	return conn.WriteMessage(websocket.TextMessage, msg)
}

// broadcast queues msg for every connection; a connection whose buffer is full misses it.
func (b *bareServer) broadcast(msg []byte) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for c := range b.conns {
		select {
		case c.send <- msg:
		default:
		}
	}
}

func (b *bareServer) connections() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.conns)
}
