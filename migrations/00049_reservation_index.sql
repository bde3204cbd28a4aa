-- +goose NO TRANSACTION
-- +goose Up
-- handoffs_reserved_until_idx goes: handoffs_one_reservation_idx (00004) holds the same rows, the
-- reserved ones, at most one per agent, and is what every hot query of them names (the accept's
-- fast update and Next's held reservation, by assignee). The planner could not tell the two apart:
-- ANALYZE finds reserved rows rare, both partial indexes cost next to nothing to it, and it read
-- reserved_until's, all of it, for the one row the agent holds (make bench-desk, scenario 4: two
-- scans of some hundred entries and their heap rows per package, where one entry would do). The
-- sweeper, its only reader, now reads every reservation and sorts them: a few hundred rows every few
-- seconds. A reservation also maintains one index fewer. Dropped without blocking writes;
-- lock_timeout bounds the brief lock the drop takes.
SET lock_timeout = '1s';
DROP INDEX CONCURRENTLY IF EXISTS handoffs_reserved_until_idx;
RESET lock_timeout;

-- +goose Down
SET lock_timeout = '1s';
DROP INDEX CONCURRENTLY IF EXISTS handoffs_reserved_until_idx;
CREATE INDEX CONCURRENTLY handoffs_reserved_until_idx ON handoffs (reserved_until) WHERE status = 'reserved';
RESET lock_timeout;
