-- +goose Up
-- The trace context of a package's span, as a W3C traceparent, written by intake in the package's
-- own insert. Every later span about the package (an agent's accept, a resolve, a webhook's
-- delivery) links to it, which is how a bot's run and the humans' work join up in a tracing
-- backend (docs/tracing.md). NULL while tracing is off. Adding a nullable column without a default
-- rewrites nothing.
ALTER TABLE handoffs ADD COLUMN trace_parent text;

-- A webhook remembers the span of the change that caused it and the package's span, so that its
-- delivery, made later and maybe by another instance, links to both and sends its own traceparent.
ALTER TABLE webhook_outbox ADD COLUMN trace_parent text, ADD COLUMN package_trace text;

-- +goose Down
ALTER TABLE webhook_outbox DROP COLUMN trace_parent, DROP COLUMN package_trace;
ALTER TABLE handoffs DROP COLUMN trace_parent;
