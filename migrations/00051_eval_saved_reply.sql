-- +goose Up
-- A reply that started from a saved reply says which in its eval record too (SPEC §3): the
-- record's draft is then the saved reply's text, and the export names the saved reply, so that a
-- team can tell the bot's drafts from its own canned answers. Owned by internal/evals, read with
-- saved_replies' title by the export. Every record so far has none, so the reference is added
-- NOT VALID and left so: new records are checked, and no scan of evals runs under this
-- statement's lock to prove what is true of every old row.
SET LOCAL lock_timeout = '1s';
ALTER TABLE evals ADD COLUMN saved_reply_id bigint;
ALTER TABLE evals ADD CONSTRAINT evals_saved_reply_fkey FOREIGN KEY (saved_reply_id) REFERENCES saved_replies (id) NOT VALID;

-- +goose Down
SET LOCAL lock_timeout = '1s';
ALTER TABLE evals DROP COLUMN saved_reply_id;
