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

-- +goose Down
DROP FUNCTION expect_change(bigint);
