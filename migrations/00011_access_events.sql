-- +goose Up
-- A change of someone's access (a logout, a disabled account, a new role, a queue membership
-- removed) is written to the log like a package's change: every instance's hub reads it there and
-- closes that person's open sockets, and the audit keeps who did it. subject_user is the person
-- whose access changed; actor_user, as everywhere, is who changed it (none from the CLI).
-- The constraints are added NOT VALID: every row already in the log passed the narrower kind check
-- and has no subject, so scanning it, under the lock every writer waits behind, would prove nothing.
ALTER TABLE events ADD COLUMN subject_user bigint;
ALTER TABLE events ADD CONSTRAINT events_subject_user_fkey FOREIGN KEY (subject_user) REFERENCES users (id) NOT VALID;
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence',
    'signed_out', 'user_disabled', 'role_changed', 'member_removed')) NOT VALID;
-- Exactly the access kinds name their subject: an access change nobody's sockets hear of would
-- leave them open.
ALTER TABLE events ADD CONSTRAINT events_subject_user CHECK ((subject_user IS NOT NULL) =
    (kind IN ('signed_out', 'user_disabled', 'role_changed', 'member_removed'))) NOT VALID;

-- +goose Down
-- The log is append-only: its access rows stay, so the narrower check cannot be validated.
ALTER TABLE events DROP CONSTRAINT events_subject_user;
ALTER TABLE events DROP COLUMN subject_user;
ALTER TABLE events DROP CONSTRAINT events_kind_check;
ALTER TABLE events ADD CONSTRAINT events_kind_check CHECK (kind IN ('queued', 'reserved', 'released',
    'accepted', 'rejected', 'transferred', 'returned_to_bot', 'resolved', 'expired', 'canceled', 'presence')) NOT VALID;
