-- +goose Up
-- The supervisors' dashboard (internal/dashboard) reads packages by queue and time of intake over
-- up to 60 days, at a million packages: each read must be an index-only range scan, never a visit
-- to the heap, whose rows carry the whole package.
--
-- The trigger lives inside the package; a stored copy lets the index carry it. It is generated,
-- so intake's INSERT stays as it is and the copy cannot disagree with the package.
ALTER TABLE handoffs ADD COLUMN trigger text GENERATED ALWAYS AS (package ->> 'trigger') STORED;

-- A package is a repeat contact when its contact had another package resolved or returned to the
-- bot within the 7 days before it arrived (docs/metrics.md). Intake decides it as it inserts the
-- package, from rows that can no longer change (a closed package stays closed), so the fact never
-- changes either: the dashboard counts a column instead of probing every package's contact, and
-- the queue card's badge reads the same column. Packages already stored are decided here the
-- same way.
ALTER TABLE handoffs ADD COLUMN repeat_contact boolean NOT NULL DEFAULT false;
UPDATE handoffs h SET repeat_contact = true
WHERE EXISTS (SELECT 1 FROM handoffs r WHERE r.contact_id = h.contact_id AND r.status IN ('resolved', 'returned_to_bot')
    AND r.closed_at < h.created_at AND r.closed_at >= h.created_at - interval '7 days');

-- Everything a dashboard figure reads of a package, keyed by where and when it arrived. queue_id
-- leads so that one queue reads only its own rows; all queues read each queue's range in one scan
-- (queue_id = ANY). docs/metrics.md weighs this against rollup tables, with figures.
CREATE INDEX handoffs_dashboard_idx ON handoffs (queue_id, created_at)
    INCLUDE (status, accepted_at, closed_at, rejections, outcome, trigger, source_agent, repeat_contact);

-- Intake's repeat-contact probe looks only for packages resolved or returned to the bot: the
-- index holds exactly those. It replaces 00014's, which held every closed package for the badge's
-- own probe on every queue page.
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
ALTER TABLE handoffs DROP COLUMN repeat_contact, DROP COLUMN trigger;
