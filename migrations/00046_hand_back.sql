-- +goose Up
-- Fail fast rather than queue writes behind the two catalog changes below; the deploy step retries.
SET LOCAL lock_timeout = '1s';

-- What the agent handed the conversation back to the bot with, on a return or a resolve (SPEC
-- §2a): what they did, the package's entities they confirmed or corrected, an instruction for the
-- bot, and where the thread stood (its last seq, the agent's last reply). {"done", "confirmed",
-- "corrected", "instruction", "last_seq", "thread", "last_reply"}, written by the close
-- (internal/actions) as handoff.HandBack; the bot reads it in the webhook and the package's record,
-- and the eval record of the return or resolve keeps it. Nullable columns with no default: adding
-- them rewrites nothing.
ALTER TABLE handoffs ADD COLUMN hand_back jsonb;
ALTER TABLE evals ADD COLUMN hand_back jsonb;

-- +goose Down
SET LOCAL lock_timeout = '1s';
ALTER TABLE evals DROP COLUMN hand_back;
ALTER TABLE handoffs DROP COLUMN hand_back;
