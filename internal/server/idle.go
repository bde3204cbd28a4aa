package server

import (
	"time"

	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/views"
)

// customerIdle is the idle badge of item as of now, by quiet, conversation.Quiet's answer for it:
// nil unless an agent holds the package (accepted, or awaiting approval) and its customer has left
// the agent's reply unanswered. The silence counts from the accept when that came later, and is
// idle from then plus the queue's customer_idle: the page shows the badge from that moment.
func customerIdle(quiet map[int64]time.Time, item board.Item, now time.Time) *views.CustomerIdle {
	if item.AcceptedAt == nil || (item.Status != handoff.StatusAccepted && item.Status != handoff.StatusAwaitingApproval) {
		return nil
	}
	since, ok := conversation.QuietSince(quiet, item.ID, *item.AcceptedAt)
	if !ok {
		return nil
	}
	at := since.Add(item.CustomerIdle)
	return &views.CustomerIdle{Since: since, At: at, Idle: !now.Before(at)}
}
