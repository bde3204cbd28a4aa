-- +goose Up
-- A package is open until it is closed: SQL asks "closed_at IS NULL" rather than listing the open
-- statuses. A list passed as a parameter (status = ANY($1)) cannot match a partial index, so every
-- "take next" was planned afresh (make bench-desk -scenarios 4: 962 against 1,366 accepts/s); a
-- list written into each query would be a second copy of handoff.OpenStatuses. The check below
-- binds closed_at to the status, and a test holds it to the Go list.
UPDATE handoffs SET closed_at = updated_at
WHERE closed_at IS NULL AND status NOT IN ('queued', 'reserved', 'accepted', 'awaiting_approval');
ALTER TABLE handoffs ADD CONSTRAINT handoffs_open_until_closed
    CHECK ((closed_at IS NULL) = (status IN ('queued', 'reserved', 'accepted', 'awaiting_approval'))) NOT VALID;
ALTER TABLE handoffs VALIDATE CONSTRAINT handoffs_open_until_closed;

DROP INDEX handoffs_open_idx;
CREATE INDEX handoffs_open_idx ON handoffs (queue_id) WHERE closed_at IS NULL;
-- Only held packages: a waiting one has no assignee, so intake does not touch this index, and a
-- question about open packages that names no assignee cannot be answered by scanning it.
DROP INDEX handoffs_assignee_idx;
CREATE INDEX handoffs_assignee_idx ON handoffs (assignee_id) WHERE closed_at IS NULL AND assignee_id IS NOT NULL;
-- A contact's open package: the one-open guard at intake, and a bot resuming an incident.
CREATE INDEX handoffs_contact_open_idx ON handoffs (contact_id) WHERE closed_at IS NULL;

-- +goose Down
DROP INDEX handoffs_contact_open_idx;
DROP INDEX handoffs_assignee_idx;
CREATE INDEX handoffs_assignee_idx ON handoffs (assignee_id)
    WHERE status IN ('queued', 'reserved', 'accepted', 'awaiting_approval');
DROP INDEX handoffs_open_idx;
CREATE INDEX handoffs_open_idx ON handoffs (queue_id) WHERE status IN ('queued', 'reserved', 'accepted', 'awaiting_approval');
ALTER TABLE handoffs DROP CONSTRAINT handoffs_open_until_closed;
