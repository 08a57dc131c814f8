-- pending_by_capability: pending work per required capability (a request that requires none
-- counts under '(any)'; one that requires two counts under both). Columns: capability,
-- pending, oldest (creation time of the oldest), refs (oldest first). Reads only
-- state=received/, where pending threads live.
-- Depends on: read_yaml_auto.
CREATE OR REPLACE VIEW pending_by_capability AS
WITH template AS (
    SELECT NULL::VARCHAR AS ref, NULL::VARCHAR AS status, NULL::TIMESTAMPTZ AS created,
           NULL::VARCHAR[] AS requires, NULL::VARCHAR AS filename
    WHERE false
),
pending AS (
    SELECT ref, created, requires FROM (
        SELECT * FROM template
        UNION ALL BY NAME
        SELECT * FROM read_yaml_auto(['{{home}}/state=received/*.messe-af.yaml', '{{home}}/state=received/*.messe-af'], multi_document := 'first',
                                     hive_partitioning := false, filename := true, allow_empty := true)
    ) WHERE status = 'pending'
)
SELECT capability, count(*) AS pending, min(created) AS oldest, list(ref ORDER BY created, ref) AS refs
FROM (
    SELECT ref, created,
           unnest(CASE WHEN len(coalesce(requires, []::VARCHAR[])) = 0 THEN ['(any)']
                       ELSE list_transform(requires, lambda required_cap: capability_id(required_cap)) END) AS capability
    FROM pending
)
GROUP BY capability
ORDER BY pending DESC, capability;
