-- +goose NO TRANSACTION
-- +goose Up
-- The indexes of 00024's normalized emails, built without blocking writes (CREATE INDEX
-- CONCURRENTLY runs outside a transaction, so this file has none). lock_timeout bounds the brief
-- lock each build and drop takes at its start and end. IF [NOT] EXISTS lets a deploy step that
-- failed half-way run again; an index a failed concurrent build left invalid is dropped first.
SET lock_timeout = '1s';
DROP INDEX CONCURRENTLY IF EXISTS users_email_normalized_key;
-- One account per address, compared as stored: the index on lower(email) compared in the
-- collation's folding, the very comparison 00024 gave up.
CREATE UNIQUE INDEX CONCURRENTLY users_email_normalized_key ON users (email);
DROP INDEX CONCURRENTLY IF EXISTS users_email_key;
DROP INDEX CONCURRENTLY IF EXISTS login_failures_email_normalized_at_idx;
CREATE INDEX CONCURRENTLY login_failures_email_normalized_at_idx ON login_failures (email, at);
DROP INDEX CONCURRENTLY IF EXISTS login_failures_email_at_idx;
RESET lock_timeout;

-- +goose Down
SET lock_timeout = '1s';
DROP INDEX CONCURRENTLY IF EXISTS login_failures_email_at_idx;
CREATE INDEX CONCURRENTLY login_failures_email_at_idx ON login_failures (lower(email), at);
DROP INDEX CONCURRENTLY IF EXISTS login_failures_email_normalized_at_idx;
DROP INDEX CONCURRENTLY IF EXISTS users_email_key;
CREATE UNIQUE INDEX CONCURRENTLY users_email_key ON users (lower(email));
DROP INDEX CONCURRENTLY IF EXISTS users_email_normalized_key;
RESET lock_timeout;
