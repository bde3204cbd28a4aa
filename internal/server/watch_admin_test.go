package server

import (
	"testing"

	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/events"
)

// An admin's change of a queue or a key is the audit's: no socket is sent it, not a supervisor's
// roster that watches every change, nor a page of the queue it names. A change of a person's access
// reaches that person's sockets alone.
func TestSocketsAreNotSentAdminChanges(t *testing.T) {
	t.Parallel()
	roster := watcher{user: auth.User{ID: 2, Role: auth.RoleSupervisor}, roster: true}
	for _, k := range events.Kinds() {
		e := events.Event{Kind: k, QueueID: 1, UserID: 9}
		switch {
		case k.Configures():
			if roster.watches(e) || agentOnQueue1.watches(e) {
				t.Errorf("%s reaches a socket", k)
			}
		case k.ChangesAccess():
			if roster.watches(e) || agentOnQueue1.watches(e) {
				t.Errorf("%s about user 9 reaches another person's socket", k)
			}
			if self := (watcher{user: auth.User{ID: 9}}); !self.watches(e) {
				t.Errorf("%s about user 9 does not reach their socket", k)
			}
		}
	}
}

// Presence is about no package: it moves the supervisors' rosters and nothing else, so a queue's
// page is sent no frame for it (each connect and disconnect would otherwise send every socket one).
func TestPresenceReachesRostersAlone(t *testing.T) {
	t.Parallel()
	e := events.Event{Kind: events.Presence}
	if agentOnQueue1.watches(e) {
		t.Error("a presence event reaches a queue's page")
	}
	if roster := (watcher{user: auth.User{ID: 2, Role: auth.RoleSupervisor}, roster: true}); !roster.watches(e) {
		t.Error("a presence event does not reach the roster")
	}
}
