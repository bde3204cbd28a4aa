-- +goose Up
-- An action on a package it already knows sends its UPDATE and the rows that record it (event,
-- audit, webhook) in one batch, which PostgreSQL runs as one implicit transaction. The UPDATE
-- calls this with the number of rows it changed: when the package is no longer as the action
-- expected, raising rolls the whole batch back, so nothing is recorded for a change that did not
-- happen, and the desk takes the slow path that says why.
-- +goose StatementBegin
CREATE FUNCTION expect_change(changed bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF changed = 0 THEN
        RAISE EXCEPTION 'the package is not as the action expected' USING ERRCODE = 'HD001';
    END IF;
END
$$;
-- +goose StatementEnd

-- A package of a few KiB compresses to under the default 2 KiB target and stayed in the row, so
-- each of the three or more updates of its life copied it whole into the WAL. Past 256 bytes it
-- now goes to the TOAST table, written once at intake; the row the actions update stays narrow.
ALTER TABLE handoffs SET (toast_tuple_target = 256);

-- Every lookup by assignee asks for open packages (the capacity check, held packages, the
-- roster). Indexing only those keeps the capacity check from reading an agent's whole history,
-- and closing a package from adding an entry.
DROP INDEX handoffs_assignee_idx;
CREATE INDEX handoffs_assignee_idx ON handoffs (assignee_id)
    WHERE status IN ('queued', 'reserved', 'accepted', 'awaiting_approval');

-- +goose Down
DROP INDEX handoffs_assignee_idx;
CREATE INDEX handoffs_assignee_idx ON handoffs (assignee_id) WHERE assignee_id IS NOT NULL;
ALTER TABLE handoffs RESET (toast_tuple_target);
DROP FUNCTION expect_change(bigint);
