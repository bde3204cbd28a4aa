-- +goose Up
-- Every status change of a package writes a row here in the same transaction as the change, so a
-- bot is told about exactly the changes that committed. Deliverers claim rows with a lease
-- (next_attempt_at moves forward) so several instances can deliver without sending twice at once,
-- and a crash mid-delivery only delays the row until the lease runs out (at-least-once).
CREATE TABLE webhook_outbox (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id        text NOT NULL UNIQUE,
    api_key_id      bigint NOT NULL REFERENCES api_keys (id) ON DELETE CASCADE,
    handoff_id      text NOT NULL,
    event           text NOT NULL CHECK (event IN ('queued', 'accepted', 'rejected', 'returned_to_bot',
                        'transferred', 'resolved', 'expired', 'canceled')),
    payload         jsonb NOT NULL,
    state           text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'dead', 'no_endpoint')),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_status     integer,
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz
);
-- In the claim's order, so a claim reads the first rows due instead of sorting every pending one.
CREATE INDEX webhook_outbox_due_idx ON webhook_outbox (next_attempt_at, id) WHERE state = 'pending';
CREATE INDEX webhook_outbox_handoff_idx ON webhook_outbox (handoff_id);
-- A key's deliveries newest first, and the cascade when a key is deleted, without walking every
-- other key's rows. Each outbox write maintains it too, a few microseconds.
CREATE INDEX webhook_outbox_api_key_idx ON webhook_outbox (api_key_id, id);

-- +goose Down
DROP TABLE webhook_outbox;
