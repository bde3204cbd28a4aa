package server

import (
	"context"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/board"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/live"
	"github.com/handoffdesk/desk/views"
)

// threadOnly are the kinds that change no more of an open package view than its thread (a
// message, a reply's delivery) or who is viewing it: the rest of the view is not rendered anew.
var threadOnly = []events.Kind{events.Message, events.ReplyDelivery, events.Viewing}

// othersViewing are the names of those who have the package open on any instance, but user.
// Agents' display names are the desk's own people, not the customer's data: nothing to mask.
func (s *Server) othersViewing(ctx context.Context, user auth.User, handoffID int64) ([]string, error) {
	vs, err := live.Viewers(ctx, s.db, handoffID)
	return namesBut(vs, user.ID), err
}

func namesBut(vs []live.Viewer, userID int64) []string {
	var names []string
	for _, v := range vs {
		if v.UserID != userID {
			names = append(names, v.Name)
		}
	}
	return names
}

// viewersKey is a batch's memo key for who has a package open: read once per batch for all the
// package's open views, rendered for each (no one is shown themselves).
type viewersKey int64

// viewingFragment is who else has the package open, for w's page.
func (s *Server) viewingFragment(ctx context.Context, w watcher, item board.Item, b live.Batch) (fragment, error) {
	vs, err := memo(b.Shared, viewersKey(item.ID), func() ([]live.Viewer, error) {
		ctx, cancel := context.WithTimeout(ctx, loadTimeout)
		defer cancel()
		return live.Viewers(ctx, s.db, item.ID)
	})
	if err != nil {
		return fragment{}, err
	}
	return rendered(ctx, fragment{Target: "viewing-" + item.PublicID, Op: "replace"}, views.OthersViewing(item.PublicID, namesBut(vs, w.user.ID)))
}
