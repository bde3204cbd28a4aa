package queue

import (
	"context"
	"time"

	"github.com/handoffdesk/desk/internal/desk"
)

// Defaults of the warm settings, matching the column defaults (migrations 00019 and 00032).
const (
	DefaultAcceptWindow    = 20 * time.Second
	DefaultWarmWait        = 60 * time.Second
	DefaultMissedRingsAway = 2
)

// SetWarm changes a queue's accept window (how long a ring waits for its agent) and warm wait
// (how long a warm package goes on ringing before it waits like any other). A zero duration
// keeps the current value.
func (s *Service) SetWarm(ctx context.Context, name string, acceptWindow, warmWait time.Duration) error {
	if acceptWindow < 0 || warmWait < 0 {
		return desk.Errorf(desk.Invalid, "accept window %s and warm wait %s must be positive", acceptWindow, warmWait)
	}
	tag, err := s.db.Exec(ctx, `
		UPDATE queues SET accept_window = coalesce(nullif($2::interval, '0'), accept_window),
			warm_wait = coalesce(nullif($3::interval, '0'), warm_wait)
		WHERE name = $1`, name, acceptWindow, warmWait)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return desk.Errorf(desk.NotFound, "queue %q does not exist", name)
	}
	return nil
}
