-- +goose Up
-- A contact's closed packages by when they closed: the "repeat" badge on every queue card asks
-- whether the card's contact had one closed in the last 7 days, as an EXISTS inside the page's own
-- query. Only closed rows: intake's inserts of open packages do not touch it.
CREATE INDEX handoffs_contact_closed_idx ON handoffs (contact_id, closed_at) WHERE closed_at IS NOT NULL;

-- +goose Down
DROP INDEX handoffs_contact_closed_idx;
