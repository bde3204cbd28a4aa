-- +goose Up
-- An internal note an agent adds to a package at any time (POST /handoffs/{id}/notes) is a change
-- of its own in the log: the package's timeline reads the log, and every open view of the package
-- hears of the note as of any other change. The note's text is in the event's detail, as a
-- transfer's note is; the bot is never told (no webhook_outbox row: the outbox's check is left as
-- it is). The list is 00022's union and 'noted'. NOT VALID as in 00022. A tenth of a second's
-- wait for the log's lock, as 00041: a write holding it never waits out a deadlock check for this.
SET LOCAL lock_timeout = '100ms';
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply',
    'approval_requested', 'approval_granted', 'approval_denied', 'approval_expired', 'approval_withdrawn',
    'offered', 'offer_ended', 'warm_timeout',
    'user_created', 'user_changed', 'user_enabled', 'password_reset', 'password_changed',
    'queue_created', 'queue_changed', 'api_key_created', 'api_key_changed', 'api_key_revoked', 'webhook_redelivered',
    'webhook_secret_rotated', 'sso_settings_changed', 'noted')) NOT VALID;

-- +goose Down
-- The log's rows cannot be removed, so a 'noted' row may be there: the check stays as wide.
SELECT 1;
