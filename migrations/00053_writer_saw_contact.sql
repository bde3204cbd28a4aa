-- +goose Up
-- Whether the writer of a text about a package could see its contact's values when they wrote it:
-- their role then against the queue's PII role then (handoff.Writer). A text by someone who could
-- not see them reveals nothing they knew, and reads as written for everyone; one by someone who
-- could is masked for readers who cannot. Recorded with the text, never read from the writer's
-- role now: a person demoted since would otherwise unmask what they wrote while they saw.
-- Rows written before this migration count as written by someone who saw the values (the default):
-- their writers' roles then are not known, and masking is the side that reveals nothing.
-- A constant default adds each column without rewriting its table; a tenth of a second's wait for
-- the lock, as 00041.
SET LOCAL lock_timeout = '100ms';
-- events: every text of the log (a note, a reason, a decision), by its actor_user; true for a bot's.
ALTER TABLE events ADD COLUMN actor_saw_contact boolean NOT NULL DEFAULT true;
ALTER TABLE handoff_notes ADD COLUMN author_saw_contact boolean NOT NULL DEFAULT true;
ALTER TABLE approvals ADD COLUMN requester_saw_contact boolean NOT NULL DEFAULT true;
ALTER TABLE approvals ADD COLUMN decider_saw_contact boolean NOT NULL DEFAULT true;
-- messages: an agent's reply as its author submitted it, before their tokens were filled with the
-- values, when they could not see them (NULL otherwise): readers who cannot see the values read
-- that, so a typed guess reads alike right or wrong.
ALTER TABLE messages ADD COLUMN as_written text;

-- +goose Down
ALTER TABLE messages DROP COLUMN as_written;
ALTER TABLE approvals DROP COLUMN decider_saw_contact;
ALTER TABLE approvals DROP COLUMN requester_saw_contact;
ALTER TABLE handoff_notes DROP COLUMN author_saw_contact;
ALTER TABLE events DROP COLUMN actor_saw_contact;
