package queue

import (
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
)

// What a person chooses to be at the desk (migration 00027; live.Presence.Choose records it).
// Only an available person with a desk page open is rung; one who never chose is available.
const (
	Available = "available"
	OnBreak   = "break"
	Away      = "away"
)

// ReasonMissedRings is why the desk set an agent away: they let the queue's missed rings before
// away run out in a row (migration 00032, actions' ring).
const ReasonMissedRings = "missed_rings"

// Availabilities lists the choices, in the order the header offers them.
func Availabilities() []string { return []string{Available, OnBreak, Away} }

// Availability is what a person is at the desk, and, when the desk chose it for them rather than
// they, why (ReasonMissedRings); "" when they chose.
type Availability struct {
	Status string
	Reason string
}

const availabilitySQL = `SELECT status, coalesce(reason, '') FROM availability WHERE user_id = $1`

// QueueAvailabilityOf adds to b the read of what the user is into a (Available when they never
// chose), so that a page reads it in the round trip of its top bar.
func QueueAvailabilityOf(b *pgx.Batch, userID int64, a *Availability) {
	b.Queue(availabilitySQL, userID).QueryRow(func(row pgx.Row) error { return scanAvailability(row, a) })
}

func scanAvailability(row pgx.Row, a *Availability) error {
	*a = Availability{Status: Available}
	err := row.Scan(&a.Status, &a.Reason)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	return err
}

// QueueChoice queues into b the write of what the user is now: their own choice (reason ""), or
// the desk's for reason, which applies only while they are available: the desk never overrides a
// break or away they chose. Choosing what one already is keeps since, as how long counts from the
// change; choosing it oneself forgets the desk's reason. The caller also queues the presence
// event that refreshes the supervisors' rosters.
func QueueChoice(b *pgx.Batch, userID int64, status, reason string, now time.Time) {
	b.Queue(`INSERT INTO availability (user_id, status, since, reason) VALUES ($1, $2, $3, nullif($4, ''))
		ON CONFLICT (user_id) DO UPDATE SET status = excluded.status, since = excluded.since, reason = excluded.reason
		WHERE CASE WHEN excluded.reason IS NULL THEN availability.status <> excluded.status OR availability.reason IS NOT NULL
			ELSE availability.status = 'available' END`, userID, status, now, reason)
}
