// Package audit is the desk's audit trail as supervisors and admins read it: the event log paged
// and exported with filters, its details masked per reader (trail.go), and the record of who was
// shown a package's personal data unmasked (pii_views, which this package owns and writes).
//
// The trail joins the log with the packages, queues and users it names, as board joins for the
// desk's pages: it writes none of those tables, and events stays the log's one writer.
package audit

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is a pool, a connection or a transaction.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Via is where someone was shown personal data unmasked.
type Via string

const (
	ViaPage    Via = "page"    // the package page
	ViaSidebar Via = "sidebar" // the CRM sidebar
	ViaFrame   Via = "frame"   // a websocket frame: queue cards, the package's header
	ViaExport  Via = "export"  // an export: evals, the audit trail
)

// Shown gathers what one page view, frame or export showed unmasked: the packages and the union of
// their fields. Its zero value shows nothing.
type Shown struct {
	ids    []int64
	fields []string
}

// Add notes that package handoffID was shown with fields unmasked; no fields, nothing shown.
func (s *Shown) Add(handoffID int64, fields []string) {
	if len(fields) == 0 {
		return
	}
	if !slices.Contains(s.ids, handoffID) {
		s.ids = append(s.ids, handoffID)
	}
	for _, f := range fields {
		if !slices.Contains(s.fields, f) {
			s.fields = append(s.fields, f)
		}
	}
}

// Merge adds what o shows to s: one view that shows several parts is recorded once.
func (s *Shown) Merge(o Shown) {
	for _, id := range o.ids {
		s.Add(id, o.fields)
	}
}

// Empty reports whether nothing was shown unmasked.
func (s Shown) Empty() bool { return len(s.ids) == 0 }

// Record writes one pii_views row for what userID was shown via a page, frame or export; nothing
// when nothing was shown unmasked. Callers record before they send: a view the desk could not
// record is a view it does not show.
func Record(ctx context.Context, db Querier, userID int64, via Via, s Shown) error {
	if s.Empty() {
		return nil
	}
	_, err := db.Exec(ctx, recordSQL, s.args(userID, via)...)
	return err
}

// QueueRecord adds Record's insert to b, so that a page records what it shows in the round trip
// of its last reads.
func QueueRecord(b *pgx.Batch, userID int64, via Via, s Shown) {
	if !s.Empty() {
		b.Queue(recordSQL, s.args(userID, via)...)
	}
}

const recordSQL = `INSERT INTO pii_views (user_id, via, handoff_ids, fields) VALUES ($1, $2, $3, $4)`

func (s Shown) args(userID int64, via Via) []any {
	fields := slices.Clone(s.fields)
	slices.Sort(fields)
	return []any{userID, string(via), s.ids, fields}
}

// View is one record of personal data shown unmasked.
type View struct {
	At     time.Time
	User   string // the viewer's email
	Via    Via
	Fields []string
}

// maxViews bounds the reads of one package listed: a package watched for hours gets a row per
// frame, and the newest say enough.
const maxViews = 200

// ViewsOf lists, newest first, who was shown package handoffID's personal data unmasked.
func ViewsOf(ctx context.Context, db Querier, handoffID int64) ([]View, error) {
	rows, err := db.Query(ctx, `
		SELECT v.at, u.email, v.via, v.fields FROM pii_views v JOIN users u ON u.id = v.user_id
		WHERE v.handoff_ids @> ARRAY[$1::bigint] ORDER BY v.at DESC, v.id DESC LIMIT $2`, handoffID, maxViews)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (View, error) {
		var v View
		err := row.Scan(&v.At, &v.User, &v.Via, &v.Fields)
		return v, err
	})
}
