-- capabilities: the capability catalog (capabilities.yaml, one capability per document) joined
-- with the capabilities executors offer. Columns: id, description, tags, executors (ids of the
-- executors offering it, sorted), in_catalog.
-- Depends on: read_yaml_auto, executors.
CREATE OR REPLACE VIEW capabilities AS
WITH template AS (
    SELECT NULL::VARCHAR AS id, NULL::VARCHAR AS description, NULL::VARCHAR[] AS tags, NULL::VARCHAR AS filename
    WHERE false
),
catalog AS (
    SELECT id, description, tags FROM (
        SELECT * FROM template
        UNION ALL BY NAME
        SELECT * FROM read_yaml_auto('{{home}}/capabilities.yaml', allow_empty := true, filename := true)
    ) WHERE id IS NOT NULL
),
offered AS (
    SELECT capability AS id, list(DISTINCT executor ORDER BY executor) AS executors
    FROM (SELECT id AS executor, unnest(capabilities) AS capability FROM executors)
    GROUP BY capability
)
SELECT coalesce(c.id, o.id) AS id, c.description, coalesce(c.tags, []::VARCHAR[]) AS tags,
       coalesce(o.executors, []::VARCHAR[]) AS executors, c.id IS NOT NULL AS in_catalog
FROM catalog c FULL OUTER JOIN offered o ON c.id = o.id
ORDER BY id;
