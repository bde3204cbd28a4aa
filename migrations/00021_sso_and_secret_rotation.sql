-- +goose Up
-- A rotated webhook secret stays valid until previous_until, so that a bot can move to the new one
-- without losing deliveries: meanwhile each delivery is signed with both. Only the secret just
-- replaced is kept; a second rotation within the window drops the older one.
ALTER TABLE api_keys
    ADD COLUMN webhook_secret_previous       text,
    ADD COLUMN webhook_secret_previous_until timestamptz,
    ADD CONSTRAINT api_keys_previous_secret_check
        CHECK ((webhook_secret_previous IS NULL) = (webhook_secret_previous_until IS NULL));

-- A user who signs in only through the identity provider: their password is refused, so that
-- leaving the company (disabled there) also ends their way into the desk.
ALTER TABLE users ADD COLUMN password_login boolean NOT NULL DEFAULT true;

-- The desk's single sign-on settings: one row. unknown_emails says what a verified email that no
-- user has gets: refused, or an agent account with no queues.
CREATE TABLE sso_settings (
    only_row       boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    unknown_emails text NOT NULL DEFAULT 'refuse' CHECK (unknown_emails IN ('refuse', 'create'))
);
INSERT INTO sso_settings DEFAULT VALUES;

-- A sign-in under way at the identity provider, found by the hash of its state. It is bound to
-- the browser that started it (browser_hash, of a cookie only that browser has), holds the nonce
-- and the PKCE verifier, and lives for minutes. A sign-in in a popup ends as a ticket: the popup
-- hands it to the sidebar that opened it, which trades it once for a session of its own.
-- address is the client's (as login throttling counts it): anyone may start a sign-in, so the
-- sign-ins one address has under way are capped.
CREATE TABLE sso_logins (
    state_hash   bytea PRIMARY KEY,
    address      text NOT NULL,
    browser_hash bytea NOT NULL,
    nonce        text NOT NULL,
    verifier     text NOT NULL,
    next         text NOT NULL,
    popup        boolean NOT NULL,
    expires_at   timestamptz NOT NULL,
    ticket_hash  bytea UNIQUE,
    user_id      bigint REFERENCES users (id) ON DELETE CASCADE,
    CHECK ((ticket_hash IS NULL) = (user_id IS NULL))
);
CREATE INDEX sso_logins_expires_at_idx ON sso_logins (expires_at);
CREATE INDEX sso_logins_address_idx ON sso_logins (address, expires_at);

-- A rotation is logged like every change. Added NOT VALID, as in 00011: every row already in the
-- log passed the narrower check.
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply', 'webhook_secret_rotated')) NOT VALID;

-- +goose Down
-- The log is append-only: its rotation rows stay, so the narrower check cannot be validated.
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply')) NOT VALID;
DROP TABLE sso_logins;
DROP TABLE sso_settings;
ALTER TABLE users DROP COLUMN password_login;
ALTER TABLE api_keys DROP CONSTRAINT api_keys_previous_secret_check,
    DROP COLUMN webhook_secret_previous_until,
    DROP COLUMN webhook_secret_previous;
