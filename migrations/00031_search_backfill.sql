-- +goose NO TRANSACTION
-- +goose Up
-- Fills 00027's package_search for the packages stored before it, and indexes the notes' words,
-- without blocking writes: the trigger of 00027 is committed before this starts, so a package
-- arriving meanwhile is written by the trigger and skipped here (ON CONFLICT). The fill commits
-- every 10,000 packages, so that it holds back neither vacuum nor a replica for its whole run
-- (a few minutes at a million packages); run again after a failure, it goes on where it stopped.
SET lock_timeout = '1s';
-- +goose StatementBegin
DO $$
DECLARE
    done bigint := 0;
    top bigint;
BEGIN
    SELECT max(id) INTO top FROM handoffs;
    WHILE done < coalesce(top, 0) LOOP
        INSERT INTO package_search
        SELECT s.* FROM handoffs h CROSS JOIN LATERAL package_search_of(h) s
        WHERE h.id > done AND h.id <= done + 10000
        ON CONFLICT (handoff_id) DO NOTHING;
        done := done + 10000;
        COMMIT;
    END LOOP;
END
$$;
-- +goose StatementEnd
-- Notes are written once and never changed: an expression index on the existing table costs a
-- note's insert only. An index a failed concurrent build left invalid is dropped first.
DROP INDEX CONCURRENTLY IF EXISTS handoff_notes_words_idx;
CREATE INDEX CONCURRENTLY handoff_notes_words_idx ON handoff_notes USING gin (to_tsvector('simple', search_words(body)));
RESET lock_timeout;

-- +goose Down
SET lock_timeout = '1s';
DROP INDEX CONCURRENTLY IF EXISTS handoff_notes_words_idx;
RESET lock_timeout;
