-- +goose Up
-- Autovacuum for the tables a package's life writes, tuned per table: the defaults wait for a
-- fifth of a table to be dead before vacuuming it, and on the hot tables that is the queue's head.
-- - handoffs: every package is updated three times (reserved, accepted, resolved) and none of its
--   updates can be HOT (they change indexed columns), so each leaves a dead row and dead index
--   entries that the claim's SKIP LOCKED walk and the queue page step over until vacuum takes
--   them. Vacuumed at 2 % dead, analyzed at 2 % changed, paced by autovacuum's cost delay as
--   every table is.
-- - webhook_outbox: a queue (inserted, claimed, settled): vacuumed every 1,000 dead rows, however
--   large the table.
-- - presence, instances, offers: a few rows updated every second; vacuumed every 200 dead rows.
-- - events, pii_views, evals: append-only. Vacuumed for their inserts at 2 % (not 20 %), which
--   keeps the visibility map current, so that the live hub's probe and the audit's reads stay
--   index-only (00007; internal/events, TestIdleReadDoesNotScanTheLog).
-- Setting storage parameters takes a SHARE UPDATE EXCLUSIVE lock, which does not block writes.
SET LOCAL lock_timeout = '1s';
ALTER TABLE handoffs SET (autovacuum_vacuum_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE webhook_outbox SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
    autovacuum_analyze_scale_factor = 0.05);
ALTER TABLE presence SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200);
ALTER TABLE instances SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200);
ALTER TABLE offers SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 200);
ALTER TABLE events SET (autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE pii_views SET (autovacuum_vacuum_insert_scale_factor = 0.02);
ALTER TABLE evals SET (autovacuum_vacuum_insert_scale_factor = 0.02);

-- +goose Down
SET LOCAL lock_timeout = '1s';
ALTER TABLE handoffs RESET (autovacuum_vacuum_scale_factor, autovacuum_analyze_scale_factor);
ALTER TABLE webhook_outbox RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, autovacuum_analyze_scale_factor);
ALTER TABLE presence RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE instances RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE offers RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold);
ALTER TABLE events RESET (autovacuum_vacuum_insert_scale_factor, autovacuum_analyze_scale_factor);
ALTER TABLE pii_views RESET (autovacuum_vacuum_insert_scale_factor);
ALTER TABLE evals RESET (autovacuum_vacuum_insert_scale_factor);
