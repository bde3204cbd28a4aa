-- +goose Up
-- Every state change of a package writes an event in its own transaction. seq orders events, but
-- it is taken before commit, so a lower seq can become visible after a higher one. Readers
-- therefore page by xid: events whose xid is below the oldest running transaction
-- (pg_snapshot_xmin) are final, and no new event can ever appear below that mark.
CREATE TABLE desk_events (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
    queue_id   bigint NOT NULL,
    handoff_id bigint NOT NULL,
    kind       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX desk_events_xid_idx ON desk_events (xid, seq);

-- Append-only: the database itself refuses to change or remove what happened.
CREATE TABLE audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    actor_user  bigint REFERENCES users (id),
    actor_bot   bigint REFERENCES api_keys (id),
    action      text NOT NULL,
    handoff_id  bigint REFERENCES handoffs (id),
    detail      jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX audit_log_handoff_idx ON audit_log (handoff_id, id);

-- +goose StatementBegin
CREATE FUNCTION audit_log_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER audit_log_no_change BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_is_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_is_append_only();

ALTER TABLE handoffs
    ADD COLUMN rejections integer NOT NULL DEFAULT 0,
    -- Set after the queue's max rejections: only a supervisor takes it from there.
    ADD COLUMN needs_supervisor boolean NOT NULL DEFAULT false,
    -- The preferred agent, who alone may take it until the offer runs out.
    ADD COLUMN offered_to bigint REFERENCES users (id),
    ADD COLUMN offered_until timestamptz;
-- The queue page pages through open, unassigned work in claim order.
CREATE INDEX handoffs_queue_page_idx ON handoffs (queue_id, priority_rank, enqueued_at, id)
    WHERE status IN ('queued', 'reserved');
-- An agent holds at most one unacknowledged reservation.
CREATE UNIQUE INDEX handoffs_one_reservation_idx ON handoffs (assignee_id) WHERE status = 'reserved';
CREATE INDEX handoffs_reserved_until_idx ON handoffs (reserved_until) WHERE status = 'reserved';
CREATE INDEX handoffs_expires_idx ON handoffs (expires_at) WHERE status = 'queued';

CREATE TABLE handoff_notes (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    handoff_id bigint NOT NULL REFERENCES handoffs (id) ON DELETE CASCADE,
    author_id  bigint NOT NULL REFERENCES users (id),
    body       text NOT NULL CHECK (length(body) BETWEEN 1 AND 4000),
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX handoff_notes_handoff_idx ON handoff_notes (handoff_id, id);

-- Presence is kept per instance, so that an instance that dies takes its sockets with it when its
-- rows stop being refreshed.
CREATE TABLE presence (
    instance_id text NOT NULL,
    user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    sockets     integer NOT NULL CHECK (sockets > 0),
    away        boolean NOT NULL DEFAULT false,
    seen_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, user_id)
);
CREATE INDEX presence_user_idx ON presence (user_id, seen_at);

-- +goose Down
DROP TABLE presence;
DROP TABLE handoff_notes;
DROP INDEX handoffs_expires_idx;
DROP INDEX handoffs_reserved_until_idx;
DROP INDEX handoffs_one_reservation_idx;
DROP INDEX handoffs_queue_page_idx;
ALTER TABLE handoffs DROP COLUMN offered_until, DROP COLUMN offered_to, DROP COLUMN needs_supervisor, DROP COLUMN rejections;
DROP TABLE audit_log;
DROP FUNCTION audit_log_is_append_only();
DROP TABLE desk_events;
