-- +goose Up
-- Fail fast rather than queue writes behind the two catalog changes below; the deploy step retries.
SET LOCAL lock_timeout = '1s';

-- What a refund's resolution paid back, beside what the bot asked for: a partial refund (50.00 of
-- 300.00 asked) passes below the threshold without an approval, and the outcome must say that less
-- was refunded than asked. {"amount", "currency", "requested_amount", "requested_currency",
-- "partial"}, written by the resolve (internal/actions) as handoff.RefundOutcome. Nullable columns
-- with no default: adding them rewrites nothing.
ALTER TABLE handoffs ADD COLUMN refund jsonb;
ALTER TABLE evals ADD COLUMN refund jsonb;

-- +goose Down
SET LOCAL lock_timeout = '1s';
ALTER TABLE evals DROP COLUMN refund;
ALTER TABLE handoffs DROP COLUMN refund;
