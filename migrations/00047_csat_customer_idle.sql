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

-- The customer who goes quiet (issue 31 §4): an agent's reply the customer has not answered for
-- customer_idle shows the package as "customer idle"; for customer_gone ('0': never), the sweeper
-- resolves it as customer_unreachable, which frees the agent's capacity. Columns with constant
-- defaults: adding them rewrites nothing.
ALTER TABLE queues ADD COLUMN customer_idle interval NOT NULL DEFAULT '10 minutes' CHECK (customer_idle > '0'::interval),
    ADD COLUMN customer_gone interval NOT NULL DEFAULT '0' CHECK (customer_gone >= '0'::interval);

-- +goose Down
SET LOCAL lock_timeout = '1s';
ALTER TABLE queues DROP COLUMN customer_idle, DROP COLUMN customer_gone;
DROP TABLE csat;
