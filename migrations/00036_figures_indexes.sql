-- +goose NO TRANSACTION
-- +goose Up
-- The indexes the dashboard's figures of 00035 read (docs/metrics.md, "Speed"), built without
-- blocking writes (CREATE INDEX CONCURRENTLY runs outside a transaction, so this file has none).
-- lock_timeout bounds the brief lock each build and drop takes at its start and end; an index a
-- failed concurrent build left invalid is dropped first, so a deploy step that failed half-way
-- runs again.
SET lock_timeout = '1s';

-- handoffs_dashboard_idx (00015) with the package's id and its holder: the rollup reads each hour's
-- packages from the index alone, and now the agent whose accept stands and the id their replies
-- are found by. Without them every read of an hour visits the heap, whose rows carry the whole
-- package: with the replies read by a join, a refresh after an hour's activity took 9.7 s; with
-- these indexes and each package's replies looked up on its own, 1.5 s (0.5 s before 00035's
-- figures; docs/metrics.md, make bench-dashboard).
DROP INDEX CONCURRENTLY IF EXISTS handoffs_figures_idx;
CREATE INDEX CONCURRENTLY handoffs_figures_idx ON handoffs (queue_id, created_at)
    INCLUDE (id, status, accepted_at, closed_at, rejections, outcome, trigger, source_agent, repeat_contact, assignee_id);
DROP INDEX CONCURRENTLY IF EXISTS handoffs_dashboard_idx;

-- A package's replies by time with who sent them: its first reply, and each agent's replies. It
-- holds what evals_replies_idx (00013) held, which the package page reads, and replaces it.
DROP INDEX CONCURRENTLY IF EXISTS evals_reply_times_idx;
CREATE INDEX CONCURRENTLY evals_reply_times_idx ON evals (handoff_id, at) INCLUDE (editor_id) WHERE kind = 'reply';
DROP INDEX CONCURRENTLY IF EXISTS evals_replies_idx;

-- A package's replies to its bot's draft, as the figures count them: who sent each, whether it was
-- the draft as is, how far from it. The drafts now count with their package (00035), so the index
-- of the replies to drafts by queue and time of sending (00015) has no reader left.
DROP INDEX CONCURRENTLY IF EXISTS evals_draft_edits_idx;
CREATE INDEX CONCURRENTLY evals_draft_edits_idx ON evals (handoff_id)
    INCLUDE (editor_id, accepted_as_is, edit_distance_chars) WHERE kind = 'reply' AND draft <> '';
DROP INDEX CONCURRENTLY IF EXISTS evals_draft_replies_idx;
RESET lock_timeout;

-- +goose Down
SET lock_timeout = '1s';
DROP INDEX CONCURRENTLY IF EXISTS evals_draft_replies_idx;
CREATE INDEX CONCURRENTLY evals_draft_replies_idx ON evals (queue_id, at) INCLUDE (accepted_as_is) WHERE kind = 'reply' AND draft <> '';
DROP INDEX CONCURRENTLY IF EXISTS evals_draft_edits_idx;
DROP INDEX CONCURRENTLY IF EXISTS evals_replies_idx;
CREATE INDEX CONCURRENTLY evals_replies_idx ON evals (handoff_id, at) WHERE kind = 'reply';
DROP INDEX CONCURRENTLY IF EXISTS evals_reply_times_idx;
DROP INDEX CONCURRENTLY IF EXISTS handoffs_dashboard_idx;
CREATE INDEX CONCURRENTLY handoffs_dashboard_idx ON handoffs (queue_id, created_at)
    INCLUDE (status, accepted_at, closed_at, rejections, outcome, trigger, source_agent, repeat_contact);
DROP INDEX CONCURRENTLY IF EXISTS handoffs_figures_idx;
RESET lock_timeout;
