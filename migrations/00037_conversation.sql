-- +goose Up
-- The conversation after the handoff (SPEC §2a): every message the customer writes, the bot's own
-- while no agent holds the package, and every reply an agent sends, one row each, in the package's
-- order. seq is gap-free per package: a message is appended under the package's row lock
-- (internal/conversation). The thread's rows are only ever added; its table is owned by
-- internal/conversation, and nothing else reads or writes it.
-- A tenth of a second, as 00041: this migration locks handoffs, then swaps the events check,
-- while a write may hold events and wait for handoffs; giving up before PostgreSQL's deadlock
-- check (a second) keeps that write from stalling, and the runner tries the migration again.
SET LOCAL lock_timeout = '100ms';

CREATE TABLE messages (
    handoff_id   bigint NOT NULL REFERENCES handoffs (id),
    seq          integer NOT NULL CHECK (seq > 0),
    -- The bot's idempotency key within the package; an agent's reply gets one of the desk's.
    message_id   text NOT NULL,
    role         text NOT NULL CHECK (role IN ('user', 'assistant', 'agent')),
    text         text NOT NULL,
    at           timestamptz NOT NULL,
    received_at  timestamptz NOT NULL,
    -- user messages: the bot's fresh draft of the answer, for the co-pilot.
    draft_reply  text CHECK (draft_reply IS NULL OR role = 'user'),
    attachments  jsonb NOT NULL DEFAULT '[]',
    -- agent replies: who sent it and the seq of the customer message it answers (none: the reply
    -- came before the customer wrote again, an answer to the package itself).
    author_id    bigint REFERENCES users (id),
    in_reply_to  integer,
    -- What the bot sent, hashed: the same id with another body is refused, the same body answered again.
    body_sha256  bytea,
    PRIMARY KEY (handoff_id, seq),
    UNIQUE (handoff_id, message_id),
    CHECK ((role = 'agent') = (author_id IS NOT NULL)),
    CHECK ((role = 'agent') = (body_sha256 IS NULL))
);

-- A customer coming back within this long after a resolve reopens the package (SPEC §2a).
ALTER TABLE queues ADD COLUMN reopen_window interval NOT NULL DEFAULT '24 hours'
    CHECK (reopen_window >= '0'::interval);

-- message: a message joined the thread (the live desk moves every open view of the package; the
-- bot sent it, so it hears nothing back). reopened: a customer message reopened a resolved
-- package, which the bot hears. NOT VALID as in 00022: the rows already there passed a narrower check.
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply',
    'approval_requested', 'approval_granted', 'approval_denied', 'approval_expired', 'approval_withdrawn',
    'offered', 'offer_ended', 'warm_timeout',
    'user_created', 'user_changed', 'user_enabled', 'password_reset', 'password_changed',
    'queue_created', 'queue_changed', 'api_key_created', 'api_key_changed', 'api_key_revoked', 'webhook_redelivered',
    'webhook_secret_rotated', 'sso_settings_changed', 'noted', 'reassigned', 'message', 'reopened')) NOT VALID;
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_event_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_event_check CHECK (event IN ('queued', 'accepted', 'rejected',
    'returned_to_bot', 'transferred', 'resolved', 'expired', 'canceled', 'reply', 'warm_timeout',
    'approval_requested', 'approval_granted', 'approval_denied', 'approval_expired', 'approval_withdrawn',
    'reassigned', 'reopened')) NOT VALID;

-- +goose Down
SET LOCAL lock_timeout = '1s';
ALTER TABLE queues DROP COLUMN reopen_window;
DROP TABLE messages;
