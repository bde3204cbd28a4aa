-- +goose Up
-- Fail fast rather than queue writes behind the catalog changes below; the deploy step retries.
-- The indexes these figures read are built in 00036, without a transaction.
SET LOCAL lock_timeout = '1s';

-- The dashboard's figures of replies (docs/metrics.md): time to first reply, and each agent's
-- packages, times, replies, drafts sent as is and edit distances. Each row of the rollup now also
-- holds, for the packages that arrived in its hour, those that got a reply and a histogram of the
-- times from arrival to the first (bins as accept_bins'), and per desk user their part: agents
-- (their ids) and agent_figures (each agent's handled, resolved, replies, drafts and as_is, then
-- the histograms of their times to accept, to resolution and of their edit distances in
-- characters, each as its first non-zero bin, its length and its counts: dashboard.packAgents).
-- Binary integer arrays rather than a jsonb object, which is parsed and printed as text at every
-- refresh: a busy queue's hour holds dozens of agents. drafts and as_is now count the replies to
-- the hour's packages, in the queue each package is in now, as every other figure counts: a
-- drill-down to /packages then lists exactly the packages a figure counted.
--
-- Constant defaults add the columns without rewriting the table. The rows already stored count
-- drafts the old way and hold none of the new columns: version says which definitions a rollup
-- holds, and the next refresh rebuilds one of another version (dashboard.rollupVersion), which
-- Read does not use until then.
ALTER TABLE dashboard_hours ADD COLUMN replied integer NOT NULL DEFAULT 0,
    ADD COLUMN reply_bins integer[] NOT NULL DEFAULT '{}',
    ADD COLUMN agents bigint[] NOT NULL DEFAULT '{}',
    ADD COLUMN agent_figures integer[] NOT NULL DEFAULT '{}';
ALTER TABLE dashboard_rollup ADD COLUMN version integer NOT NULL DEFAULT 1;

-- A reassignment names the agent the package went to as its subject (events.Kind.NamesPerson), as
-- a ring names the agent it rings: the hub then brings the package to that agent's open pages (the
-- count of what they hold, "My work") without waiting for them to act on it; the per-agent figures
-- above are what they then hold. NOT VALID as in 00022 and 00030: the log is append-only, and the
-- reassignments written before this named nobody.
ALTER TABLE events DROP CONSTRAINT events_subject_user;
ALTER TABLE events ADD CONSTRAINT events_subject_user CHECK ((subject_user IS NOT NULL) =
    (kind IN ('signed_out', 'user_disabled', 'role_changed', 'member_removed',
        'user_created', 'user_changed', 'user_enabled', 'password_reset', 'password_changed',
        'offered', 'offer_ended', 'reassigned'))) NOT VALID;

-- +goose Down
SET LOCAL lock_timeout = '1s';
-- The reassignments written since name their holder: the narrower check comes back NOT VALID, and
-- the code of before writes none.
ALTER TABLE events DROP CONSTRAINT events_subject_user;
ALTER TABLE events ADD CONSTRAINT events_subject_user CHECK ((subject_user IS NOT NULL) =
    (kind IN ('signed_out', 'user_disabled', 'role_changed', 'member_removed',
        'user_created', 'user_changed', 'user_enabled', 'password_reset', 'password_changed',
        'offered', 'offer_ended'))) NOT VALID;
ALTER TABLE dashboard_rollup DROP COLUMN version;
ALTER TABLE dashboard_hours DROP COLUMN agent_figures, DROP COLUMN agents, DROP COLUMN reply_bins, DROP COLUMN replied;
