-- +goose Up
-- The customer's verdict (SPEC §2a): the survey a bot ran once the conversation ended, at most once
-- per leg of a package: 'human', the agents' part, and 'bot', the bot's own. Written by
-- internal/csat after the package closed. The queue and the agent it rates are the package's when
-- it closed, kept on the row, so that figures per queue and per agent read this table alone and a
-- later transfer or reopen does not move a verdict already given.
SET LOCAL lock_timeout = '1s';

CREATE TABLE csat (
    handoff_id  bigint NOT NULL REFERENCES handoffs (id),
    leg         text NOT NULL CHECK (leg IN ('human', 'bot')),
    score       smallint NOT NULL CHECK (score BETWEEN 1 AND 5),
    comment     text CHECK (comment <> ''),
    queue_id    bigint NOT NULL REFERENCES queues (id),
    -- The human leg's agent: who held the package when it closed.
    agent_id    bigint REFERENCES users (id),
    at          timestamptz NOT NULL,
    PRIMARY KEY (handoff_id, leg),
    CHECK ((leg = 'human') = (agent_id IS NOT NULL))
);
-- Figures read a window of time.
CREATE INDEX csat_at_idx ON csat (at);

-- +goose Down
SET LOCAL lock_timeout = '1s';
DROP TABLE csat;
