-- responses: one row per response payload, the reference design's name. Columns: ref, seq,
-- executor (the payload's, else the sender), received, content (JSON, as written), notes,
-- completed_at, response (the whole payload as JSON), state, archived, filename.
-- Depends on: messages, the json extension.
CREATE OR REPLACE VIEW responses AS
WITH payloads AS (
    SELECT m.ref, m.seq, m."from", m.received, m.state, m.archived, m.filename,
           json_merge_patch('{}', to_json(p) -> '$.response') AS body
    FROM messages m, unnest(m."MESS") AS u(p)
    WHERE list_contains(m.kinds, 'response')
)
SELECT ref,
       seq,
       coalesce(body ->> '$.executor', "from") AS executor,
       received,
       body -> '$.content' AS content,
       body ->> '$.notes' AS notes,
       body ->> '$.completed_at' AS completed_at,
       body AS response,
       state,
       archived,
       filename
FROM payloads
WHERE json_type(body) = 'OBJECT';
