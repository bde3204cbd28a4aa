-- +goose Up
-- Fail fast rather than queue writes behind the catalog change below; the deploy step retries.
SET LOCAL lock_timeout = '1s';

-- A reassignment names the agent the package went to as its subject (events.Kind.NamesPerson), as
-- a ring names the agent it rings: the hub then brings the package to that agent's open pages (the
-- count of what they hold, "My work") without waiting for them to act on it. NOT VALID as in 00022
-- and 00030: the log is append-only, and the reassignments written before this named nobody.
ALTER TABLE events DROP CONSTRAINT events_subject_user;
ALTER TABLE events ADD CONSTRAINT events_subject_user CHECK ((subject_user IS NOT NULL) =
    (kind IN ('signed_out', 'user_disabled', 'role_changed', 'member_removed',
        'user_created', 'user_changed', 'user_enabled', 'password_reset', 'password_changed',
        'offered', 'offer_ended', 'reassigned'))) NOT VALID;

-- +goose Down
-- The reassignments written since name their holder: the narrower check comes back NOT VALID, and
-- the code of before writes none.
SET LOCAL lock_timeout = '1s';
ALTER TABLE events DROP CONSTRAINT events_subject_user;
ALTER TABLE events ADD CONSTRAINT events_subject_user CHECK ((subject_user IS NOT NULL) =
    (kind IN ('signed_out', 'user_disabled', 'role_changed', 'member_removed',
        'user_created', 'user_changed', 'user_enabled', 'password_reset', 'password_changed',
        'offered', 'offer_ended'))) NOT VALID;
