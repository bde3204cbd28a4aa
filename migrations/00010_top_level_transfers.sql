-- +goose Up
-- A queue's "peers" are its siblings: queues under the same parent, which an admin linked by
-- giving them that parent. Queues without a parent were once all peers of each other, so an agent
-- could move a package into any top-level queue, one that never agreed to take them and whose
-- members the agent is not. A top-level queue now takes packages from other top-level queues
-- only when its own admin says so here (and the sending queue's transfer_policy has "peers").
-- The setting means nothing on a queue that has a parent.
--
-- Existing deployments: transfers between top-level queues stop when this migration runs. To keep
-- them for a queue that should receive them, run
--     UPDATE queues SET accepts_top_level_transfers = true WHERE name IN ('…');
ALTER TABLE queues ADD COLUMN accepts_top_level_transfers boolean NOT NULL DEFAULT false;

-- +goose Down
ALTER TABLE queues DROP COLUMN accepts_top_level_transfers;
