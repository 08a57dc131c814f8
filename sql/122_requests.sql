-- requests: one row per request, the reference design's name (a thread's first message; a
-- request payload of a later message, as a retry sends, is its own row). Columns: ref, seq,
-- requestor (who sent it), received, client_id (the request's id), intent, priority, precision,
-- requires, context, constraints, response_hint, compensation (each as JSON, as written; priority
-- is `normal` where the request left it out, as the exchange reads it),
-- request (the whole payload as JSON), status and executor (the thread's, now), state, archived,
-- filename.
-- Depends on: messages, threads, the json extension.
CREATE OR REPLACE VIEW requests AS
WITH payloads AS (
    SELECT m.ref, m.seq, m."from", m.received, m.state, m.archived, m.filename,
           json_merge_patch('{}', to_json(p) -> '$.request') AS body
    FROM messages m, unnest(m."MESS") AS u(p)
    WHERE list_contains(m.kinds, 'request')
)
SELECT p.ref,
       p.seq,
       p."from" AS requestor,
       p.received,
       p.body ->> '$.id' AS client_id,
       p.body ->> '$.intent' AS intent,
       coalesce(p.body ->> '$.priority', 'normal') AS priority,
       p.body ->> '$.precision' AS precision,
       p.body -> '$.requires' AS requires,
       p.body -> '$.context' AS context,
       p.body -> '$.constraints' AS constraints,
       p.body -> '$.response_hint' AS response_hint,
       p.body -> '$.compensation' AS compensation,
       p.body AS request,
       t.status,
       t.executor,
       p.state,
       p.archived,
       p.filename
FROM payloads p
LEFT JOIN threads t ON t.ref = p.ref
WHERE json_type(p.body) = 'OBJECT';
