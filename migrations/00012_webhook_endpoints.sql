-- +goose Up
-- Deliverers claim due rows endpoint by endpoint, a few of each API key's oldest at a time, so
-- that one endpoint's backlog is never read to reach another's rows; a breaker that opens moves
-- its key's pending rows later in one statement. Both read this index; the claim no longer reads
-- the one across all keys, which intake would otherwise go on paying for with every row.
CREATE INDEX webhook_outbox_key_due_idx ON webhook_outbox (api_key_id, next_attempt_at, id) WHERE state = 'pending';
DROP INDEX webhook_outbox_due_idx;

-- +goose Down
CREATE INDEX webhook_outbox_due_idx ON webhook_outbox (next_attempt_at, id) WHERE state = 'pending';
DROP INDEX webhook_outbox_key_due_idx;
