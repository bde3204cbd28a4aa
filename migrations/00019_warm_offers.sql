-- +goose Up
-- Warm transfers ring one agent at a time (issue #15). A queue says how long a ring lasts
-- (accept_window) and how long a warm package may go on ringing before it waits like any other
-- (warm_wait).
ALTER TABLE queues
    ADD COLUMN accept_window interval NOT NULL DEFAULT '20 seconds' CHECK (accept_window > interval '0'),
    ADD COLUMN warm_wait interval NOT NULL DEFAULT '60 seconds' CHECK (warm_wait > interval '0');

-- warm_until is set while a warm package is still looking for an agent to ring; it is cleared
-- when one accepts it or its warm phase ends (the bot's warm_timeout).
ALTER TABLE handoffs ADD COLUMN warm_until timestamptz;
CREATE INDEX handoffs_warm_idx ON handoffs (warm_until) WHERE warm_until IS NOT NULL;

-- offers are the rings, live (ended_at null) and ended. The database, not the code, holds the two
-- rules that must survive several instances routing at once: one live offer per package, and one
-- live offer per agent. A second writer waits on the first's index entry and then finds the
-- conflict, so two instances can never ring one agent twice or one package to two agents.
CREATE TABLE offers (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    handoff_id  bigint NOT NULL REFERENCES handoffs (id) ON DELETE CASCADE,
    user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    offered_at  timestamptz NOT NULL,
    until       timestamptz NOT NULL,
    ended_at    timestamptz,
    outcome     text CHECK (outcome IN ('accepted', 'declined', 'timed_out', 'withdrawn', 'taken')),
    CHECK ((ended_at IS NULL) = (outcome IS NULL))
);
CREATE UNIQUE INDEX offers_live_package_idx ON offers (handoff_id) WHERE ended_at IS NULL;
CREATE UNIQUE INDEX offers_live_agent_idx ON offers (user_id) WHERE ended_at IS NULL;
CREATE INDEX offers_due_idx ON offers (until) WHERE ended_at IS NULL;
-- The fair choice reads each agent's last offer; a package's rung agents come from its offers.
CREATE INDEX offers_agent_idx ON offers (user_id, offered_at);
CREATE INDEX offers_handoff_idx ON offers (handoff_id);
-- The fair choice also reads each agent's last accept, and the estimated wait a queue's last
-- accepts (docs/warm.md).
CREATE INDEX handoffs_accepted_by_idx ON handoffs (assignee_id, accepted_at) WHERE accepted_at IS NOT NULL;
CREATE INDEX handoffs_queue_accepted_idx ON handoffs (queue_id, accepted_at) WHERE accepted_at IS NOT NULL;

-- Offers and their ends are in the log; warm_timeout also tells the bot. NOT VALID as in 00013.
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply',
    'offered', 'offer_ended', 'warm_timeout')) NOT VALID;
-- An offer and its end name the agent who rings, whose every page shows or drops the ring.
ALTER TABLE events DROP CONSTRAINT events_subject_user;
ALTER TABLE events ADD CONSTRAINT events_subject_user CHECK ((subject_user IS NOT NULL) =
    (kind IN ('signed_out', 'user_disabled', 'role_changed', 'member_removed', 'offered', 'offer_ended'))) NOT VALID;
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_event_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_event_check CHECK (event IN ('queued', 'accepted', 'rejected',
    'returned_to_bot', 'transferred', 'resolved', 'expired', 'canceled', 'reply', 'warm_timeout')) NOT VALID;

-- +goose Down
ALTER TABLE events DROP CONSTRAINT events_subject_user;
ALTER TABLE events ADD CONSTRAINT events_subject_user CHECK ((subject_user IS NOT NULL) =
    (kind IN ('signed_out', 'user_disabled', 'role_changed', 'member_removed'))) NOT VALID;
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_event_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_event_check CHECK (event IN ('queued', 'accepted', 'rejected',
    'returned_to_bot', 'transferred', 'resolved', 'expired', 'canceled', 'reply')) NOT VALID;
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply')) NOT VALID;
DROP INDEX handoffs_queue_accepted_idx;
DROP INDEX handoffs_accepted_by_idx;
DROP TABLE offers;
DROP INDEX handoffs_warm_idx;
ALTER TABLE handoffs DROP COLUMN warm_until;
ALTER TABLE queues DROP COLUMN warm_wait, DROP COLUMN accept_window;
