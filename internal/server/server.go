// Package server is the desk's HTTP layer: routes, sessions, CSRF, and the one place where
// domain errors become status codes. Handlers decode, call the domain, and render.
package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/access"
	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/internal/metrics"
	"github.com/handoffdesk/desk/internal/postgres"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/search"
	"github.com/handoffdesk/desk/internal/sso"
	"github.com/handoffdesk/desk/internal/tracing"
)

// Config is what the server reads from the environment.
type Config struct {
	Addr    string // listen address, e.g. ":8080"
	BaseURL string // the address people use, e.g. "https://desk.example.com"
	// FrameAncestors are the origins allowed to embed the sidebar (CSP frame-ancestors).
	FrameAncestors []string
	// TrustedProxies are the peers whose X-Forwarded-For names the client; with none, the client
	// is the peer itself.
	TrustedProxies []netip.Prefix
	// CitationSchemes are the schemes besides https and http that citations link to, e.g. "crm".
	CitationSchemes []string
	// RequestTimeout bounds each request's work (0: DefaultRequestTimeout): past it, the request's
	// database calls are cut short and the client is answered 503.
	RequestTimeout time.Duration
	// AllowPrivateWebhooks lets the admin console accept webhook URLs on loopback and private
	// addresses (WEBHOOK_ALLOW_PRIVATE, which the instance copies from its deliverer's options).
	AllowPrivateWebhooks bool
	// DrainPeriod is how long, once asked to stop, the server keeps serving while /readyz answers
	// 503, so that load balancers stop sending it requests before it stops accepting them.
	DrainPeriod time.Duration
	// OIDC is the identity provider for single sign-on (OIDC_*); unset, passwords only.
	OIDC sso.Config
	// DashboardEvery is the least time between two sendings of the dashboard's figures to one
	// browser (0: DefaultDashboardEvery): changes in between are coalesced into the next one.
	DashboardEvery time.Duration
	// HSTSPreload asks browsers' preload lists to hold the desk's domain, subdomains included
	// (HSTS_PRELOAD): an https BASE_URL sends Strict-Transport-Security either way.
	HSTSPreload bool
}

// DefaultDashboardEvery is how often at most a dashboard's figures are sent to its browser.
const DefaultDashboardEvery = 5 * time.Second

// DefaultRequestTimeout is the request deadline when REQUEST_TIMEOUT is unset.
const DefaultRequestTimeout = 30 * time.Second

// Server is the desk's HTTP server.
type Server struct {
	cfg      Config
	logger   *slog.Logger
	db       *pgxpool.Pool
	reads    *pgxpool.Pool // search and the audit page, cut at a quarter of RequestTimeout (postgres.Reads)
	auth     *auth.Service
	access   *access.Service
	queues   *queue.Service
	intake   *intake.Intake
	actions  *actions.Service
	board    *board.Board
	search   *search.Searcher
	hub      *live.Hub
	presence *live.Presence
	metrics  *metrics.Metrics
	sso      *sso.Service // nil without an identity provider

	echo *echo.Echo
	// templates are the paths of the routes, the only route labels of the request metrics.
	templates map[string]bool
	// handler is echo, inside a span per request while tracing is on.
	handler       http.Handler
	citations     citationLinks
	secureCookies bool
	csrf          *http.CrossOriginProtection
	// hsts is the Strict-Transport-Security header of an https BASE_URL; "" on http.
	hsts string

	// shutdown closes when the server stops, telling websockets (which http.Server.Shutdown does
	// not track once hijacked) to say goodbye; sockets counts them until they have.
	shutdown chan struct{}
	sockets  sync.WaitGroup
	upgrader websocket.Upgrader
	// userSockets counts each person's open sockets, to cap them; costly their searches, audit
	// pages and exports in flight.
	userSockets userSockets
	costly      costlyReads
	// figures is the dashboard's figures shared between the sockets watching the same ones.
	figures figuresShared

	// draining is set once the server is asked to stop: /readyz fails from then on.
	draining atomic.Bool
	// migrated is set once /readyz saw the database carry every migration this binary knows.
	migrated atomic.Bool
	// after is the drain period's timer; tests end the drain when they are done with it.
	after func(time.Duration) <-chan time.Time
}

// New builds a server from its dependencies.
func New(cfg Config, logger *slog.Logger, db *pgxpool.Pool, authService *auth.Service, queues *queue.Service,
	intake *intake.Intake, actions *actions.Service, board *board.Board, hub *live.Hub, presence *live.Presence, counts *metrics.Metrics,
	traces *tracing.Tracing) (*Server, error) {
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || base.Scheme == "" || base.Host == "" {
		return nil, errors.New("BASE_URL must be an absolute URL like http://localhost:8080")
	}
	citations, err := newCitationLinks(cfg.CitationSchemes)
	if err != nil {
		return nil, err
	}
	if err := cfg.OIDC.Check(); err != nil {
		return nil, err
	}
	if cfg.DashboardEvery <= 0 {
		cfg.DashboardEvery = DefaultDashboardEvery
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	// A server built without a database (a test of its pure parts) has no reads pool either.
	var reads *pgxpool.Pool
	if db != nil {
		var err error
		if reads, err = postgres.Reads(context.Background(), db, cfg.RequestTimeout/4); err != nil {
			return nil, err
		}
	}
	s := &Server{
		cfg:      cfg,
		logger:   logger,
		db:       db,
		auth:     authService,
		access:   access.New(db, authService),
		queues:   queues,
		intake:   intake,
		actions:  actions,
		board:    board,
		reads:    reads,
		search:   search.New(reads),
		hub:      hub,
		presence: presence,
		metrics:  counts,
		echo:     echo.New(),
		// Browsers keep Secure cookies on https and on loopback (a secure context), which
		// covers production and `make run`; a plain-http LAN address would lose its login.
		secureCookies: base.Scheme == "https" || isLoopback(base.Hostname()),
		hsts:          hstsFor(base, cfg.HSTSPreload),
		csrf:          http.NewCrossOriginProtection(),
		citations:     citations,
		shutdown:      make(chan struct{}),
		after:         time.After,
	}
	counts.Refusals(slices.Concat(intakeCodes, intakeReasons)...)
	s.upgrader = websocket.Upgrader{
		CheckOrigin: s.checkOrigin,
		// Browsers send nothing but control frames; frames are written through a shared pool,
		// so an idle socket holds no write buffer.
		ReadBufferSize:  maxMessageSize,
		WriteBufferSize: 4096,
		WriteBufferPool: &sync.Pool{},
	}
	if cfg.OIDC.Enabled() {
		s.sso = sso.New(db, authService, cfg.OIDC, base.JoinPath("/sso/callback").String())
	}
	if err := s.csrf.AddTrustedOrigin(base.Scheme + "://" + base.Host); err != nil {
		return nil, err
	}
	s.echo.HideBanner = true
	s.echo.HidePort = true
	s.echo.HTTPErrorHandler = s.handleError
	s.echo.IPExtractor = clientAddress(cfg.TrustedProxies)
	s.routes()
	if traces == nil {
		traces = tracing.Off()
	}
	s.handler = traces.Handler(s.echo)
	return s, nil
}

// clientAddress says where a request comes from, for login throttling and the log. Anyone can
// send X-Forwarded-For, so it is read only from the configured proxies: echo would otherwise
// believe any loopback, link-local or private peer, and without an extractor any peer at all.
func clientAddress(trusted []netip.Prefix) echo.IPExtractor {
	if len(trusted) == 0 {
		return echo.ExtractIPDirect()
	}
	options := []echo.TrustOption{echo.TrustLoopback(false), echo.TrustLinkLocal(false), echo.TrustPrivateNet(false)}
	for _, p := range trusted {
		p = p.Masked()
		options = append(options, echo.TrustIPRange(&net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}))
	}
	return echo.ExtractIPFromXFFHeader(options...)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Routes lists every route the server answers, as registered: the access-matrix test fails for a
// route its table does not know.
func (s *Server) Routes() []*echo.Route { return s.echo.Routes() }

// ServeHTTP lets tests and other servers drive the desk directly.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// Timeouts of the HTTP server. Reads are bounded to stop slow-loris clients; the write timeout
// is left to handlers because websockets live for hours.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	idleTimeout       = 120 * time.Second
	shutdownTimeout   = 25 * time.Second
)

// Serve accepts connections on ln until ctx is done. Then it drains: for the configured period
// /readyz answers 503 while every other request is still served, each on a connection closed
// after its answer, so load balancers move traffic away before a connection is refused. Then it
// stops taking new requests and waits for in-flight ones (up to shutdownTimeout) before returning.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if s.reads != nil {
		defer s.reads.Close()
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(s.logger.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.draining.Store(true)
	if s.cfg.DrainPeriod > 0 {
		s.logger.Info("draining: /readyz answers 503", "period", s.cfg.DrainPeriod)
		select {
		case err := <-errc:
			return err
		case <-s.after(s.cfg.DrainPeriod):
		}
	}
	s.logger.Info("shutting down", "grace", shutdownTimeout)
	shutdownCtx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	close(s.shutdown)
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return err
	}
	socketsClosed := make(chan struct{})
	go func() {
		s.sockets.Wait()
		close(socketsClosed)
	}()
	select {
	case <-socketsClosed:
	case <-shutdownCtx.Done():
		return shutdownCtx.Err()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
