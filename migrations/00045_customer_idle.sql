-- +goose Up
-- The customer who goes quiet (SPEC §3, "The conversation"): a held package whose customer has
-- not answered the agent for customer_idle shows "customer idle" on My work and the package; when
-- customer_gone is set (more than 0), the sweeper resolves an accepted package whose customer has
-- not answered for that long as customer_unreachable. Both count from the agent's first reply
-- the customer left unanswered (internal/conversation.Quiet), never from before the accept: a
-- customer waiting for the desk's answer is not quiet. 0 switches customer_gone off, as 0s switches
-- the reopen window and the pair cooldown off; gone never comes before idle.
-- Constant defaults: adding the columns rewrites nothing.
SET LOCAL lock_timeout = '1s';
ALTER TABLE queues
    ADD COLUMN customer_idle interval NOT NULL DEFAULT '10 minutes' CHECK (customer_idle > '0'::interval),
    ADD COLUMN customer_gone interval NOT NULL DEFAULT '0' CHECK (customer_gone >= '0'::interval),
    ADD CONSTRAINT queues_customer_gone_after_idle CHECK (customer_gone = '0'::interval OR customer_gone >= customer_idle);

-- +goose Down
SET LOCAL lock_timeout = '1s';
ALTER TABLE queues DROP COLUMN customer_gone, DROP COLUMN customer_idle;
