-- +goose Up
-- The append-only logs keep no foreign key to people or bot keys. Neither is ever deleted (a person
-- is disabled, a key revoked: their rows stay, and so their names in the log), so those keys
-- protect nothing; each cost every event and every recorded view a look-up in users or api_keys
-- and a KEY SHARE lock on that row. Those rows are the hottest of the desk to lock: the bot's key
-- is in every intake's events, an agent's row in each of their actions and page views, and two
-- transactions locking one row at once make PostgreSQL create a multixact for it. The key to
-- handoffs stays on events: an event names the package it happened to, which its transaction
-- has just written or locked.
-- Dropping a foreign key takes an ACCESS EXCLUSIVE lock on both tables, events (or pii_views) first,
-- then users or api_keys: the reverse of a claim or an intake, which lock the person's or the key's
-- row (checking handoffs' keys) before they write their event. Waiting a second for the second
-- lock, the migration could deadlock with such a write, which then waits for deadlock_timeout (a
-- second) before one of them fails. With a tenth of a second the migration gives up first, before
-- any deadlock check, its locks free again, and the runner tries it again (postgres.Migrate): a
-- write waits at most that long for it.
SET LOCAL lock_timeout = '100ms';
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_actor_user_fkey;
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_subject_user_fkey;
ALTER TABLE events DROP CONSTRAINT IF EXISTS events_actor_bot_fkey;
ALTER TABLE pii_views DROP CONSTRAINT IF EXISTS pii_views_user_id_fkey;

-- +goose Down
SET LOCAL lock_timeout = '100ms';
ALTER TABLE events ADD CONSTRAINT events_actor_user_fkey FOREIGN KEY (actor_user) REFERENCES users (id) NOT VALID;
ALTER TABLE events ADD CONSTRAINT events_subject_user_fkey FOREIGN KEY (subject_user) REFERENCES users (id) NOT VALID;
ALTER TABLE events ADD CONSTRAINT events_actor_bot_fkey FOREIGN KEY (actor_bot) REFERENCES api_keys (id) NOT VALID;
ALTER TABLE pii_views ADD CONSTRAINT pii_views_user_id_fkey FOREIGN KEY (user_id) REFERENCES users (id) NOT VALID;
