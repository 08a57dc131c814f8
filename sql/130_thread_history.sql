-- thread_history: one row per entry of every thread's history log. Columns: ref, seq (1 for
-- the first entry), action, at, by, note, state, archived.
-- Depends on: threads.
CREATE OR REPLACE VIEW thread_history AS
SELECT t.ref, h.seq, h.entry."action" AS "action", h.entry."at" AS "at", h.entry."by" AS "by",
       h.entry.note AS note, t.state, t.archived
FROM threads t,
     LATERAL (SELECT unnest(t.history) AS entry, generate_subscripts(t.history, 1) AS seq) h;
