package live

import (
	"context"
	"crypto/rand"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/events"
)

// Channel is the PostgreSQL notification channel instances wake each other on.
const Channel = events.Channel

// coalesceWindow is the most often one instance sends NOTIFY. NOTIFY takes a database-wide lock
// at commit; sending it from each package's transaction would serialize every intake commit
// behind it, so changes only mark "dirty" and one NOTIFY per window covers them all.
const coalesceWindow = 5 * time.Millisecond

// Notifier wakes the local hub at once and the other instances with a coalesced NOTIFY sent
// outside any data transaction. Should an instance die between a commit and its NOTIFY, the other
// instances still see the change at their next poll.
type Notifier struct {
	// Self is the payload of this instance's notifications, for its own listener to ignore: the
	// local hub was woken already, and a second read would find nothing.
	Self   string
	hub    *Hub
	exec   func(ctx context.Context, payload string) error
	logger *slog.Logger
	dirty  chan struct{}
}

// NewNotifier returns a Notifier; notify sends one NOTIFY on Channel with the payload (the server
// passes a pool Exec).
func NewNotifier(hub *Hub, notify func(ctx context.Context, payload string) error, logger *slog.Logger) *Notifier {
	return &Notifier{Self: rand.Text(), hub: hub, exec: notify, logger: logger, dirty: make(chan struct{}, 1)}
}

// Changed is called after a commit that wrote desk events.
func (n *Notifier) Changed() {
	n.hub.Wake()
	select {
	case n.dirty <- struct{}{}:
	default:
	}
}

// Run sends the coalesced notifications until ctx is done.
func (n *Notifier) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.dirty:
		}
		if err := n.exec(ctx, n.Self); err != nil && ctx.Err() == nil {
			n.logger.Warn("notify other instances", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(coalesceWindow):
		}
	}
}

// Reconnection waits of the listener: doubling from the first to the longest while connecting
// fails.
const (
	firstReconnectWait   = 100 * time.Millisecond
	longestReconnectWait = 5 * time.Second
)

// Listen holds one connection outside the pool LISTENing on Channel and wakes the hub on every
// notification but those whose payload is self (the instance's own echo). It reconnects after
// errors until ctx is done; once a connection has listened, the next loss waits the first wait
// again, so a connection lost now and then is not met with ever longer gaps.
func Listen(ctx context.Context, connString string, hub *Hub, self string, logger *slog.Logger) {
	wait := firstReconnectWait
	for ctx.Err() == nil {
		err := listenOnce(ctx, connString, self, func(string) {
			// Woken: the connection listens.
			wait = firstReconnectWait
			hub.Wake()
		})
		if ctx.Err() != nil {
			return
		}
		logger.Warn("listen connection lost; reconnecting", "err", err, "in", wait)
		// Whatever was notified while disconnected is read now.
		hub.Wake()
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(wait*2, longestReconnectWait)
	}
}

// listenOnce LISTENs on one connection and calls wake with "" once listening, to read whatever
// came before, and then with the payload of every notification but self's, until the connection
// fails.
func listenOnce(ctx context.Context, connString, self string, wake func(payload string)) error {
	// The pool's parser, so that pool settings in DATABASE_URL (pool_max_conns, ...) are taken off
	// rather than sent to the server as unknown parameters.
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return err
	}
	// The connection is done with whether it failed or not, so its close error would tell nothing.
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	wake("")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload != self {
			wake(n.Payload)
		}
	}
}
