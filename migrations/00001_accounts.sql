-- +goose Up
CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email         text NOT NULL,
    display_name  text NOT NULL,
    role          text NOT NULL CHECK (role IN ('agent', 'supervisor', 'admin')),
    password_hash text NOT NULL,
    capacity      integer NOT NULL DEFAULT 3 CHECK (capacity > 0),
    disabled      boolean NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now()
);
-- Emails are compared case-insensitively: "Dana@X.com" and "dana@x.com" are one login.
CREATE UNIQUE INDEX users_email_key ON users (lower(email));

-- Only a hash of the session token is stored, so a leaked table cannot be replayed as cookies.
CREATE TABLE sessions (
    token_hash bytea PRIMARY KEY,
    user_id    bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX sessions_user_id_idx ON sessions (user_id);
CREATE INDEX sessions_expires_at_idx ON sessions (expires_at);

CREATE TABLE queues (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name                text NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_-]{0,62}$'),
    parent_id           bigint REFERENCES queues (id),
    enabled             boolean NOT NULL DEFAULT true,
    ttl                 interval NOT NULL DEFAULT '24 hours' CHECK (ttl > interval '0'),
    reservation_timeout interval NOT NULL DEFAULT '2 minutes' CHECK (reservation_timeout > interval '0'),
    refund_threshold    numeric(14, 4) NOT NULL DEFAULT 50 CHECK (refund_threshold >= 0),
    default_priority    text NOT NULL DEFAULT 'normal' CHECK (default_priority IN ('low', 'normal', 'high', 'urgent')),
    sla                 interval NOT NULL DEFAULT '15 minutes' CHECK (sla > interval '0'),
    skills              text[] NOT NULL DEFAULT '{}',
    required_entity_keys text[] NOT NULL DEFAULT '{}',
    pii_entity_keys     text[] NOT NULL DEFAULT '{}',
    -- The least role that sees PII unmasked in this queue.
    pii_min_role        text NOT NULL DEFAULT 'supervisor' CHECK (pii_min_role IN ('agent', 'supervisor', 'admin')),
    -- Which neighbours a package may be transferred to: any of children, parent, peers.
    transfer_policy     text[] NOT NULL DEFAULT '{children,parent,peers}'
                        CHECK (transfer_policy <@ ARRAY['children', 'parent', 'peers']),
    max_rejections      integer NOT NULL DEFAULT 3 CHECK (max_rejections > 0),
    guard_contact_hourly integer NOT NULL DEFAULT 3 CHECK (guard_contact_hourly > 0),
    guard_contact_daily  integer NOT NULL DEFAULT 10 CHECK (guard_contact_daily > 0),
    guard_pair_cooldown  interval NOT NULL DEFAULT '30 minutes',
    guard_chain_limit    integer NOT NULL DEFAULT 3 CHECK (guard_chain_limit > 0),
    guard_one_open       boolean NOT NULL DEFAULT true,
    escalation_queue_id  bigint REFERENCES queues (id),
    -- What intake does when nobody is online or the queue is past its SLA.
    overflow_policy      text NOT NULL DEFAULT 'accept' CHECK (overflow_policy IN ('accept', 'route', 'defer')),
    overflow_queue_id    bigint REFERENCES queues (id),
    created_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE queue_members (
    queue_id bigint NOT NULL REFERENCES queues (id) ON DELETE CASCADE,
    user_id  bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    PRIMARY KEY (queue_id, user_id)
);
CREATE INDEX queue_members_user_id_idx ON queue_members (user_id);

-- +goose Down
DROP TABLE queue_members;
DROP TABLE queues;
DROP TABLE sessions;
DROP TABLE users;
