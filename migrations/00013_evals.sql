-- +goose Up
-- What agents do with the bots' work, kept as evaluation and training records: each reply an
-- agent sends (kind 'reply') and each outcome that labels a package ('return_to_bot', 'reject',
-- 'resolve'). A row is written in the transaction of the action it records, and holds what an
-- export needs without reading the package again: the package's source_agent, source_run_id,
-- trigger and locale as they were when the agent acted, and the queue it was in then.
CREATE TABLE evals (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind                text NOT NULL CHECK (kind IN ('reply', 'return_to_bot', 'reject', 'resolve')),
    handoff_id          bigint NOT NULL REFERENCES handoffs (id),
    queue_id            bigint NOT NULL REFERENCES queues (id),
    -- The agent who sent the reply or took the action.
    editor_id           bigint NOT NULL REFERENCES users (id),
    at                  timestamptz NOT NULL,
    source_agent        text NOT NULL,
    source_run_id       text NOT NULL,
    trigger             text NOT NULL,
    locale              text,
    -- A reply: the bot's draft ('' when the package had none and the agent wrote from scratch),
    -- the text sent, their word diff (a JSON array of {op, text} segments, op one of equal,
    -- insert, delete) and line diff in the unified format, the edit distances, and the agent's
    -- tags. editing_ms is the browser's claim of the time from the editor's first focus to send.
    draft               text,
    final               text,
    word_diff           jsonb,
    unified_diff        text,
    edit_distance_chars integer CHECK (edit_distance_chars >= 0),
    edit_distance_words integer CHECK (edit_distance_words >= 0),
    accepted_as_is      boolean,
    tags                text[] CHECK (tags <@ ARRAY['tone', 'factual_error', 'policy', 'missing_info', 'too_long', 'other']),
    editing_ms          integer CHECK (editing_ms >= 0),
    -- An outcome: the return reason code or the resolution code (none for a rejection), the
    -- agent's note or rejection reason, and for a return to the bot whether the escalation was
    -- needed at all (false for resolved_by_policy and wrong_escalation: what a trigger classifier
    -- learns from).
    code                text,
    note                text,
    escalation_needed   boolean,
    -- Exactly the replies carry a reply's fields, and exactly returns say whether the escalation
    -- was needed.
    CHECK ((kind = 'reply') = (draft IS NOT NULL AND final IS NOT NULL AND word_diff IS NOT NULL AND unified_diff IS NOT NULL
        AND edit_distance_chars IS NOT NULL AND edit_distance_words IS NOT NULL AND accepted_as_is IS NOT NULL
        AND tags IS NOT NULL AND editing_ms IS NOT NULL)),
    CHECK ((kind = 'return_to_bot') = (escalation_needed IS NOT NULL)),
    CHECK (kind = 'reject' OR kind = 'reply' OR code IS NOT NULL)
);
-- The package page lists its replies (outcomes, written on the actions' fast path, need not keep
-- this index up); an export reads a window of time.
CREATE INDEX evals_replies_idx ON evals (handoff_id, at) WHERE kind = 'reply';
CREATE INDEX evals_at_idx ON evals (at, id);

-- Training data is what happened, not what someone later wished: like the event log, the
-- database refuses to change or remove a record.
-- +goose StatementBegin
CREATE FUNCTION evals_are_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'evals is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
END
$$;
-- +goose StatementEnd
CREATE TRIGGER evals_no_change BEFORE UPDATE OR DELETE ON evals
    FOR EACH ROW EXECUTE FUNCTION evals_are_append_only();
CREATE TRIGGER evals_no_truncate BEFORE TRUNCATE ON evals
    FOR EACH STATEMENT EXECUTE FUNCTION evals_are_append_only();

-- A reply an agent sends is a change of the package's conversation: the log records it and the
-- bot hears of it by webhook, which is how the reply reaches the customer. Added NOT VALID, as in
-- 00011: every row already in the log passed the narrower check.
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply')) NOT VALID;
-- NOT VALID for the same reason: every outbox row already passed the narrower check, and
-- validating would scan the outbox under the lock that intake's inserts wait behind.
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_event_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_event_check CHECK (event IN ('queued', 'accepted', 'rejected',
    'returned_to_bot', 'transferred', 'resolved', 'expired', 'canceled', 'reply')) NOT VALID;

-- +goose Down
-- The log is append-only: its reply rows stay, so the narrower checks cannot be validated.
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_event_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_event_check CHECK (event IN ('queued', 'accepted', 'rejected',
    'returned_to_bot', 'transferred', 'resolved', 'expired', 'canceled')) NOT VALID;
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed')) NOT VALID;
DROP TABLE evals;
DROP FUNCTION evals_are_append_only();
