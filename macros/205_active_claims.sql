-- active_claims(): how many threads each executor has claimed and not finished (threads in
-- state=executing/, by their envelope's executor). Columns: executor, active.
-- Depends on: read_yaml_auto.
CREATE OR REPLACE MACRO active_claims() AS TABLE
WITH template AS (
    SELECT NULL::VARCHAR AS executor, NULL::VARCHAR AS filename WHERE false
)
SELECT executor, count(*) AS active
FROM (
    SELECT * FROM template
    UNION ALL BY NAME
    SELECT * FROM read_yaml_auto(['{{home}}/state=executing/*.messe-af.yaml', '{{home}}/state=executing/*.messe-af'], multi_document := 'first', ignore_errors := true,
                                 hive_partitioning := false, filename := true, allow_empty := true)
)
WHERE executor IS NOT NULL
GROUP BY executor;
