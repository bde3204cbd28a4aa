-- +goose Up
-- What an agent below a queue's PII role gets of the transcript: masked (the default: the raw chat
-- collapsed, with the contact's name, email, phone and PII entity values masked in every turn) or
-- withheld entirely.
ALTER TABLE queues ADD COLUMN withhold_transcript boolean NOT NULL DEFAULT false;

-- Each time someone is shown a package's personal data unmasked: one row per page view, websocket
-- frame or export (not one per field or per package), naming the packages and the union of the
-- fields shown. A table of its own rather than an events kind: the live feed reads every events row
-- and fans it out to browsers, and a supervisor watching a busy queue would make every frame write
-- a row that every other browser is then sent. It is append-only like the log.
CREATE TABLE pii_views (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    user_id     bigint NOT NULL REFERENCES users (id),
    via         text NOT NULL CHECK (via IN ('page', 'sidebar', 'frame', 'export')),
    handoff_ids bigint[] NOT NULL CHECK (cardinality(handoff_ids) > 0),
    fields      text[] NOT NULL
);
-- "Who saw this package's PII" is the question asked of it; an export's row names many packages.
CREATE INDEX pii_views_handoffs_idx ON pii_views USING gin (handoff_ids);
CREATE INDEX pii_views_user_idx ON pii_views (user_id, at);

-- +goose StatementBegin
CREATE FUNCTION pii_views_are_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'pii_views is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER pii_views_no_change BEFORE UPDATE OR DELETE ON pii_views
    FOR EACH ROW EXECUTE FUNCTION pii_views_are_append_only();
CREATE TRIGGER pii_views_no_truncate BEFORE TRUNCATE ON pii_views
    FOR EACH STATEMENT EXECUTE FUNCTION pii_views_are_append_only();

-- The audit view pages the log newest first by (at, seq), whole or narrowed to one actor, queue or
-- kind, each with an optional date range: each index below serves one filter in that order, so a
-- page reads its 50 rows and stops, without OFFSET or a sort. One package's history is short and
-- uses events_handoff_idx. Each index is one more entry per change written.
CREATE INDEX events_at_idx ON events (at, seq);
CREATE INDEX events_actor_idx ON events (actor_user, at, seq) WHERE actor_user IS NOT NULL;
CREATE INDEX events_queue_idx ON events (queue_id, at, seq) WHERE queue_id IS NOT NULL;
CREATE INDEX events_kind_idx ON events (kind, at, seq);

-- +goose Down
DROP INDEX events_kind_idx;
DROP INDEX events_queue_idx;
DROP INDEX events_actor_idx;
DROP INDEX events_at_idx;
DROP TABLE pii_views;
DROP FUNCTION pii_views_are_append_only();
ALTER TABLE queues DROP COLUMN withhold_transcript;
