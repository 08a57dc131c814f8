-- assignments: one row per slot of a request that asks for several answers (`assignments: N`,
-- `agree:`), from the thread's envelope. Columns: ref, slot (1 for the first taken), executor,
-- status (where that executor's work stands: claimed, in_progress, completed, declined, ...),
-- "at" (its last change), "value" (what its answer gave the agreed field, as text), wanted (N),
-- agree_field, agree_need, thread_status, state, archived.
-- Depends on: threads.
CREATE OR REPLACE VIEW assignments AS
SELECT t.ref,
       s.slot,
       s.entry.executor AS executor,
       s.entry.status AS status,
       s.entry."at" AS "at",
       s.entry."value" AS "value",
       coalesce(t.assignments, 1) AS wanted,
       t.agree.field AS agree_field,
       t.agree.need AS agree_need,
       t.status AS thread_status,
       t.state,
       t.archived
FROM threads t,
     LATERAL (SELECT unnest(t.slots) AS entry, generate_subscripts(t.slots, 1) AS slot) s;
