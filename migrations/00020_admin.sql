-- +goose Up
-- The admin console (/admin) changes queues, people and bot keys in the browser. Each change is a
-- row in the log like a package's: the audit reads who changed what, from what to what, in its
-- detail; every instance's hub reads it and drops what it cached (sessions, keys) at once.
--
-- A password an admin resets is a temporary one, good for one login that must choose another.
ALTER TABLE users ADD COLUMN must_change_password boolean NOT NULL DEFAULT false;
-- When the person last logged in, for the admin's list of users (presence says who is online now).
ALTER TABLE users ADD COLUMN last_login_at timestamptz;
-- When the key was last used, written at most once a minute per instance: a bot sends many
-- requests a second, and the list of keys needs only "when, roughly".
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;

-- New kinds, NOT VALID as in 00011: every row already in the log passed the narrower checks.
-- The people kinds name their subject like the other changes of access (the person's cached
-- sessions are dropped and their open pages reload); the queue and key kinds name nobody.
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply',
    'user_created', 'user_changed', 'user_enabled', 'password_reset', 'password_changed',
    'queue_created', 'queue_changed', 'api_key_created', 'api_key_changed', 'api_key_revoked',
    'webhook_redelivered')) NOT VALID;
ALTER TABLE events DROP CONSTRAINT events_subject_user;
ALTER TABLE events ADD CONSTRAINT events_subject_user CHECK ((subject_user IS NOT NULL) =
    (kind IN ('signed_out', 'user_disabled', 'role_changed', 'member_removed',
        'user_created', 'user_changed', 'user_enabled', 'password_reset', 'password_changed'))) NOT VALID;

-- +goose Down
-- The log is append-only: its admin rows stay, so the narrower checks cannot be validated.
ALTER TABLE events DROP CONSTRAINT events_subject_user;
ALTER TABLE events ADD CONSTRAINT events_subject_user CHECK ((subject_user IS NOT NULL) =
    (kind IN ('signed_out', 'user_disabled', 'role_changed', 'member_removed'))) NOT VALID;
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply')) NOT VALID;
ALTER TABLE api_keys DROP COLUMN last_used_at;
ALTER TABLE users DROP COLUMN last_login_at;
ALTER TABLE users DROP COLUMN must_change_password;
