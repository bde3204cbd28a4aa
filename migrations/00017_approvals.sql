-- +goose Up
-- Refund approvals. A queue's refund_threshold (00001) is in the queue's currency; a refund in
-- another currency always needs approval. A request not decided within approval_timeout expires.
ALTER TABLE queues
    ADD COLUMN currency char(3) NOT NULL DEFAULT 'USD' CHECK (currency ~ '^[A-Z]{3}$'),
    ADD COLUMN approval_timeout interval NOT NULL DEFAULT '4 hours' CHECK (approval_timeout > interval '0');

-- One row per request: who asked, for exactly which amount and currency, and how it ended. A
-- grant covers that amount and currency only; a resolve with another amount needs a new request.
CREATE TABLE approvals (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    handoff_id   bigint NOT NULL REFERENCES handoffs (id),
    queue_id     bigint NOT NULL REFERENCES queues (id),
    -- numeric without a scale keeps the amount as asked ("120.00"); equality is numeric.
    amount       numeric NOT NULL CHECK (amount > 0),
    currency     char(3) NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    requested_by bigint NOT NULL REFERENCES users (id),
    note         text NOT NULL CHECK (length(note) BETWEEN 1 AND 4000),
    requested_at timestamptz NOT NULL,
    expires_at   timestamptz NOT NULL,
    state        text NOT NULL DEFAULT 'pending'
                 CHECK (state IN ('pending', 'granted', 'denied', 'expired', 'withdrawn')),
    decided_by   bigint REFERENCES users (id),
    decision_note text CHECK (length(decision_note) <= 4000),
    decided_at   timestamptz,
    -- A pending request has no decision; a decided one has its time, and a grant or denial its
    -- supervisor, who is never the requester (four eyes, also held in Go by approvals.Check).
    CHECK ((state = 'pending') = (decided_at IS NULL)),
    CHECK ((state IN ('granted', 'denied')) = (decided_by IS NOT NULL)),
    CHECK (decided_by IS DISTINCT FROM requested_by)
);
-- At most one pending request per package: a second one is refused by the index, whatever the
-- race between two tabs.
CREATE UNIQUE INDEX approvals_one_pending_idx ON approvals (handoff_id) WHERE state = 'pending';
-- The /approvals page lists pending requests oldest first; the sweeper finds those due.
CREATE INDEX approvals_pending_idx ON approvals (expires_at) WHERE state = 'pending';
CREATE INDEX approvals_handoff_idx ON approvals (handoff_id, requested_at);
-- The dashboard's time to decision reads decided requests of a queue over a window.
CREATE INDEX approvals_decided_idx ON approvals (queue_id, decided_at) WHERE decided_by IS NOT NULL;

-- Each step of an approval is a change of the package: the log records it and the bot hears of
-- it. NOT VALID as in 00013: every row already in the log passed the narrower check.
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed', 'reply',
    'approval_requested', 'approval_granted', 'approval_denied', 'approval_expired', 'approval_withdrawn')) NOT VALID;
ALTER TABLE webhook_outbox DROP CONSTRAINT webhook_outbox_event_check;
ALTER TABLE webhook_outbox ADD CONSTRAINT webhook_outbox_event_check CHECK (event IN ('queued', 'accepted', 'rejected',
    'returned_to_bot', 'transferred', 'resolved', 'expired', 'canceled', 'reply',
    'approval_requested', 'approval_granted', 'approval_denied', 'approval_expired', 'approval_withdrawn')) NOT VALID;

-- +goose Down
-- The log is append-only: its approval rows stay, so the narrower checks cannot be validated.
DROP TABLE approvals;
ALTER TABLE queues DROP COLUMN approval_timeout, DROP COLUMN currency;
