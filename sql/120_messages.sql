-- messages: one row per message document (documents 2.. of every thread file). Columns: ref
-- (the thread's), seq (1 for the first message), from, received, channel, kinds (the payload
-- types present, e.g. [status, response]), MESS (the payload list as written), state,
-- archived, filename.
-- Depends on: read_yaml_auto, the json extension.
CREATE OR REPLACE VIEW messages AS
WITH template AS (
    SELECT NULL::VARCHAR AS ref, NULL::BIGINT AS document_index, NULL::VARCHAR AS "from",
           NULL::TIMESTAMPTZ AS received, NULL::VARCHAR AS channel,
           NULL::STRUCT(v VARCHAR)[] AS "MESS", NULL::VARCHAR AS status, NULL::VARCHAR AS state,
           NULL::VARCHAR AS filename
    WHERE false
),
everything AS (
    SELECT *, NULL::BOOLEAN AS archived FROM template
    UNION ALL BY NAME
    SELECT *, false AS archived
    FROM read_yaml_auto(['{{home}}/state=*/*.messe-af.yaml', '{{home}}/state=*/*.messe-af'], multi_document := 'frontmatter',
                        document_index := true, hive_partitioning := true, filename := true,
                        allow_empty := true)
    UNION ALL BY NAME
    SELECT *, true AS archived
    FROM read_yaml_auto(['{{home}}/archive/*/*.messe-af.yaml', '{{home}}/archive/*/*.messe-af'], multi_document := 'frontmatter',
                        document_index := true, hive_partitioning := false, filename := true,
                        allow_empty := true)
)
SELECT ref,
       document_index AS seq,
       "from",
       received,
       channel,
       -- Keys as map entries, never pasted into a JSON path (a payload type from a foreign
       -- file may hold any character).
       flatten(list_transform("MESS", lambda payload: CASE WHEN json_type(to_json(payload)) = 'OBJECT'
           THEN list_transform(list_filter(
               map_entries(from_json(to_json(payload), '"MAP(VARCHAR, JSON)"')),
               lambda payload_kv: payload_kv.value IS NOT NULL AND json_type(payload_kv.value) <> 'NULL'),
               lambda payload_kv: payload_kv.key)
           ELSE []::VARCHAR[] END)) AS kinds,
       "MESS",
       coalesce(state, CASE WHEN status IN ('completed', 'partial') THEN 'finished' ELSE 'canceled' END) AS state,
       archived,
       filename
FROM everything;
