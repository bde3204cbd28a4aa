-- +goose Up
-- The supervisors' dashboard (internal/dashboard) reads packages by queue and time of intake over
-- up to 60 days, at a million packages: each read must be an index-only range scan, never a visit
-- to the heap, whose rows carry the whole package.
--
-- The trigger lives inside the package; a stored copy lets the index carry it. It is generated,
-- so intake's INSERT stays as it is and the copy cannot disagree with the package.
ALTER TABLE handoffs ADD COLUMN trigger text GENERATED ALWAYS AS (package ->> 'trigger') STORED;

-- Everything a dashboard figure reads of a package, keyed by where and when it arrived. queue_id
-- leads so that one queue reads only its own rows; all queues read each queue's range in one scan
-- (queue_id = ANY). docs/metrics.md weighs this against rollup tables, with figures.
CREATE INDEX handoffs_dashboard_idx ON handoffs (queue_id, created_at)
    INCLUDE (status, accepted_at, closed_at, rejections, outcome, trigger, source_agent, contact_id);

-- The repeat-contact rule counts only packages resolved or returned to the bot (docs/metrics.md),
-- on the queue cards as on the dashboard: the index holds exactly those. It replaces 00014's,
-- which held every closed package.
DROP INDEX handoffs_contact_closed_idx;
CREATE INDEX handoffs_contact_settled_idx ON handoffs (contact_id, closed_at)
    WHERE status IN ('resolved', 'returned_to_bot');

-- The draft sent-as-is rate reads the replies to a bot's draft over a window without visiting the
-- records' heap, which holds the drafts and their diffs.
CREATE INDEX evals_draft_replies_idx ON evals (queue_id, at) INCLUDE (accepted_as_is) WHERE kind = 'reply' AND draft <> '';

-- +goose Down
DROP INDEX evals_draft_replies_idx;
DROP INDEX handoffs_contact_settled_idx;
CREATE INDEX handoffs_contact_closed_idx ON handoffs (contact_id, closed_at) WHERE closed_at IS NOT NULL;
DROP INDEX handoffs_dashboard_idx;
ALTER TABLE handoffs DROP COLUMN trigger;
