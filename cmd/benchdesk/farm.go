package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gorilla/websocket"

	"github.com/handoffdesk/desk/internal/loadtest"
)

// The farm is a child process (this binary with farmEnv set) that holds the client sockets, the
// way browsers are other processes than the desk. The parent drives it with one JSON command per
// line on its stdin and reads one JSON reply per line from its stdout:
//
//	dial     open N sockets to a URL (socket i with cookie i mod len) and wait for each one's
//	         first frame ("hello": the desk has subscribed it by then)
//	collect  wait until every socket has received a card for each key, or the timeout; answer
//	         the arrival times
//	close    close every socket
//
// Arrival times are wall-clock Unix nanoseconds taken as soon as a frame is read, before it is
// scanned; the parent compares them with its own wall clock (one machine, one clock).

const (
	dialTimeout   = 15 * time.Second
	farmWriteWait = 5 * time.Second
	collectPoll   = 5 * time.Millisecond
)

// farmCommand is one line the parent sends.
type farmCommand struct {
	Op        string   `json:"op"` // "dial", "collect" or "close"
	URL       string   `json:"url,omitempty"`
	Origin    string   `json:"origin,omitempty"`
	Cookies   []string `json:"cookies,omitempty"` // desk_session tokens; empty for the bare server
	N         int      `json:"n,omitempty"`
	Parallel  int      `json:"parallel,omitempty"`
	Keys      []string `json:"keys,omitempty"`
	TimeoutMS int64    `json:"timeout_ms,omitempty"`
}

// farmReply is the farm's answer to one command.
type farmReply struct {
	Err     string `json:"err,omitempty"`
	Sockets int    `json:"sockets"`
	// Arrivals holds, per key, each socket's arrival time in Unix nanoseconds (0: never).
	Arrivals map[string][]int64 `json:"arrivals,omitempty"`
	// Sizes holds, per key, the length of the frame that carried it to socket 0.
	Sizes map[string]int `json:"sizes,omitempty"`
	// Lost counts sockets whose reader ended before the close command (the server closed them).
	Lost int `json:"lost"`
}

type farmSocket struct {
	conn  *websocket.Conn
	hello chan struct{}
	done  chan struct{}
	lost  atomic.Bool

	mu    sync.Mutex
	seen  map[string]int64
	sizes map[string]int
}

type farmState struct {
	sockets []*farmSocket
	counts  sync.Map // key → *atomic.Int64: sockets that have received it
	closing atomic.Bool
}

// serveFarm is the child's whole program: it answers commands until stdin closes.
func serveFarm(ctx context.Context, in io.Reader, out io.Writer) error {
	// Best effort: the child inherits the limit the parent raised and checked before starting it.
	_, _ = raiseOpenFiles(1 << 20)
	st := &farmState{}
	defer st.closeAll()
	scanner := bufio.NewScanner(in)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	enc := json.NewEncoder(out)
	for scanner.Scan() {
		var cmd farmCommand
		var reply farmReply
		if err := json.Unmarshal(scanner.Bytes(), &cmd); err != nil {
			reply.Err = err.Error()
		} else {
			reply = st.handle(ctx, cmd)
		}
		if err := enc.Encode(reply); err != nil {
			return err
		}
	}
	return scanner.Err()
}

func (st *farmState) handle(ctx context.Context, cmd farmCommand) farmReply {
	switch cmd.Op {
	case "dial":
		err := st.dial(ctx, cmd)
		r := farmReply{Sockets: len(st.sockets)}
		if err != nil {
			r.Err = err.Error()
		}
		return r
	case "collect":
		return st.collect(ctx, cmd.Keys, time.Duration(cmd.TimeoutMS)*time.Millisecond)
	case "close":
		r := farmReply{Sockets: len(st.sockets), Lost: st.lostCount()}
		st.closeAll()
		return r
	}
	return farmReply{Err: fmt.Sprintf("unknown op %q", cmd.Op)}
}

func (st *farmState) dial(ctx context.Context, cmd farmCommand) error {
	dialer := websocket.Dialer{HandshakeTimeout: dialTimeout}
	sockets := make([]*farmSocket, cmd.N)
	errs := make(chan error, cmd.N)
	next := make(chan int)
	var wg sync.WaitGroup
	for range max(cmd.Parallel, 1) {
		wg.Go(func() {
			for i := range next {
				header := http.Header{}
				if cmd.Origin != "" {
					header.Set("Origin", cmd.Origin)
				}
				if len(cmd.Cookies) > 0 {
					header.Set("Cookie", loadtest.SessionCookie+"="+cmd.Cookies[i%len(cmd.Cookies)])
				}
				dialCtx, cancel := context.WithTimeout(ctx, dialTimeout)
				conn, resp, err := dialer.DialContext(dialCtx, cmd.URL, header)
				cancel()
				if err != nil {
					if resp != nil {
						body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
						err = fmt.Errorf("socket %d: %w (status %d: %s)", i, err, resp.StatusCode, bytes.TrimSpace(body))
					}
					errs <- err
					continue
				}
				s := &farmSocket{conn: conn, hello: make(chan struct{}), done: make(chan struct{}),
					seen: map[string]int64{}, sizes: map[string]int{}}
				sockets[i] = s
				go st.read(s)
				select {
				case <-s.hello:
				case <-s.done:
					errs <- fmt.Errorf("socket %d closed before its first frame", i)
				case <-time.After(dialTimeout):
					errs <- fmt.Errorf("socket %d: no first frame within %s", i, dialTimeout)
				}
			}
		})
	}
	for i := range cmd.N {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for _, s := range sockets {
		if s != nil {
			st.sockets = append(st.sockets, s)
		}
	}
	var all []error
	for err := range errs {
		if len(all) < 5 {
			all = append(all, err)
		}
	}
	if len(all) > 0 {
		return fmt.Errorf("%d of %d sockets failed: %w", cmd.N-len(st.sockets), cmd.N, errors.Join(all...))
	}
	return nil
}

// read is a socket's one reader: it timestamps each frame, then records the cards it carries.
func (st *farmState) read(s *farmSocket) {
	defer close(s.done)
	first := true
	for {
		_, data, err := s.conn.ReadMessage()
		at := time.Now().UnixNano()
		if err != nil {
			if !st.closing.Load() {
				s.lost.Store(true)
			}
			return
		}
		if first {
			first = false
			close(s.hello)
		}
		keys := cardKeys(data)
		if len(keys) == 0 {
			continue
		}
		s.mu.Lock()
		for _, k := range keys {
			if _, ok := s.seen[k]; ok {
				continue
			}
			s.seen[k], s.sizes[k] = at, len(data)
			c, ok := st.counts.Load(k)
			if !ok {
				c, _ = st.counts.LoadOrStore(k, new(atomic.Int64))
			}
			c.(*atomic.Int64).Add(1)
		}
		s.mu.Unlock()
	}
}

func (st *farmState) collect(ctx context.Context, keys []string, timeout time.Duration) farmReply {
	deadline := time.Now().Add(timeout)
	n := int64(len(st.sockets))
	for time.Now().Before(deadline) && ctx.Err() == nil {
		complete := true
		for _, k := range keys {
			c, ok := st.counts.Load(k)
			if !ok || c.(*atomic.Int64).Load() < n {
				complete = false
				break
			}
		}
		if complete {
			break
		}
		time.Sleep(collectPoll)
	}
	r := farmReply{Sockets: len(st.sockets), Arrivals: make(map[string][]int64, len(keys)), Sizes: map[string]int{}, Lost: st.lostCount()}
	for _, k := range keys {
		r.Arrivals[k] = make([]int64, len(st.sockets))
	}
	for i, s := range st.sockets {
		s.mu.Lock()
		for _, k := range keys {
			r.Arrivals[k][i] = s.seen[k]
			if i == 0 {
				r.Sizes[k] = s.sizes[k]
			}
		}
		s.mu.Unlock()
	}
	return r
}

func (st *farmState) lostCount() int {
	n := 0
	for _, s := range st.sockets {
		if s.lost.Load() {
			n++
		}
	}
	return n
}

func (st *farmState) closeAll() {
	st.closing.Store(true)
	for _, s := range st.sockets {
		_ = s.conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""),
			time.Now().Add(farmWriteWait))
		_ = s.conn.Close() // closing ends the socket's reader, which is what the loop below waits for
	}
	for _, s := range st.sockets {
		<-s.done
	}
	st.sockets = nil
	st.counts.Clear()
	st.closing.Store(false)
}

// cardKeys returns the ids of the cards a frame upserts: the X of every fragment that starts
// {"target":"card-X","op":"upsert". A fragment's html is a JSON string, whose quotes are escaped,
// so the pattern cannot match inside it.
func cardKeys(frame []byte) []string {
	const prefix, suffix = `"target":"card-`, `","op":"upsert"`
	var keys []string
	for {
		i := bytes.Index(frame, []byte(prefix))
		if i < 0 {
			return keys
		}
		frame = frame[i+len(prefix):]
		end := bytes.IndexByte(frame, '"')
		if end < 0 {
			return keys
		}
		if bytes.HasPrefix(frame[end:], []byte(suffix)) {
			keys = append(keys, string(frame[:end]))
		}
		frame = frame[end:]
	}
}

// raiseOpenFiles lifts the soft open-files limit towards want (capped by the hard limit). Go
// already raises it to the hard limit at start on Linux; this keeps the tool right elsewhere.
func raiseOpenFiles(want uint64) (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	if lim.Cur >= want || lim.Cur >= lim.Max {
		return lim.Cur, nil
	}
	lim.Cur = min(want, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return lim.Cur, nil
}

// farm is the parent's handle on the child.
type farm struct {
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *json.Decoder
	done chan error
}

func startFarm() (*farm, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe) //nolint:gosec // G204: this very binary, from os.Executable, with no arguments.
	cmd.Env = append(os.Environ(), farmEnv+"=1")
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	f := &farm{cmd: cmd, in: in, out: json.NewDecoder(bufio.NewReaderSize(out, 1<<20)), done: make(chan error, 1)}
	return f, nil
}

func (f *farm) do(cmd farmCommand) (farmReply, error) {
	line, err := json.Marshal(cmd)
	if err != nil {
		return farmReply{}, err
	}
	if _, err := f.in.Write(append(line, '\n')); err != nil {
		return farmReply{}, fmt.Errorf("farm %s: %w", cmd.Op, err)
	}
	var r farmReply
	if err := f.out.Decode(&r); err != nil {
		return farmReply{}, fmt.Errorf("farm %s: %w", cmd.Op, err)
	}
	if r.Err != "" {
		return r, fmt.Errorf("farm %s: %s", cmd.Op, r.Err)
	}
	return r, nil
}

// dialDesk opens n sockets watching queue on a desk instance, spreading the sessions over them.
func (f *farm) dialDesk(baseURL, queueName string, sessions []string, n int) error {
	_, err := f.do(farmCommand{Op: "dial", URL: wsURL(baseURL) + "/ws?queues=" + queueName, Origin: baseURL,
		Cookies: sessions, N: n, Parallel: 16})
	return err
}

func (f *farm) dialBare(baseURL string, n int) error {
	_, err := f.do(farmCommand{Op: "dial", URL: wsURL(baseURL) + "/", Origin: baseURL, N: n, Parallel: 16})
	return err
}

func (f *farm) collect(keys []string, timeout time.Duration) (farmReply, error) {
	return f.do(farmCommand{Op: "collect", Keys: keys, TimeoutMS: timeout.Milliseconds()})
}

func (f *farm) closeSockets() (farmReply, error) { return f.do(farmCommand{Op: "close"}) }

// stop ends the child: closing its stdin ends its command loop, which closes its sockets.
func (f *farm) stop() error {
	_ = f.in.Close() // how the child ended is what Wait reports
	go func() { f.done <- f.cmd.Wait() }()
	select {
	case err := <-f.done:
		return err
	case <-time.After(15 * time.Second):
		_ = f.cmd.Process.Kill()
		return errors.Join(errors.New("farm did not exit; killed"), <-f.done)
	}
}

func wsURL(httpURL string) string {
	if rest, ok := bytes.CutPrefix([]byte(httpURL), []byte("http")); ok {
		return "ws" + string(rest)
	}
	return httpURL
}
