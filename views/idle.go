package views

import "time"

// CustomerIdle is a held package's quiet customer (conversation.Quiet): since when they have left
// the agent's reply unanswered, when the queue's customer_idle makes that idle, and whether it
// had when the page was rendered.
type CustomerIdle struct {
	Since, At time.Time
	Idle      bool
}
