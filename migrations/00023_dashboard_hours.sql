-- +goose Up
-- The dashboard's figures pre-aggregated per queue and hour (docs/metrics.md, "Speed"): at a
-- million packages, a 30-day read of all queues scans a million index entries (even a bare
-- count(*) of them takes 250-800 ms), while their rollup is 8 queues x 1,440 hours.
--
-- A row holds the packages that arrived in the queue in that hour (by created_at, in the queue
-- they are in now), counted as the dashboard counts them, with the splits as jsonb maps (value ->
-- count) and the times to accept and to resolution as histograms over log-spaced bins of seconds
-- (dashboard.binOf: bin 0 is under a second, bin k >= 1 is [2^((k-1)/4), 2^(k/4)) s; trailing
-- empty bins are left off), and the replies to a bot's draft sent in that hour (by evals.at).
-- Only dashboard.Refresh writes it, a whole hour at a time, from handoffs and evals. A row of 24
-- hours is a UTC day, the sum of its hours' rows: the 7- and 30-day windows read those (at most
-- 60 days x the queues), the 24-hour window the hours'.
CREATE TABLE dashboard_hours (
    hour          timestamptz NOT NULL,
    hours         smallint NOT NULL CHECK (hours IN (1, 24)),
    queue_id      bigint NOT NULL,
    packages      integer NOT NULL,
    accepted      integer NOT NULL,
    resolved      integer NOT NULL,
    rejected      integer NOT NULL,
    returned      integer NOT NULL,
    expired       integer NOT NULL,
    canceled      integer NOT NULL,
    repeats       integer NOT NULL,
    by_trigger    jsonb NOT NULL,
    by_source     jsonb NOT NULL,
    returned_by   jsonb NOT NULL,
    accept_bins   integer[] NOT NULL,
    resolve_bins  integer[] NOT NULL,
    drafts        integer NOT NULL,
    as_is         integer NOT NULL,
    PRIMARY KEY (queue_id, hours, hour)
);

-- One row: how far the rollup has read the event log. through is a mark as events.Now hands it
-- out ("<incarnation>:<xid>": every transaction of this database below the xid has ended; another
-- incarnation's mark means a rebuild), refreshed_at when the refresh that set it ran:
-- hours from refreshed_at's on are read from handoffs, not from the rollup. No row: never built,
-- and the next refresh rebuilds every hour.
CREATE TABLE dashboard_rollup (
    one           boolean PRIMARY KEY DEFAULT true CHECK (one),
    through       text NOT NULL,
    refreshed_at  timestamptz NOT NULL
);

-- +goose Down
DROP TABLE dashboard_rollup;
DROP TABLE dashboard_hours;
