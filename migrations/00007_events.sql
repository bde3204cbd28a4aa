-- +goose Up
-- One append-only log of what happened to packages, written once per change: the live desk reads
-- it by transaction-id watermark (see 00004 for why), the audit reads it by package or by time.
-- It replaces desk_events (the live feed) and audit_log (the audit), which every change wrote
-- both of. kind is the Go type events.Kind; adding a kind means a migration that widens the check.
CREATE TABLE events (
    seq           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid           xid8 NOT NULL DEFAULT pg_current_xact_id(),
    at            timestamptz NOT NULL DEFAULT now(),
    kind          text NOT NULL CHECK (kind IN ('queued', 'reserved', 'released', 'accepted', 'rejected',
                      'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence')),
    -- The queue the package is in after the change, and the one it left when the change moved it:
    -- pages of both update. Queues are disabled, never deleted, so these need no foreign key.
    queue_id      bigint,
    from_queue_id bigint,
    handoff_id    bigint REFERENCES handoffs (id),
    actor_user    bigint REFERENCES users (id),
    actor_bot     bigint REFERENCES api_keys (id),
    detail        jsonb NOT NULL DEFAULT '{}'
);
CREATE INDEX events_xid_idx ON events (xid, seq);
CREATE INDEX events_handoff_idx ON events (handoff_id, seq) WHERE handoff_id IS NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION events_are_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'events is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER events_no_change BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION events_are_append_only();
CREATE TRIGGER events_no_truncate BEFORE TRUNCATE ON events
    FOR EACH STATEMENT EXECUTE FUNCTION events_are_append_only();

-- Everything audited so far is carried over, in its order. Its xid is 0, below every mark the live
-- feed can hold, so reconnecting browsers are not sent history as news. The queue comes from the
-- name the audit detail recorded.
INSERT INTO events (xid, at, kind, queue_id, handoff_id, actor_user, actor_bot, detail)
OVERRIDING SYSTEM VALUE
SELECT '0'::xid8, a.at, a.action, (SELECT q.id FROM queues q WHERE q.name = a.detail->>'queue'),
    a.handoff_id, a.actor_user, a.actor_bot, a.detail
FROM audit_log a ORDER BY a.id;

DROP TABLE audit_log;
DROP FUNCTION audit_log_is_append_only();
DROP TABLE desk_events;

-- +goose Down
CREATE TABLE desk_events (
    seq        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid        xid8 NOT NULL DEFAULT pg_current_xact_id(),
    queue_id   bigint NOT NULL,
    handoff_id bigint NOT NULL,
    kind       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX desk_events_xid_idx ON desk_events (xid, seq);
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
INSERT INTO audit_log (at, actor_user, actor_bot, action, handoff_id, detail)
SELECT at, actor_user, actor_bot, kind, handoff_id, detail FROM events WHERE kind <> 'presence' ORDER BY seq;
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
DROP TABLE events;
DROP FUNCTION events_are_append_only();
