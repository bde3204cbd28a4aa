-- +goose Up
-- Saved replies (SPEC §3): each queue's answers its agents insert in the co-pilot editor with
-- "/", written with the editor's tokens (⟦first name⟧) where the customer's values go. A removed
-- one is kept, marked, so that the replies that started from it still say which (messages
-- .saved_reply_id, for the evals). Owned by internal/savedreply.
SET LOCAL lock_timeout = '1s';

CREATE TABLE saved_replies (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_id    bigint NOT NULL REFERENCES queues (id),
    title       text NOT NULL CHECK (char_length(title) BETWEEN 1 AND 80),
    body        text NOT NULL CHECK (char_length(body) BETWEEN 1 AND 8000),
    created_at  timestamptz NOT NULL DEFAULT now(),
    removed_at  timestamptz
);
-- A queue's list names each saved reply once; a removed one frees its title.
CREATE UNIQUE INDEX saved_replies_title_idx ON saved_replies (queue_id, lower(title)) WHERE removed_at IS NULL;

-- An agent's reply that started from a saved reply says which.
ALTER TABLE messages ADD COLUMN saved_reply_id bigint REFERENCES saved_replies (id)
    CHECK (saved_reply_id IS NULL OR role = 'agent');

-- +goose Down
SET LOCAL lock_timeout = '1s';
ALTER TABLE messages DROP COLUMN saved_reply_id;
DROP TABLE saved_replies;
