-- +goose Up
-- reply_delivery: the deliverer recorded where a reply's webhook stands (delivered, retrying,
-- failed). The bot is not told of it, since it is about the bot; every open view of the package
-- shows the reply's state anew, so that "sent to the customer" appears once the bot took the reply,
-- on every instance, through the one event log. NOT VALID as in 00022.
SET LOCAL lock_timeout = '1s';
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply',
    'approval_requested', 'approval_granted', 'approval_denied', 'approval_expired', 'approval_withdrawn',
    'offered', 'offer_ended', 'warm_timeout',
    'user_created', 'user_changed', 'user_enabled', 'password_reset', 'password_changed',
    'queue_created', 'queue_changed', 'api_key_created', 'api_key_changed', 'api_key_revoked', 'webhook_redelivered',
    'webhook_secret_rotated', 'sso_settings_changed', 'noted', 'reassigned', 'message', 'reopened',
    'reply_delivery')) NOT VALID;

-- +goose Down
SET LOCAL lock_timeout = '1s';
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply',
    'approval_requested', 'approval_granted', 'approval_denied', 'approval_expired', 'approval_withdrawn',
    'offered', 'offer_ended', 'warm_timeout',
    'user_created', 'user_changed', 'user_enabled', 'password_reset', 'password_changed',
    'queue_created', 'queue_changed', 'api_key_created', 'api_key_changed', 'api_key_revoked', 'webhook_redelivered',
    'webhook_secret_rotated', 'sso_settings_changed', 'noted', 'reassigned', 'message', 'reopened')) NOT VALID;
