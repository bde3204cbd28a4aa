package server

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/handoff"
	"github.com/handoffdesk/desk/internal/intake"
	"github.com/handoffdesk/desk/internal/live"
)

// handlePostMessage takes a message of the conversation after the handoff from the bot that
// relays it (SPEC §2a): 201 for a new one, 200 for the same one again.
func (s *Server) handlePostMessage(c echo.Context) error {
	body, err := readJSON(c)
	if err != nil {
		return err
	}
	posted, err := s.postMessage(c.Request().Context(), sender(c), c.Param("id"), body)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if posted.Replayed {
		status = http.StatusOK
	}
	return c.JSON(status, posted)
}

// postMessage appends bot's message, a JSON body, to the thread of handoffID: the REST route and
// the MCP tool post_customer_message.
func (s *Server) postMessage(ctx context.Context, bot intake.Sender, handoffID string, body []byte) (conversation.Posted, error) {
	m, err := conversation.Decode(body)
	if err != nil {
		return conversation.Posted{}, err
	}
	return s.actions.PostMessage(ctx, bot.APIKeyID, bot.QueueIDs, handoffID, m)
}

// handleMessages answers the package's thread after ?after=SEQ, for a bot that reads it back.
func (s *Server) handleMessages(c echo.Context) error {
	after, err := afterParam(c)
	if err != nil {
		return err
	}
	thread, err := s.thread(c.Request().Context(), sender(c), c.Param("id"), after, 0)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, thread)
}

// threadAnswer is the thread after a seq, with the package's status: a bot that reads no reply
// learns from it whether one can still come.
type threadAnswer struct {
	Messages []conversation.Message `json:"messages"`
	Status   handoff.Status         `json:"status"`
}

// MaxWait bounds how long a read of the thread waits for the human's next reply.
const MaxWait = 30 * time.Second

// thread reads bot's package handoffID after seq after. With a wait, a read that finds no agent's
// reply on a package still open waits up to wait for one, or for the package to close: a bot
// paused on the human (an interrupt in its framework) resumes with the answer. It waits on the
// live hub, which the package's events wake, never by reading the database in a loop.
func (s *Server) thread(ctx context.Context, bot intake.Sender, handoffID string, after int, wait time.Duration) (threadAnswer, error) {
	read, err := s.actions.Messages(ctx, bot.QueueIDs, handoffID, after)
	if err != nil || wait <= 0 || answered(read) {
		return threadAnswer{Messages: read.Messages, Status: read.Status}, err
	}
	timer := time.NewTimer(min(wait, MaxWait))
	defer timer.Stop()
	woken := make(chan struct{}, 1)
	wake := func(_ []live.Batch, _ live.Ending) {
		select {
		case woken <- struct{}{}:
		default:
		}
	}
	// Subscribed before the next read, so that a reply committed between the two wakes it.
	sub, _ := s.hub.Subscribe(func(e events.Event) bool { return e.HandoffID == read.RowID }, wake, s.shutdown)
	defer s.hub.Unsubscribe(sub)
	sub.Start()
	for {
		read, err = s.actions.Messages(ctx, bot.QueueIDs, handoffID, after)
		if err != nil || answered(read) {
			return threadAnswer{Messages: read.Messages, Status: read.Status}, err
		}
		select {
		case <-woken: // the package changed: read again
		case <-timer.C:
			return threadAnswer{Messages: read.Messages, Status: read.Status}, nil
		case <-s.shutdown:
			return threadAnswer{Messages: read.Messages, Status: read.Status}, nil
		case <-ctx.Done():
			return threadAnswer{}, ctx.Err()
		}
	}
}

// answered reports whether a waiting bot has its answer in read: the human replied, or the
// package is no longer open and no reply will come.
func answered(read actions.Reading) bool {
	return !read.Status.Open() || slices.ContainsFunc(read.Messages, func(m conversation.Message) bool { return m.Role == conversation.Agent })
}

// afterParam reads ?after=SEQ: the thread after that message; absent, the whole thread.
func afterParam(c echo.Context) (int, error) {
	v := c.QueryParam("after")
	if v == "" {
		return 0, nil
	}
	after, err := strconv.Atoi(v)
	if err != nil || after < 0 {
		return 0, desk.BadParam("after", "after must be a message's seq, a whole number from 0, not %q", v)
	}
	return after, nil
}
