-- +goose Up
-- Failed logins are counted per client address too. A login reserves its failure row before the
-- password is checked and deletes it by id when the password was right, so that parallel
-- attempts cannot all pass the count. Failures recorded before this migration have no address:
-- they still count for their email.
ALTER TABLE login_failures
    ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    ADD COLUMN address text NOT NULL DEFAULT '';
ALTER TABLE login_failures ALTER COLUMN address DROP DEFAULT;
CREATE INDEX login_failures_address_at_idx ON login_failures (address, at);

-- +goose Down
DROP INDEX login_failures_address_at_idx;
ALTER TABLE login_failures DROP COLUMN address, DROP COLUMN id;
