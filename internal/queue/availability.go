package queue

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
)

// What a person chooses to be at the desk (migration 00027; live.Presence.Choose records it).
// Only an available person with a desk page open is rung; one who never chose is available.
const (
	Available = "available"
	OnBreak   = "break"
	Away      = "away"
)

// Availabilities lists the choices, in the order the header offers them.
func Availabilities() []string { return []string{Available, OnBreak, Away} }

// AvailabilityOf is what the user chose: Available when they never chose.
func AvailabilityOf(ctx context.Context, db Querier, userID int64) (string, error) {
	status := Available
	err := db.QueryRow(ctx, `SELECT status FROM availability WHERE user_id = $1`, userID).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		err = nil
	}
	return status, err
}
