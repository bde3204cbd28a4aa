// Package access changes what a person may reach: a logout, a disabled account, a new role, a
// queue membership removed; and what a bot's key signs with, a rotated webhook secret. Each change commits with its row in the event log, so that every
// instance, reading the log, closes the person's open sockets and forgets their cached sessions:
// a page that stays open must not go on showing what was rendered for the access they had.
//
// It is a package of its own because it writes through auth, queue and events, and events
// already depends (through handoff) on auth.
package access

import (
	"cmp"
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/queue"
)

// Service makes the changes. The actor of each is the user id making it, 0 for an operator at
// the command line.
type Service struct {
	db     *pgxpool.Pool
	people *auth.Service
	now    func() time.Time
}

// New returns a Service over db; people is this process's auth service, whose session cache a
// logout here clears at once.
func New(db *pgxpool.Pool, people *auth.Service) *Service {
	return &Service{db: db, people: people, now: time.Now}
}

// SignOut ends the session of token; a token with no session is not an error.
func (s *Service) SignOut(ctx context.Context, token string) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		userID, err := s.people.EndSession(ctx, tx, token)
		if err != nil || userID == 0 {
			return nil, err
		}
		return &events.Change{Kind: events.SignedOut, UserID: userID, ActorUser: &userID}, nil
	})
}

// Disable turns a user's login off and ends their sessions; the packages they held go back to
// their queues. Disabling a disabled user changes nothing; the last admin is not disabled.
func (s *Service) Disable(ctx context.Context, userID, actor int64) error {
	return s.changes(ctx, func(tx pgx.Tx) ([]events.Change, error) {
		if last, err := auth.LockAdmins(ctx, tx, userID); err != nil || last {
			return nil, cmp.Or(err, auth.LastAdmin())
		}
		changed, err := auth.Disable(ctx, tx, userID)
		if err != nil || !changed {
			return nil, err
		}
		returned, err := actions.ReturnHeld(ctx, tx, userID, nonZero(actor), s.now())
		if err != nil {
			return nil, err
		}
		return append([]events.Change{{Kind: events.UserDisabled, UserID: userID, ActorUser: nonZero(actor),
			Detail: map[string]any{"returned_packages": len(returned)}}}, returned...), nil
	})
}

// DisableImpact is what disabling a user would do, for the admin to confirm first.
type DisableImpact struct {
	Held     []actions.Held // the packages that go back to their queues
	Sessions int            // the sessions that end
}

// ImpactOfDisable reads what Disable would do to the user now.
func (s *Service) ImpactOfDisable(ctx context.Context, userID int64) (DisableImpact, error) {
	held, err := actions.HeldBy(ctx, s.db, userID)
	if err != nil {
		return DisableImpact{}, err
	}
	sessions, err := auth.OpenSessions(ctx, s.db, userID)
	return DisableImpact{Held: held, Sessions: sessions}, err
}

// OpenFromKey counts the open packages a bot key sent, which revoking it leaves in their queues.
func (s *Service) OpenFromKey(ctx context.Context, keyID int64) (int, error) {
	return actions.OpenFrom(ctx, s.db, keyID)
}

// SetRole gives a user a role. A promotion also closes their sockets: what they show was
// rendered without what the new role sees. The last admin keeps the role.
func (s *Service) SetRole(ctx context.Context, userID int64, role auth.Role, actor int64) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		last, err := auth.LockAdmins(ctx, tx, userID)
		if err != nil {
			return nil, err
		}
		return setRole(ctx, tx, userID, role, last, actor)
	})
}

// setRole gives the user the role inside tx, after auth.LockAdmins said whether they are the last
// admin.
func setRole(ctx context.Context, tx pgx.Tx, userID int64, role auth.Role, lastAdmin bool, actor int64) (*events.Change, error) {
	if role != auth.RoleAdmin && lastAdmin {
		return nil, auth.LastAdmin()
	}
	was, err := auth.SetRole(ctx, tx, userID, role)
	if err != nil || was == role {
		return nil, err
	}
	return &events.Change{Kind: events.RoleChanged, UserID: userID, ActorUser: nonZero(actor),
		Detail: map[string]any{"role": role, "from_role": was}}, nil
}

// RemoveMember takes a user off a queue; NotFound when they did not work it.
func (s *Service) RemoveMember(ctx context.Context, userID int64, q queue.Queue, actor int64) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		if err := queue.RemoveMember(ctx, tx, userID, q.ID); err != nil {
			return nil, err
		}
		return &events.Change{Kind: events.MemberRemoved, UserID: userID, QueueID: q.ID, Queue: q.Name,
			ActorUser: nonZero(actor)}, nil
	})
}

// RotateWebhookSecret gives a bot key a new webhook secret, the old one signing beside it for
// overlap (see auth.RotateWebhookSecret). The new secret is returned to be shown once; the log
// records the rotation and its window, never a secret.
func (s *Service) RotateWebhookSecret(ctx context.Context, keyID int64, overlap time.Duration, actor int64) (auth.RotatedSecret, error) {
	var r auth.RotatedSecret
	err := s.change(ctx, func(tx pgx.Tx) (c *events.Change, err error) {
		r, err = auth.RotateWebhookSecret(ctx, tx, keyID, overlap, s.now())
		if err != nil {
			return nil, err
		}
		detail := map[string]any{"api_key_id": r.Key.ID, "key": r.Key.Name, "overlap": overlap.String()}
		if !r.PreviousUntil.IsZero() {
			detail["previous_until"] = r.PreviousUntil.UTC()
		}
		return &events.Change{Kind: events.WebhookSecretRotated, ActorUser: nonZero(actor), Detail: detail}, nil
	})
	return r, err
}

// change runs f in a transaction and logs the change it returns in the same one; f returns nil
// when nothing changed.
func (s *Service) change(ctx context.Context, f func(pgx.Tx) (*events.Change, error)) error {
	return s.changes(ctx, func(tx pgx.Tx) ([]events.Change, error) {
		c, err := f(tx)
		if err != nil || c == nil {
			return nil, err
		}
		return []events.Change{*c}, nil
	})
}

// changes is change for f that makes several changes at once, or none. Once they commit, this
// instance forgets the sessions and keys they concern at once; the others do when their hub
// reads the log.
func (s *Service) changes(ctx context.Context, f func(pgx.Tx) ([]events.Change, error)) error {
	var cs []events.Change
	err := pgx.BeginFunc(ctx, s.db, func(tx pgx.Tx) error {
		var err error
		cs, err = f(tx)
		if err != nil || len(cs) == 0 {
			return err
		}
		now := s.now()
		for i := range cs {
			if cs[i].At.IsZero() {
				cs[i].At = now
			}
		}
		b := &pgx.Batch{}
		if err := events.Queue(b, cs...); err != nil {
			return err
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return err
	}
	for _, c := range cs {
		Forget(s.people, c.Kind, c.UserID)
	}
	return nil
}

// Forget drops what people caches about a change of kind: the sessions of the person whose access
// changed, or every key when a key changed. Every instance calls it for each row its hub reads.
func Forget(people *auth.Service, kind events.Kind, userID int64) {
	switch {
	case kind.ChangesAccess():
		people.ForgetUser(userID)
	case kind == events.APIKeyChanged || kind == events.APIKeyRevoked || kind == events.WebhookSecretRotated:
		people.ForgetBots()
	}
}

func nonZero(id int64) *int64 {
	if id == 0 {
		return nil
	}
	return &id
}
