package access

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/handoffdesk/desk/internal/actions"
	"github.com/handoffdesk/desk/internal/auth"
	"github.com/handoffdesk/desk/internal/desk"
	"github.com/handoffdesk/desk/internal/events"
	"github.com/handoffdesk/desk/internal/queue"
	"github.com/handoffdesk/desk/internal/savedreply"
	"github.com/handoffdesk/desk/internal/sso"
	"github.com/handoffdesk/desk/internal/webhook"
)

// The admin console's changes. Each is made by its owner (auth, queue, actions, webhook) and
// logged in the same transaction with who made it and, in the row's detail, what changed from
// what to what.

// CreateUser adds a user who works queueIDs.
func (s *Service) CreateUser(ctx context.Context, n auth.NewUser, queueIDs []int64, actor int64) (auth.User, error) {
	var u auth.User
	err := s.changes(ctx, func(tx pgx.Tx) ([]events.Change, error) {
		var err error
		if u, err = auth.CreateUser(ctx, tx, n); err != nil {
			return nil, err
		}
		for _, id := range queueIDs {
			if _, err := queue.AddMember(ctx, tx, u.ID, id); err != nil {
				return nil, err
			}
		}
		return []events.Change{{Kind: events.UserCreated, UserID: u.ID, ActorUser: nonZero(actor),
			Detail: map[string]any{"email": u.Email, "name": u.DisplayName, "role": u.Role, "capacity": u.Capacity, "queues": queueIDs}}}, nil
	})
	return u, err
}

// UserEdit is the admin's form for a user.
type UserEdit struct {
	auth.Profile
	Role     auth.Role
	QueueIDs []int64
}

// EditUser changes a user's name, capacity, role and queues: one log row for each kind of change
// (role_changed, member_removed per queue left, user_changed for the rest).
func (s *Service) EditUser(ctx context.Context, userID int64, e UserEdit, actor int64) error {
	return s.changes(ctx, func(tx pgx.Tx) ([]events.Change, error) {
		last, err := auth.LockAdmins(ctx, tx, userID)
		if err != nil {
			return nil, err
		}
		was, err := auth.SetProfile(ctx, tx, userID, e.Profile)
		if err != nil {
			return nil, err
		}
		var cs []events.Change
		roleChange, err := setRole(ctx, tx, userID, e.Role, last, actor)
		if err != nil {
			return nil, err
		}
		if roleChange != nil {
			cs = append(cs, *roleChange)
		}
		current, err := queue.QueuesOf(ctx, tx, userID)
		if err != nil {
			return nil, err
		}
		detail := map[string]any{}
		var added []int64
		for _, id := range e.QueueIDs {
			if slices.Contains(current, id) {
				continue
			}
			if _, err := queue.AddMember(ctx, tx, userID, id); err != nil {
				return nil, err
			}
			added = append(added, id)
		}
		for _, id := range current {
			if slices.Contains(e.QueueIDs, id) {
				continue
			}
			if err := queue.RemoveMember(ctx, tx, userID, id); err != nil {
				return nil, err
			}
			cs = append(cs, events.Change{Kind: events.MemberRemoved, UserID: userID, QueueID: id, ActorUser: nonZero(actor)})
		}
		if len(added) > 0 {
			detail["queues_added"] = added
		}
		if was.DisplayName != e.DisplayName {
			detail["name"] = [2]string{was.DisplayName, e.DisplayName}
		}
		if was.Capacity != e.Capacity {
			detail["capacity"] = [2]int{was.Capacity, e.Capacity}
		}
		if len(detail) > 0 {
			cs = append(cs, events.Change{Kind: events.UserChanged, UserID: userID, ActorUser: nonZero(actor), Detail: detail})
		}
		return cs, nil
	})
}

// AddMember makes a user work a queue; adding a membership they have changes nothing.
func (s *Service) AddMember(ctx context.Context, userID, queueID, actor int64) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		added, err := queue.AddMember(ctx, tx, userID, queueID)
		if err != nil || !added {
			return nil, err
		}
		return &events.Change{Kind: events.UserChanged, UserID: userID, QueueID: queueID, ActorUser: nonZero(actor),
			Detail: map[string]any{"queues_added": []int64{queueID}}}, nil
	})
}

// Enable turns a disabled user's login back on.
func (s *Service) Enable(ctx context.Context, userID, actor int64) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		changed, err := auth.Enable(ctx, tx, userID)
		if err != nil || !changed {
			return nil, err
		}
		return &events.Change{Kind: events.UserEnabled, UserID: userID, ActorUser: nonZero(actor)}, nil
	})
}

// ResetPassword gives a user a temporary password, returned to be shown once, and ends their
// sessions; they choose a new one at their next login.
func (s *Service) ResetPassword(ctx context.Context, userID, actor int64) (string, error) {
	var password string
	err := s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		var err error
		if password, err = auth.ResetPassword(ctx, tx, userID); err != nil {
			return nil, err
		}
		return &events.Change{Kind: events.PasswordReset, UserID: userID, ActorUser: nonZero(actor)}, nil
	})
	return password, err
}

// ChangePassword is a person choosing a new password; their other sessions end.
func (s *Service) ChangePassword(ctx context.Context, userID int64, current, next, keepSession string) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		if err := s.people.ChangePassword(ctx, tx, userID, current, next, keepSession); err != nil {
			return nil, err
		}
		return &events.Change{Kind: events.PasswordChanged, UserID: userID, ActorUser: &userID}, nil
	})
}

// SetSSOOnly turns a user's password login off (ssoOnly) or on again: an SSO-only person signs in
// through the identity provider only. Their sessions stay; the log row says before → after.
func (s *Service) SetSSOOnly(ctx context.Context, userID int64, ssoOnly bool, actor int64) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		wasOn, err := auth.SetPasswordLogin(ctx, tx, userID, !ssoOnly)
		if err != nil || wasOn == !ssoOnly {
			return nil, err
		}
		return &events.Change{Kind: events.UserChanged, UserID: userID, ActorUser: nonZero(actor),
			Detail: map[string]any{"sso_only": [2]bool{!wasOn, ssoOnly}}}, nil
	})
}

// UnlinkSSO ends the user's links to accounts at identity providers (sso.Unlink); the log row
// names the issuers. Unlinking a user with no link changes nothing.
func (s *Service) UnlinkSSO(ctx context.Context, userID, actor int64) (bool, error) {
	var issuers []string
	err := s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		var err error
		if issuers, err = sso.Unlink(ctx, tx, userID); err != nil || len(issuers) == 0 {
			return nil, err
		}
		return &events.Change{Kind: events.UserChanged, UserID: userID, ActorUser: nonZero(actor),
			Detail: map[string]any{"sso_unlinked": issuers}}, nil
	})
	return len(issuers) > 0, err
}

// SetUnknownEmails says what signing in with a verified email no user has does (sso.RefuseUnknown
// or sso.CreateUnknown).
func (s *Service) SetUnknownEmails(ctx context.Context, policy string, actor int64) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		was, err := sso.SetUnknownEmails(ctx, tx, policy)
		if err != nil || was == policy {
			return nil, err
		}
		return &events.Change{Kind: events.SSOSettingsChanged, ActorUser: nonZero(actor),
			Detail: map[string]any{"unknown_emails": [2]string{was, policy}}}, nil
	})
}

// SaveQueue creates (id 0) or changes a queue from the admin form's values.
func (s *Service) SaveQueue(ctx context.Context, id int64, values map[string][]string, actor int64) (queue.Queue, error) {
	var saved queue.Queue
	err := s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		before, after, err := queue.Save(ctx, tx, id, values)
		if err != nil {
			return nil, err
		}
		saved = after
		if id == 0 {
			return &events.Change{Kind: events.QueueCreated, QueueID: after.ID, Queue: after.Name, ActorUser: nonZero(actor),
				Detail: map[string]any{"settings": queue.Values(after)}}, nil
		}
		changed := queue.Changes(before, after)
		if len(changed) == 0 {
			return nil, nil
		}
		return &events.Change{Kind: events.QueueChanged, QueueID: after.ID, Queue: after.Name, ActorUser: nonZero(actor),
			Detail: map[string]any{"changed": changed}}, nil
	})
	return saved, err
}

// DisableQueue turns a queue off. One that still holds open packages is refused (Conflict, with
// their number in the error's details) unless moveTo names another enabled queue to move them to.
func (s *Service) DisableQueue(ctx context.Context, id, moveTo, actor int64) error {
	return s.changes(ctx, func(tx pgx.Tx) ([]events.Change, error) {
		was, err := queue.SetEnabled(ctx, tx, id, false)
		if err != nil || !was.Enabled {
			return nil, err
		}
		open, err := actions.CountOpen(ctx, tx, id)
		if err != nil {
			return nil, err
		}
		detail := map[string]any{"enabled": [2]bool{true, false}}
		var moved []events.Change
		if open > 0 {
			if moveTo == 0 {
				return nil, &desk.Error{Code: desk.Conflict, Details: map[string]string{"move_to": fmt.Sprintf("%d open package(s) must move first: pick a queue", open)},
					Message: fmt.Sprintf("%s still holds %d open package(s): pick a queue to move them to", was.Name, open)}
			}
			to, err := queue.ByID(ctx, tx, moveTo)
			switch {
			case err != nil && desk.ErrorCode(err) != desk.NotFound:
				return nil, err
			case err != nil || !to.Enabled || to.ID == id:
				return nil, &desk.Error{Code: desk.Invalid, Details: map[string]string{"move_to": "pick another enabled queue"},
					Message: "the open packages must move to another enabled queue"}
			}
			if moved, err = actions.MoveOpen(ctx, tx, was, to, nonZero(actor), s.now()); err != nil {
				return nil, err
			}
			detail["moved_packages"], detail["moved_to"] = len(moved), to.Name
		}
		return append([]events.Change{{Kind: events.QueueChanged, QueueID: id, Queue: was.Name, ActorUser: nonZero(actor),
			Detail: map[string]any{"changed": detail}}}, moved...), nil
	})
}

// EnableQueue turns a disabled queue back on.
func (s *Service) EnableQueue(ctx context.Context, id, actor int64) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		was, err := queue.SetEnabled(ctx, tx, id, true)
		if err != nil || was.Enabled {
			return nil, err
		}
		return &events.Change{Kind: events.QueueChanged, QueueID: id, Queue: was.Name, ActorUser: nonZero(actor),
			Detail: map[string]any{"changed": map[string]any{"enabled": [2]bool{false, true}}}}, nil
	})
}

// CreateAPIKey issues a bot key; its key and signing secret are returned to be shown once, and
// never logged.
func (s *Service) CreateAPIKey(ctx context.Context, n auth.NewAPIKey, actor int64) (auth.IssuedAPIKey, error) {
	var issued auth.IssuedAPIKey
	err := s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		var err error
		if issued, err = auth.IssueAPIKey(ctx, tx, n); err != nil {
			return nil, err
		}
		return &events.Change{Kind: events.APIKeyCreated, ActorUser: nonZero(actor), Detail: map[string]any{
			"api_key_id": issued.ID, "name": issued.Name, "prefix": issued.Prefix, "queues": issued.QueueIDs, "webhook_url": issued.WebhookURL}}, nil
	})
	return issued, err
}

// EditAPIKey changes a key's queues and webhook URL.
func (s *Service) EditAPIKey(ctx context.Context, id int64, r auth.KeyReach, actor int64) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		was, err := auth.SetKeyReach(ctx, tx, id, r)
		if err != nil {
			return nil, err
		}
		queues := slices.Sorted(slices.Values(r.QueueIDs))
		if slices.Equal(was.QueueIDs, queues) && was.WebhookURL == r.WebhookURL {
			return nil, nil
		}
		return &events.Change{Kind: events.APIKeyChanged, ActorUser: nonZero(actor), Detail: map[string]any{
			"api_key_id": id, "name": was.Name,
			"queues": [2][]int64{was.QueueIDs, queues}, "webhook_url": [2]string{was.WebhookURL, r.WebhookURL}}}, nil
	})
}

// RevokeAPIKey turns a key off: its next request is refused on every instance.
func (s *Service) RevokeAPIKey(ctx context.Context, id, actor int64) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		was, revoked, err := auth.RevokeAPIKey(ctx, tx, id)
		if err != nil || !revoked {
			return nil, err
		}
		return &events.Change{Kind: events.APIKeyRevoked, ActorUser: nonZero(actor),
			Detail: map[string]any{"api_key_id": id, "name": was.Name, "prefix": was.Prefix}}, nil
	})
}

// Redeliver sends a dead or failed webhook delivery of the key again, from its first attempt.
func (s *Service) Redeliver(ctx context.Context, keyID, deliveryID, actor int64) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		d, err := webhook.Redeliver(ctx, tx, keyID, deliveryID)
		if err != nil {
			return nil, err
		}
		return &events.Change{Kind: events.WebhookRedelivered, ActorUser: nonZero(actor), Detail: map[string]any{
			"api_key_id": keyID, "delivery_id": deliveryID, "event_id": d.EventID, "state": [2]string{d.State, webhook.StatePending}}}, nil
	})
}

// AddSavedReply saves a reply for queueID's agents to insert, and logs the change of the queue.
func (s *Service) AddSavedReply(ctx context.Context, queueID int64, title, body string, actor int64) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		r, err := savedreply.Add(ctx, tx, queueID, title, body)
		if err != nil {
			return nil, err
		}
		return &events.Change{Kind: events.QueueChanged, QueueID: queueID, ActorUser: nonZero(actor),
			Detail: map[string]any{"changed": map[string]any{"saved_reply": [2]string{"", r.Title}}}}, nil
	})
}

// RemoveSavedReply takes saved reply id off queueID's list, and logs the change of the queue.
func (s *Service) RemoveSavedReply(ctx context.Context, queueID, id, actor int64) error {
	return s.change(ctx, func(tx pgx.Tx) (*events.Change, error) {
		r, err := savedreply.Remove(ctx, tx, queueID, id)
		if err != nil {
			return nil, err
		}
		return &events.Change{Kind: events.QueueChanged, QueueID: queueID, ActorUser: nonZero(actor),
			Detail: map[string]any{"changed": map[string]any{"saved_reply": [2]string{r.Title, ""}}}}, nil
	})
}
