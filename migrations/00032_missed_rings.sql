-- +goose Up
-- Fail fast rather than queue writes behind the two catalog changes below; the deploy step retries.
SET LOCAL lock_timeout = '1s';

-- An agent who lets this many rings of the queue's packages run out in a row, since they last
-- chose what to be, is set away by the desk, so that the next warm package does not wait a
-- whole accept window on an empty chair (actions.Service.advance, docs/warm.md). A constant
-- default adds the column without rewriting the table, and queues is small.
ALTER TABLE queues ADD COLUMN missed_rings_away integer NOT NULL DEFAULT 2 CHECK (missed_rings_away >= 1);

-- Why the desk, not the person, set their availability: 'missed_rings', which their pages show
-- until they choose again; null when they chose it themselves (POST /me/status). Nullable with no
-- default: adding it rewrites nothing.
ALTER TABLE availability ADD COLUMN reason text;

-- +goose Down
SET LOCAL lock_timeout = '1s';
ALTER TABLE availability DROP COLUMN reason;
ALTER TABLE queues DROP COLUMN missed_rings_away;
