-- +goose Up
-- Failed logins, kept in the database so that every instance counts the same attempts.
CREATE TABLE login_failures (
    email text NOT NULL,
    at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX login_failures_email_at_idx ON login_failures (lower(email), at);

-- +goose Down
DROP TABLE login_failures;
