-- +goose Up
-- Every reply is an eval pair for its turn (SPEC §3): its record keeps the customer message it
-- answered (the seq in the package's thread; NULL: the package itself, or a record from before the
-- thread) and the thread up to that message as it stood when the agent replied (a JSON array of
-- {seq, role, text, at}, the last 50 messages; NULL: none). The record keeps its own copy rather
-- than a window into messages: an eval record is what the agent saw, read by the export in the
-- one row it streams, and evals are append-only as the thread is. The draft column now holds the
-- draft of the reply's turn, which is the package's only for the first answer.
SET LOCAL lock_timeout = '1s';
ALTER TABLE evals ADD COLUMN in_reply_to integer, ADD COLUMN thread jsonb;

-- +goose Down
SET LOCAL lock_timeout = '1s';
ALTER TABLE evals DROP COLUMN in_reply_to, DROP COLUMN thread;
