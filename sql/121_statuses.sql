-- statuses: one row per status payload, the reference design's name. Columns: ref, seq,
-- "from" (who sent it), received, code, executor (the payload's, else the sender), message,
-- status (the whole payload as JSON, as written: re, code, estimate, eta, progress_pct, questions,
-- ...), state, archived, filename.
-- Depends on: messages, the json extension.
CREATE OR REPLACE VIEW statuses AS
WITH payloads AS (
    SELECT m.ref, m.seq, m."from", m.received, m.state, m.archived, m.filename,
           json_merge_patch('{}', to_json(p) -> '$.status') AS body
    FROM messages m, unnest(m."MESS") AS u(p)
    WHERE list_contains(m.kinds, 'status')
)
SELECT ref,
       seq,
       "from",
       received,
       body ->> '$.code' AS code,
       coalesce(body ->> '$.executor', "from") AS executor,
       body ->> '$.message' AS message,
       body AS status,
       state,
       archived,
       filename
FROM payloads
WHERE json_type(body) = 'OBJECT';
