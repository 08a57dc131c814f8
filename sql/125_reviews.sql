-- reviews: one row per review payload (the v2 `review`, as mess implements it). Columns: ref,
-- seq, "from" (the reviewer: the requestor), received, rating (as written: 1-5, accept or
-- reject), stars (1-5; accept counts as 5, reject as 1), verdict (accept, reject, or NULL for
-- a star rating), feedback, request_redo, executor (who did the work: the thread's executor),
-- requires (the thread's capabilities), state, archived, filename.
-- Depends on: messages, threads, the json extension.
CREATE OR REPLACE VIEW reviews AS
WITH payloads AS (
    SELECT m.ref, m.seq, m."from", m.received, m.state, m.archived, m.filename,
           json_merge_patch('{}', to_json(p) -> '$.review') AS body
    FROM messages m, unnest(m."MESS") AS u(p)
    WHERE list_contains(m.kinds, 'review')
)
SELECT p.ref,
       p.seq,
       p."from",
       p.received,
       body ->> '$.rating' AS rating,
       CASE body ->> '$.rating' WHEN 'accept' THEN 5 WHEN 'reject' THEN 1
            ELSE TRY_CAST(body ->> '$.rating' AS INTEGER) END AS stars,
       CASE WHEN body ->> '$.rating' IN ('accept', 'reject') THEN body ->> '$.rating' END AS verdict,
       body ->> '$.feedback' AS feedback,
       coalesce(TRY_CAST(body ->> '$.request_redo' AS BOOLEAN), false) AS request_redo,
       t.executor,
       t.requires,
       p.state,
       p.archived,
       p.filename
FROM payloads p
LEFT JOIN threads t ON t.ref = p.ref
WHERE json_type(body) = 'OBJECT';
