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

-- The package stays in the row (a few KiB compress under the 2 KiB TOAST target), although each
-- update of the row copies it into the WAL: moving it to TOAST (toast_tuple_target = 256) cost
-- intake 20% of its throughput for no measurable gain to the actions once they share commits
-- (make bench-intake and make bench-desk -scenarios 4, same session).

-- Every lookup by assignee asks for open packages (the capacity check, held packages, the
-- roster). Indexing only those keeps the capacity check from reading an agent's whole history,
-- and closing a package from adding an entry.
DROP INDEX handoffs_assignee_idx;
CREATE INDEX handoffs_assignee_idx ON handoffs (assignee_id)
    WHERE status IN ('queued', 'reserved', 'accepted', 'awaiting_approval');

-- +goose Down
DROP INDEX handoffs_assignee_idx;
CREATE INDEX handoffs_assignee_idx ON handoffs (assignee_id) WHERE assignee_id IS NOT NULL;
DROP FUNCTION expect_change(bigint);
