-- +goose Up
-- Who has which package open on which instance: a row per agent, package and instance, written
-- when a package page's socket opens and deleted when the last one closes. Kept per instance as
-- presence is (00004), so that the rows of an instance killed without cleaning up go with its
-- lease (live.Presence.reap). The kind 'viewing' tells every open view of the package to show
-- its viewers anew; it is the desk's alone, in no timeline and no webhook. NOT VALID and a tenth
-- of a second's wait for the log's lock, as 00038.
CREATE TABLE viewing (
    instance_id text NOT NULL,
    handoff_id  bigint NOT NULL REFERENCES handoffs (id) ON DELETE CASCADE,
    user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    sockets     integer NOT NULL CHECK (sockets > 0),
    PRIMARY KEY (handoff_id, user_id, instance_id)
);
CREATE INDEX viewing_instance_idx ON viewing (instance_id);
CREATE INDEX viewing_user_idx ON viewing (user_id);
SET LOCAL lock_timeout = '100ms';
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply',
    'approval_requested', 'approval_granted', 'approval_denied', 'approval_expired', 'approval_withdrawn',
    'offered', 'offer_ended', 'warm_timeout',
    'user_created', 'user_changed', 'user_enabled', 'password_reset', 'password_changed',
    'queue_created', 'queue_changed', 'api_key_created', 'api_key_changed', 'api_key_revoked', 'webhook_redelivered',
    'webhook_secret_rotated', 'sso_settings_changed', 'noted', 'reassigned', 'message', 'reopened',
    'reply_delivery', 'viewing')) NOT VALID;


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
    'webhook_secret_rotated', 'sso_settings_changed', 'noted', 'reassigned', 'message', 'reopened',
    'reply_delivery')) NOT VALID;
DROP TABLE viewing;
