-- +goose Up
-- Never wait more than a second for a lock another session holds: a deploy fails and is retried
-- rather than stall the desk's writes behind it.
SET lock_timeout = '1s';

-- What each person chose to be at the desk: available to be rung, on a break, or away. A person
-- without a row is available: whoever opens the desk is rung unless they chose otherwise. The
-- choice outlives their pages and sessions: a break lasts until its owner ends it. since is when
-- they chose, which the supervisors' roster shows as how long.
CREATE TABLE availability (
    user_id bigint PRIMARY KEY REFERENCES users (id) ON DELETE CASCADE,
    status  text NOT NULL CHECK (status IN ('available', 'break', 'away')),
    since   timestamptz NOT NULL
);

-- Who may be rung: an open desk (live_presence, migration 00025) and available.
CREATE VIEW ringable AS
SELECT DISTINCT p.user_id FROM live_presence p
WHERE NOT EXISTS (SELECT 1 FROM availability a WHERE a.user_id = p.user_id AND a.status <> 'available');

-- +goose Down
SET lock_timeout = '1s';
DROP VIEW ringable;
DROP TABLE availability;
