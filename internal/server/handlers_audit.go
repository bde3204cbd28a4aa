package server

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/audit"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/views"
)

// handleAudit shows a page of the audit trail, newest first, with the filters of the query and
// the cursor "after". A filter it cannot read is answered with the page again, 400, the complaint
// beside its field and the form as the person filled it in.
func (s *Server) handleAudit(c echo.Context) error {
	ctx := c.Request().Context()
	user := currentUser(c)
	q := c.QueryParams()
	v := views.AuditView{Viewer: *viewer(c), Filter: auditFilterOf(q)}
	for _, k := range events.Kinds() {
		v.Kinds = append(v.Kinds, string(k))
	}
	f, after, handoffID, err := s.auditFilter(ctx, q)
	if desk.ErrorCode(err) == desk.BadRequest {
		v.Filter = withFilterError(v.Filter, err)
		return s.render(c, statusOf[desk.BadRequest], views.AuditPage(v))
	}
	if err != nil {
		return err
	}
	entries, next, err := audit.Page(ctx, s.reads, user, f, after)
	if err != nil {
		return err
	}
	queues, err := s.queueNamesByID(ctx)
	if err != nil {
		return err
	}
	v.Entries = make([]views.AuditEntry, 0, len(entries))
	var shown audit.Shown
	for _, e := range entries {
		shown.Add(e.HandoffID, e.Unmasked)
		v.Entries = append(v.Entries, auditEntryOf(e, queues))
	}
	base := f.Query()
	if next != nil {
		more := f.Query()
		more.Set("after", next.String())
		v.More = "/audit?" + more.Encode()
	}
	v.CSV, v.JSONL = "/audit/export.csv?"+base.Encode(), "/audit/export.jsonl?"+base.Encode()
	if handoffID != 0 {
		reads, err := audit.ViewsOf(ctx, s.db, handoffID)
		if err != nil {
			return err
		}
		for _, pv := range reads {
			v.PIIViews = append(v.PIIViews, viewsPIIView(pv))
		}
	}
	if err := audit.Record(ctx, s.db, user.ID, audit.ViaPage, shown); err != nil {
		return err
	}
	return s.render(c, http.StatusOK, views.AuditPage(v))
}

// auditFilter reads the page's filter and cursor, and checks that what they name exists.
func (s *Server) auditFilter(ctx context.Context, q url.Values) (f audit.Filter, after *audit.Cursor, handoffID int64, err error) {
	if f, err = audit.ParseFilter(q, "after"); err != nil {
		return f, nil, 0, err
	}
	if raw := q.Get("after"); raw != "" {
		cursor, err := audit.ParseCursor(raw)
		if err != nil {
			return f, nil, 0, err
		}
		after = &cursor
	}
	handoffID, err = f.Check(ctx, s.db)
	return f, after, handoffID, err
}

// withFilterError puts a refused filter's complaint beside the field it names, or above the form
// when it names none of them (a parameter the form does not have).
func withFilterError(f views.AuditFilter, err error) views.AuditFilter {
	param, msg := desk.FieldsOf(err)["param"], desk.ErrorMessage(err)
	switch param {
	case "package", "actor", "kind", "queue", "since", "until", "presence":
		f.Errors = map[string]string{param: msg}
	default:
		f.Error = msg
	}
	return f
}

// queueNamesByID names the queue ids some events' details hold.
func (s *Server) queueNamesByID(ctx context.Context) (map[int64]string, error) {
	all, err := s.queues.All(ctx)
	if err != nil {
		return nil, err
	}
	names := make(map[int64]string, len(all))
	for _, q := range all {
		names[q.ID] = q.Name
	}
	return names, nil
}

// auditFilterOf is the filter form as the person filled it in.
func auditFilterOf(q map[string][]string) views.AuditFilter {
	get := func(k string) string {
		if vs := q[k]; len(vs) > 0 {
			return vs[0]
		}
		return ""
	}
	return views.AuditFilter{Package: get("package"), Actor: get("actor"), Kind: get("kind"), Queue: get("queue"),
		Since: get("since"), Until: get("until"), Presence: get("presence") == audit.ShowPresence}
}

func auditEntryOf(e audit.Entry, queues map[int64]string) views.AuditEntry {
	return views.AuditEntry{At: e.At.UTC().Format(audit.TimeLayout), Datetime: e.At.UTC().Format(time.RFC3339Nano),
		Actor: e.Actor, Kind: string(e.Kind), Package: e.Package, Queue: e.Queue, Summary: audit.Summary(e, queues)}
}

func viewsPIIView(v audit.View) views.PIIView {
	return views.PIIView{At: v.At.UTC().Format(audit.TimeLayout), User: v.User, Via: string(v.Via), Fields: strings.Join(v.Fields, ", ")}
}

// detailText is an event's detail as one line of JSON, its keys in order.
func detailText(d map[string]any) string {
	if len(d) == 0 {
		return ""
	}
	b, err := json.Marshal(d)
	if err != nil {
		return ""
	}
	return string(b)
}

// auditLine is one event in the JSONL export.
type auditLine struct {
	Seq     int64          `json:"seq"`
	At      time.Time      `json:"at"`
	Actor   string         `json:"actor"`
	Kind    events.Kind    `json:"kind"`
	Package string         `json:"package,omitempty"`
	Queue   string         `json:"queue,omitempty"`
	Subject string         `json:"subject,omitempty"`
	Detail  map[string]any `json:"detail"`
	Summary string         `json:"summary"`
}

func (s *Server) handleAuditCSV(c echo.Context) error {
	return s.exportAudit(c, "text/csv; charset=utf-8", func(out io.Writer, queues map[int64]string) func(audit.Entry) error {
		w := csv.NewWriter(out)
		header := []string{"seq", "at", "actor", "kind", "package", "queue", "subject", "detail", "summary"}
		return func(e audit.Entry) error {
			if header != nil {
				if err := w.Write(header); err != nil {
					return err
				}
				header = nil
			}
			record := []string{strconv.FormatInt(e.Seq, 10), e.At.UTC().Format(time.RFC3339Nano), e.Actor, string(e.Kind),
				e.Package, e.Queue, e.Subject, detailText(e.Detail), audit.Summary(e, queues)}
			for i, cell := range record {
				record[i] = inertCell(cell)
			}
			if err := w.Write(record); err != nil {
				return err
			}
			w.Flush()
			return w.Error()
		}
	})
}

// inertCell keeps a spreadsheet from reading a cell as a formula: a bot chooses its packages' ids
// and an agent their notes, and "=HYPERLINK(…)" opened in a supervisor's spreadsheet would run.
// Spreadsheets trim a cell before they look for a formula, and some read the full-width signs
// (＝＋－＠) as the ASCII ones: a cell whose first character after any white space or control
// character starts a formula, or that starts with a tab, CR or line feed, gets a leading quote.
func inertCell(cell string) string {
	trimmed := strings.TrimLeftFunc(cell, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) })
	first, _ := utf8.DecodeRuneInString(trimmed)
	if trimmed != cell || strings.ContainsRune("=+-@＝＋－＠", first) {
		if cell != "" {
			return "'" + cell
		}
	}
	return cell
}

func (s *Server) handleAuditJSONL(c echo.Context) error {
	return s.exportAudit(c, "application/x-ndjson; charset=utf-8", func(out io.Writer, queues map[int64]string) func(audit.Entry) error {
		enc := json.NewEncoder(out)
		enc.SetEscapeHTML(false)
		return func(e audit.Entry) error {
			return enc.Encode(auditLine{Seq: e.Seq, At: e.At.UTC(), Actor: e.Actor, Kind: e.Kind, Package: e.Package,
				Queue: e.Queue, Subject: e.Subject, Detail: e.Detail, Summary: audit.Summary(e, queues)})
		}
	})
}

// exportAudit streams every event the query's filters select, newest first, masked for the
// exporter's role, as line writes. A bad filter is answered with its 400 before anything is sent.
// The export's one pii_views row, naming every package it showed unmasked, is written when it
// ends, also when it is cut short: what was sent was shown.
func (s *Server) exportAudit(c echo.Context, contentType string, writer func(io.Writer, map[int64]string) func(audit.Entry) error) error {
	ctx := c.Request().Context()
	user := currentUser(c)
	f, err := audit.ParseFilter(c.QueryParams())
	if err != nil {
		return err
	}
	if _, err := f.Check(ctx, s.db); err != nil {
		return err
	}
	queues, err := s.queueNamesByID(ctx)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, contentType)
	h.Set("Cache-Control", "no-store")
	c.Response().WriteHeader(http.StatusOK)
	var shown audit.Shown
	write := writer(c.Response(), queues)
	rows := 0
	err = audit.Each(ctx, s.db, user, f, func(e audit.Entry) error {
		shown.Add(e.HandoffID, e.Unmasked)
		rows++
		if rows%256 == 0 {
			c.Response().Flush()
		}
		return write(e)
	})
	if recErr := audit.Record(context.WithoutCancel(ctx), s.db, user.ID, audit.ViaExport, shown); recErr != nil {
		s.logger.Error("record the audit export's PII reads", "err", recErr)
	}
	if err != nil {
		// The 200 and some lines are gone: a clean end would pass the cut export for a whole one.
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			s.logger.Error("audit export cut short", "rows", rows, "err", err)
		}
		panic(http.ErrAbortHandler)
	}
	return nil
}
