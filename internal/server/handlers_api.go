package server

import (
	"compress/flate"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/metrics"
	"github.com/handoffdesk/desk/internal/tracing"
)

// maxPackageBytes bounds a package body after decompression (spec: 256 KiB).
const maxPackageBytes = 256 << 10

const botKey = "bot"

// requireBot authenticates a bearer API key.
func (s *Server) requireBot(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		// The scheme is case-insensitive (RFC 9110 §11.1): "bearer" is Bearer.
		scheme, token, _ := strings.Cut(c.Request().Header.Get(echo.HeaderAuthorization), " ")
		if !strings.EqualFold(scheme, "Bearer") {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="handoff-desk"`)
			return desk.Errorf(desk.Unauthorized, "send the API key as Authorization: Bearer <key>")
		}
		key, err := s.auth.Bot(c.Request().Context(), strings.TrimSpace(token))
		if err != nil {
			c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="handoff-desk", error="invalid_token"`)
			return err
		}
		c.Set(botKey, key)
		return next(c)
	}
}

func sender(c echo.Context) intake.Sender {
	key := c.Get(botKey).(auth.APIKey)
	bot := intake.Sender{APIKeyID: key.ID, QueueIDs: key.QueueIDs}
	// The bot's run, which its package's span links to: read only while requests are traced, when
	// the request has a span context of its own.
	if req := c.Request(); trace.SpanContextFromContext(req.Context()).IsValid() {
		bot.Run = tracing.Caller(req.Header)
	}
	return bot
}

// readJSON reads a JSON request body of at most maxPackageBytes, gzip-compressed or not.
func readJSON(c echo.Context) ([]byte, error) {
	r := c.Request()
	if mediaType, _, err := mime.ParseMediaType(r.Header.Get(echo.HeaderContentType)); err != nil || mediaType != echo.MIMEApplicationJSON {
		return nil, desk.Errorf(desk.Unsupported, "send the body as Content-Type: application/json (got %q)", r.Header.Get(echo.HeaderContentType))
	}
	// The compressed body may not be larger than the limit either: gzip never needs that much room
	// for JSON under the limit, and it keeps a huge upload from being read at all.
	var body io.Reader = http.MaxBytesReader(c.Response(), r.Body, maxPackageBytes+1)
	switch encoding := strings.ToLower(r.Header.Get(echo.HeaderContentEncoding)); encoding {
	case "", "identity":
	case "gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, desk.Errorf(desk.BadRequest, "the body is not valid gzip: %v", err)
		}
		// Close only returns the decompression error, which reading the body below reports.
		defer func() { _ = zr.Close() }()
		body = zr
	default:
		return nil, desk.Errorf(desk.Unsupported, "Content-Encoding %q is not supported; send gzip or nothing", encoding)
	}
	data, err := io.ReadAll(io.LimitReader(body, maxPackageBytes+1))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge) || len(data) > maxPackageBytes:
		return nil, desk.Errorf(desk.TooLarge, "the body is over %d KiB (after decompression)", maxPackageBytes>>10)
	case errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.As(err, new(flate.CorruptInputError)):
		return nil, desk.Errorf(desk.BadRequest, "the gzip body is corrupt or truncated: %v", err)
	case err != nil:
		return nil, err
	}
	return data, nil
}

// submitAnswer is the 201/200 body of a submitted package.
type submitAnswer struct {
	intake.Receipt
	URL string `json:"url"`
}

func (s *Server) handleSubmitHandoff(c echo.Context) error {
	body, err := readJSON(c)
	if err != nil {
		s.metrics.Intake("", intakeResult(err))
		return err
	}
	answer, err := s.submit(c.Request().Context(), sender(c), body)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if answer.Replayed {
		status = http.StatusOK
	}
	return c.JSON(status, answer)
}

// submit takes a package from bot, counted in handoffdesk_intake_total: POST /api/v1/handoffs and
// the MCP tool handoff_to_human.
func (s *Server) submit(ctx context.Context, bot intake.Sender, body []byte) (submitAnswer, error) {
	receipt, err := s.submitPackage(ctx, bot, body)
	if err != nil {
		s.metrics.Intake("", intakeResult(err))
		return submitAnswer{}, err
	}
	result := metrics.Created
	if receipt.Replayed {
		result = metrics.Replayed
	}
	s.metrics.Intake(receipt.Queue, result)
	return submitAnswer{Receipt: receipt, URL: s.cfg.BaseURL + "/handoffs/" + receipt.HandoffID}, nil
}

func (s *Server) submitPackage(ctx context.Context, bot intake.Sender, body []byte) (intake.Receipt, error) {
	pkg, err := handoff.Decode(body)
	var invalid *handoff.ValidationError
	if errors.As(err, &invalid) {
		// Report the queue's own rules in the same answer, so a bot fixes everything at once.
		return intake.Receipt{}, s.intake.AddQueueRules(ctx, pkg, err)
	}
	if err != nil {
		return intake.Receipt{}, err
	}
	receipt, err := s.intake.Submit(ctx, bot, pkg)
	if err != nil {
		s.followUnanswered(err, pkg.HandoffID)
	}
	// Intake decided a warm package's first ring with its batch. A replay answers as the first
	// answer did, who it rings now or the estimate, and so does a package intake left to ring.
	if err == nil && receipt.Status == handoff.StatusQueued && pkg.TransferMode == handoff.TransferModeWarm && !receipt.RingDecided() {
		s.ring(ctx, &receipt)
	}
	return receipt, err
}

// intakeResult names a refusal for handoffdesk_intake_total as its answer names it: the guard's
// reason when it gave one, else the error's code. The queue is left out of a refusal's labels
// since the package may name any queue at all.
func intakeResult(err error) string {
	if u := unavailable(err); u != nil {
		return u.Reason
	}
	var e *desk.Error
	if errors.As(err, &e) && slices.Contains(intakeReasons, e.Reason) {
		return e.Reason
	}
	if code := errorCode(err); slices.Contains(intakeCodes, code) {
		return code
	}
	return desk.Internal
}

// The values intakeResult gives, a closed set, each counted from 0 (metrics.Refusals): the codes
// of the errors intake answers (a bot without a valid key is refused before it, and not counted)
// and the reasons of its guards and of a desk that cannot answer now.
var (
	intakeCodes = []string{desk.BadRequest, desk.Invalid, desk.Conflict, desk.NotFound, desk.Forbidden, desk.RateLimited,
		desk.TooLarge, desk.Unsupported, desk.Unavailable, desk.Internal}
	intakeReasons = []string{handoff.ReasonOpenHandoff, handoff.ReasonContactHourly, handoff.ReasonContactDaily,
		handoff.ReasonCircular, intake.ReasonDeferred, ReasonBusy, ReasonDatabaseUnavailable}
)

// followUnanswered logs what became of a package whose request ended before its batch answered
// (the client left, or the deadline passed and the client was told 503). Such a package often
// commits a moment later: the log says so, rather than counting an error that never was, and
// keeps ERROR for packages that really failed.
func (s *Server) followUnanswered(err error, handoffID string) {
	var late *intake.Unanswered
	if !errors.As(err, &late) {
		return
	}
	why := "client left"
	if errors.Is(late.Cause, context.DeadlineExceeded) {
		why = "deadline passed"
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), unansweredWait)
		defer cancel()
		receipt, err := late.Outcome(ctx)
		switch {
		case err == nil:
			s.logger.Info(why+"; package committed", "handoff_id", receipt.HandoffID, "queue", receipt.Queue, "replayed", receipt.Replayed)
		case ctx.Err() != nil:
			s.logger.Warn(why+"; package's batch has not answered", "handoff_id", handoffID, "waited", unansweredWait)
		case unavailable(err) != nil:
			s.logger.Warn(why+"; package not committed", "handoff_id", handoffID, "reason", unavailable(err).Reason, "err", err)
		case desk.ErrorCode(err) != desk.Internal:
			s.logger.Info(why+"; package refused", "handoff_id", handoffID, "err", err)
		default:
			s.logger.Error(why+"; package failed", "handoff_id", handoffID, "err", err)
		}
	}()
}

// unansweredWait bounds followUnanswered's wait. A batch that fails as a whole is written again
// package by package, each write bounded on its own, so its answer can take minutes.
const unansweredWait = 5 * time.Minute

func (s *Server) handleGetHandoff(c echo.Context) error {
	record, err := s.intake.Get(c.Request().Context(), sender(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, record)
}

func (s *Server) handleListHandoffs(c echo.Context) error {
	contactID := c.QueryParam("contact_id")
	if contactID == "" {
		return desk.Errorf(desk.BadRequest, "contact_id is required, e.g. ?contact_id=cust_9912&open=true")
	}
	openOnly := false
	switch c.QueryParam("open") {
	case "", "false":
	case "true":
		openOnly = true
	default:
		return desk.Errorf(desk.BadRequest, "open must be true or false, not %q", c.QueryParam("open"))
	}
	list, err := s.listHandoffs(c.Request().Context(), sender(c), contactID, openOnly)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, list)
}

// handoffList is the answer of GET /api/v1/handoffs?contact_id=….
type handoffList struct {
	Handoffs []intake.Record `json:"handoffs"`
}

func (s *Server) listHandoffs(ctx context.Context, bot intake.Sender, contactID string, openOnly bool) (handoffList, error) {
	records, err := s.intake.ForContact(ctx, bot, contactID, openOnly)
	return handoffList{Handoffs: records}, err
}

func (s *Server) handleCancelHandoff(c echo.Context) error {
	record, err := s.cancel(c.Request().Context(), sender(c), c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, record)
}

// cancel ends bot's package handoffID because the customer left, and answers what it is now.
func (s *Server) cancel(ctx context.Context, bot intake.Sender, handoffID string) (intake.Record, error) {
	if err := s.actions.Cancel(ctx, bot.APIKeyID, bot.QueueIDs, handoffID); err != nil {
		return intake.Record{}, err
	}
	return s.intake.Get(ctx, bot, handoffID)
}

func (s *Server) handleSchema(c echo.Context) error {
	return serveDocument(c, "application/schema+json", handoff.Schema())
}
