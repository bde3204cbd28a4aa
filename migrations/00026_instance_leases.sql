-- +goose Up
-- Never wait more than a second for a lock another session holds: a deploy fails and is retried
-- rather than stall the desk's writes behind it.
SET lock_timeout = '1s';

-- Each running instance holds a lease, renewed every second and good for three (live.Presence).
-- An instance killed with kill -9 stops renewing; once its lease lapses, any live instance that
-- has held its own for three seconds deletes the lease with the dead instance's presence rows and
-- withdraws its agents' rings, so nobody is rung on a page that no longer exists. The lapse is
-- judged by the database's clock, the one clock every instance shares.
CREATE TABLE instances (
    id          text PRIMARY KEY,
    started_at  timestamptz NOT NULL DEFAULT now(),
    lease_until timestamptz NOT NULL
);

-- Who has the desk open: presence rows whose instance's lease has not been reaped. Not "whose
-- lease is live": after a restart of PostgreSQL every lease has lapsed, and the agents of the
-- live instances must not look gone until those renew; the reaper waits for that, so a lease it
-- deletes is one nobody renewed. A row without any lease was written by an instance of the
-- version before this one, still running during a rolling upgrade; it counts as before, while its
-- heartbeat is fresh, and the reaper deletes it once stale, as nothing did before.
CREATE VIEW live_presence AS
SELECT p.instance_id, p.user_id, p.sockets, p.away, p.seen_at
FROM presence p LEFT JOIN instances i ON i.id = p.instance_id
WHERE i.id IS NOT NULL OR p.seen_at > now() - interval '30 seconds';

-- +goose Down
SET lock_timeout = '1s';
DROP VIEW live_presence;
DROP TABLE instances;
