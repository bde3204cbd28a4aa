package server

import (
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"github.com/handoffdesk/desk/internal/conversation"
	"github.com/handoffdesk/desk/internal/desk"
)

// handlePostMessage takes a message of the conversation after the handoff from the bot that
// relays it (SPEC §2a): 201 for a new one, 200 for the same one again.
func (s *Server) handlePostMessage(c echo.Context) error {
	posted, err := s.postMessage(c)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if posted.Replayed {
		status = http.StatusOK
	}
	return c.JSON(status, posted)
}

func (s *Server) postMessage(c echo.Context) (conversation.Posted, error) {
	body, err := readJSON(c)
	if err != nil {
		return conversation.Posted{}, err
	}
	m, err := conversation.Decode(body)
	if err != nil {
		return conversation.Posted{}, err
	}
	bot := sender(c)
	return s.actions.PostMessage(c.Request().Context(), bot.APIKeyID, bot.QueueIDs, c.Param("id"), m)
}

// handleMessages answers the package's thread after ?after=SEQ, for a bot that reads it back.
func (s *Server) handleMessages(c echo.Context) error {
	after, err := afterParam(c)
	if err != nil {
		return err
	}
	msgs, err := s.actions.Messages(c.Request().Context(), sender(c).QueueIDs, c.Param("id"), after)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string][]conversation.Message{"messages": msgs})
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
