-- +goose Up
-- package_search (00030) is written for the rows an INSERT adds with one statement of its own,
-- not one per row: intake inserts its packages in batches (internal/intake), and a row trigger
-- paid a function call and a statement's start for each package of the batch, a sixth of what
-- writing the search row costs. The rows are the same, computed by the same package_search_of;
-- an update of the package, its contact or its id still rewrites the row, one row at a time, as
-- a transition table cannot come with the column list that keeps other updates from firing it.
-- CREATE and DROP TRIGGER wait for the writers of handoffs: a tenth of a second at most, as 00048.
SET LOCAL lock_timeout = '100ms';
-- +goose StatementBegin
CREATE FUNCTION package_search_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO package_search SELECT s.* FROM added h CROSS JOIN LATERAL package_search_of(h::handoffs) s;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
DROP TRIGGER handoffs_package_search ON handoffs;
CREATE TRIGGER handoffs_package_search_add AFTER INSERT ON handoffs REFERENCING NEW TABLE AS added
    FOR EACH STATEMENT EXECUTE FUNCTION package_search_add();
CREATE TRIGGER handoffs_package_search AFTER UPDATE OF package, contact_id, handoff_id ON handoffs
    FOR EACH ROW EXECUTE FUNCTION package_search_keep();

-- +goose Down
SET LOCAL lock_timeout = '100ms';
DROP TRIGGER handoffs_package_search ON handoffs;
DROP TRIGGER handoffs_package_search_add ON handoffs;
DROP FUNCTION package_search_add();
CREATE TRIGGER handoffs_package_search AFTER INSERT OR UPDATE OF package, contact_id, handoff_id ON handoffs
    FOR EACH ROW EXECUTE FUNCTION package_search_keep();
