-- threads: one row per thread, from the envelope (document 1) of every thread file in the
-- state folders and the archive. Columns: the envelope fields (ref, client_id, requestor,
-- executor, status, created, updated, expires, intent, priority, requires, needed_by,
-- confirm_before, depends_on, estimate, confirmation, history; for several answers assignments,
-- agree, slots; for approvals approval, decisions, approval_used; and any other field found),
-- messages (documents 2.. of the file, as written: from, received, channel, MESS, ...; e.g.
-- yaml_extract(messages, '$[*].from')), state (the folder: received, executing, finished,
-- canceled), archived, filename.
-- A thread caught in two folders by an interrupted move appears once, as its newer copy.
-- Depends on: read_yaml_auto.
CREATE OR REPLACE VIEW threads AS
WITH template AS (
    SELECT NULL::VARCHAR AS ref, NULL::VARCHAR AS client_id, NULL::VARCHAR AS requestor,
           NULL::VARCHAR AS executor, NULL::VARCHAR AS status, NULL::TIMESTAMPTZ AS created,
           NULL::TIMESTAMPTZ AS updated, NULL::TIMESTAMPTZ AS expires, NULL::VARCHAR AS intent,
           NULL::VARCHAR AS priority, NULL::VARCHAR[] AS requires, NULL::TIMESTAMPTZ AS needed_by,
           NULL::BOOLEAN AS confirm_before, NULL::VARCHAR[] AS depends_on, NULL::VARCHAR AS estimate,
           NULL::VARCHAR AS confirmation,
           NULL::STRUCT("action" VARCHAR, "at" TIMESTAMPTZ, "by" VARCHAR, note VARCHAR)[] AS history,
           NULL::BIGINT AS assignments, NULL::STRUCT(field VARCHAR, need BIGINT) AS agree,
           NULL::STRUCT(executor VARCHAR, status VARCHAR, "at" TIMESTAMPTZ, "value" VARCHAR)[] AS slots,
           NULL::STRUCT("from" VARCHAR[], need BIGINT, deny_vetoes BOOLEAN, expires TIMESTAMPTZ) AS approval,
           NULL::STRUCT("by" VARCHAR, decision VARCHAR, "at" TIMESTAMPTZ, channel VARCHAR, reason VARCHAR)[] AS decisions,
           NULL::BIGINT AS approval_used,
           NULL::VARCHAR AS state, NULL::BOOLEAN AS archived, NULL::VARCHAR AS filename
    WHERE false
),
live AS (
    SELECT *, false AS archived
    FROM read_yaml_auto(['{{home}}/state=*/*.messe-af.yaml', '{{home}}/state=*/*.messe-af'], multi_document := 'thread',
                        hive_partitioning := true, filename := true, allow_empty := true)
),
old AS (
    SELECT *, true AS archived
    FROM read_yaml_auto(['{{home}}/archive/*/*.messe-af.yaml', '{{home}}/archive/*/*.messe-af'], multi_document := 'thread',
                        hive_partitioning := false, filename := true, allow_empty := true)
),
everything AS (
    SELECT * FROM template
    UNION ALL BY NAME SELECT * FROM live
    UNION ALL BY NAME SELECT * FROM old
)
SELECT * REPLACE (
    coalesce(state, CASE WHEN status IN ('completed', 'partial') THEN 'finished' ELSE 'canceled' END) AS state
)
FROM everything
QUALIFY row_number() OVER (PARTITION BY ref ORDER BY updated DESC NULLS LAST, archived, state DESC) = 1;
