-- +goose Up
-- Never wait behind a long transaction holding handoffs or events: fail the deploy step instead,
-- and retry it. Every lock below is taken for an instant (a trigger's creation, a check's swap).
-- A tenth of a second, as 00041: this migration locks handoffs, then swaps the events check,
-- while a write may hold events and wait for handoffs; giving up before PostgreSQL's deadlock
-- check (a second) keeps that write from stalling, and the runner tries the migration again.
SET LOCAL lock_timeout = '100ms';

-- Search (internal/search) finds ids, emails and partial names by any part of them with trigram
-- indexes, when pg_trgm can be had. Since PostgreSQL 13 it is a trusted extension: any role with
-- CREATE on the database installs it, as managed services (RDS, Cloud SQL, Azure) allow. Where it
-- cannot be installed the migration goes on, with a warning: search then matches whole words and
-- word beginnings only, and says so on its page (README, "Search").
-- +goose StatementBegin
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
EXCEPTION WHEN insufficient_privilege OR undefined_file OR feature_not_supported THEN
    RAISE WARNING 'pg_trgm is not available (%): search will match whole words and word beginnings only', SQLERRM;
END
$$;
-- +goose StatementEnd

-- search_words is the one rule that splits text into searchable words: runs of letters and digits,
-- lower-cased. internal/search splits the query by the same rule, so that "ACC-1234",
-- "dana@example.com" and "+1 555 0100" find what they name word by word.
CREATE FUNCTION search_words(t text) RETURNS text LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN regexp_replace(lower(t), '[^[:alnum:]]+', ' ', 'g');

-- What search reads of each package, kept beside it rather than in it. A generated tsvector column
-- on handoffs would rewrite that table (a million packages, under an exclusive lock) to add it, and
-- an expression index on handoffs would recompute its words from the whole package (up to 256 KiB,
-- decompressed and parsed) at every status change that is not a HOT update: accept, resolve,
-- reject. A package's searchable fields never change after intake, so this row is written once,
-- by the trigger below, and status changes never touch it.
--   words: the package's open fields (problem statement, recommended next step, entity keys and
--     values), for everyone who may see the package. Ids are not among them: their "ho" and
--     "cust" would begin a word of every package; they are matched whole, or in part by trigrams. A viewer whose role
--     sees the queue's PII masked is matched against the masked text again (internal/search),
--     since free text and PII entities can name the customer.
--   contact_words: the contact's name, email and phone (and the phone's digits alone), matched
--     only for viewers whose role sees them.
--   ids, contact: the same as plain lower-case text, for trigram substring matches.
CREATE TABLE package_search (
    handoff_id    bigint PRIMARY KEY REFERENCES handoffs (id) ON DELETE CASCADE,
    words         tsvector NOT NULL,
    contact_words tsvector NOT NULL,
    ids           text NOT NULL,
    contact       text NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION package_search_of(h handoffs) RETURNS package_search LANGUAGE plpgsql STABLE AS $$
DECLARE
    p jsonb := h.package::jsonb;
    c jsonb := CASE WHEN jsonb_typeof(p -> 'contact') = 'object' THEN p -> 'contact' ELSE '{}' END;
    contact text := concat_ws(' ', c ->> 'display_name', c ->> 'email', c ->> 'phone',
        nullif(regexp_replace(coalesce(c ->> 'phone', ''), '\D', '', 'g'), ''));
    entities text;
BEGIN
    IF jsonb_typeof(p -> 'structured_entities') = 'object' THEN
        SELECT string_agg(key || ' ' || value, ' ') INTO entities FROM jsonb_each_text(p -> 'structured_entities');
    END IF;
    RETURN ROW(h.id,
        to_tsvector('simple', search_words(concat_ws(' ', p ->> 'problem_statement',
            p ->> 'recommended_next_step', entities))),
        to_tsvector('simple', search_words(contact)),
        lower(h.handoff_id || ' ' || h.contact_id),
        lower(contact))::package_search;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION package_search_keep() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO package_search SELECT s.* FROM package_search_of(NEW) s
    ON CONFLICT (handoff_id) DO UPDATE SET words = excluded.words, contact_words = excluded.contact_words,
        ids = excluded.ids, contact = excluded.contact;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
-- Every writer keeps the row, intake, the command line and a test's INSERT alike. UPDATE OF fires
-- only for a statement that sets the package or its contact, which none of the desk's does today.
CREATE TRIGGER handoffs_package_search AFTER INSERT OR UPDATE OF package, contact_id, handoff_id ON handoffs
    FOR EACH ROW EXECUTE FUNCTION package_search_keep();

-- The table is new and empty: its indexes are built here at no cost, before 00028 fills it.
CREATE INDEX package_search_words_idx ON package_search USING gin (words);
CREATE INDEX package_search_contact_words_idx ON package_search USING gin (contact_words);
-- +goose StatementBegin
DO $$
BEGIN
    IF EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_trgm') THEN
        EXECUTE 'CREATE INDEX package_search_ids_trgm_idx ON package_search USING gin (ids gin_trgm_ops)';
        EXECUTE 'CREATE INDEX package_search_contact_trgm_idx ON package_search USING gin (contact gin_trgm_ops)';
    END IF;
END
$$;
-- +goose StatementEnd

-- A supervisor moves a held package to another agent (internal/actions, reassign.go); the bot is
-- told. The checks hold the union so far (00022 and 00028's noted) with the new kind (events.Kinds, Kind.TellsBot).
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply',
    'approval_requested', 'approval_granted', 'approval_denied', 'approval_expired', 'approval_withdrawn',
    'offered', 'offer_ended', 'warm_timeout',
    'user_created', 'user_changed', 'user_enabled', 'password_reset', 'password_changed',
    'queue_created', 'queue_changed', 'api_key_created', 'api_key_changed', 'api_key_revoked', 'webhook_redelivered',
    'webhook_secret_rotated', 'sso_settings_changed', 'noted', 'reassigned')) NOT VALID;
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_event_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_event_check CHECK (event IN ('queued', 'accepted', 'rejected',
    'returned_to_bot', 'transferred', 'resolved', 'expired', 'canceled', 'reply', 'warm_timeout',
    'approval_requested', 'approval_granted', 'approval_denied', 'approval_expired', 'approval_withdrawn',
    'reassigned')) NOT VALID;

-- +goose Down
-- The kinds' union stays, as in 00022: the log's rows cannot be removed. pg_trgm stays too, since
-- other objects may have come to use it.
SET LOCAL lock_timeout = '1s';
DROP TRIGGER handoffs_package_search ON handoffs;
DROP FUNCTION package_search_keep();
DROP FUNCTION package_search_of(handoffs);
DROP TABLE package_search;
DROP FUNCTION search_words(text);
