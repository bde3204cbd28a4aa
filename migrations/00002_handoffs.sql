-- +goose Up
CREATE TABLE api_keys (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name           text NOT NULL UNIQUE,
    -- The key's first characters, shown in lists and used to find its row; the rest is hashed.
    key_prefix     text NOT NULL UNIQUE,
    key_hash       bytea NOT NULL,
    webhook_url    text,
    -- HMAC needs the secret itself at delivery time, so it cannot be stored as a hash.
    webhook_secret text NOT NULL,
    revoked_at     timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_key_queues (
    api_key_id bigint NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    queue_id   bigint NOT NULL REFERENCES queues (id) ON DELETE CASCADE,
    PRIMARY KEY (api_key_id, queue_id)
);

CREATE TABLE handoffs (
    -- Intake takes ids from the sequence by this name before it inserts.
    id             bigint GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME handoffs_id_seq) PRIMARY KEY,
    handoff_id     text NOT NULL UNIQUE,
    api_key_id     bigint NOT NULL REFERENCES api_keys (id),
    queue_id       bigint NOT NULL REFERENCES queues (id),
    status         text NOT NULL CHECK (status IN ('queued', 'reserved', 'accepted', 'awaiting_approval',
                       'resolved', 'returned_to_bot', 'expired', 'canceled')),
    -- 0 is urgent, 3 is low: the claim orders by (priority_rank, enqueued_at, id).
    priority_rank  smallint NOT NULL CHECK (priority_rank BETWEEN 0 AND 3),
    contact_id     text NOT NULL,
    source_agent   text NOT NULL,
    -- The canonical JSON exactly as body_sha256 digests it: json, not jsonb, so that storing it
    -- costs a syntax check rather than a conversion, and lz4 compresses it several times faster
    -- than the default pglz (a 4 KiB package is still moved out of line, keeping the heap narrow
    -- for the queue's index scans).
    package        json COMPRESSION lz4 NOT NULL,
    -- sha256 of the canonical package: the same id with the same body is a replay, not a conflict.
    body_sha256    bytea NOT NULL,
    assignee_id    bigint REFERENCES users (id),
    reserved_until timestamptz,
    rejected_by    bigint[] NOT NULL DEFAULT '{}',
    outcome        text,
    outcome_note   text,
    created_at     timestamptz NOT NULL DEFAULT now(),
    enqueued_at    timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz NOT NULL,
    accepted_at    timestamptz,
    closed_at      timestamptz,
    updated_at     timestamptz NOT NULL DEFAULT now()
);
-- The claim order has no index of its own: handoffs_queue_page_idx (00004) covers the queued rows
-- with the few reserved ones, so the claim and the position count use it, and intake maintains one
-- index fewer per package.
CREATE INDEX handoffs_open_idx ON handoffs (queue_id) WHERE status IN ('queued', 'reserved', 'accepted', 'awaiting_approval');
CREATE INDEX handoffs_contact_idx ON handoffs (contact_id, created_at);
CREATE INDEX handoffs_assignee_idx ON handoffs (assignee_id) WHERE assignee_id IS NOT NULL;

-- +goose Down
DROP TABLE handoffs;
DROP TABLE api_key_queues;
DROP TABLE api_keys;
