-- executors: one row per registered executor: the `executors:` of config.yaml and the
-- registrations that config messages stored under executors/ (a registration replaces a
-- config.yaml entry of the same id). Columns: id, name, capabilities (ids), capability_meta
-- (JSON object id -> metadata, for entries that carry metadata), availability (always when
-- unset), schedule, timezone (the zone its schedule is read in: its own `timezone:`, else
-- config.yaml's top-level `timezone:`, else UTC), access (place paths it reaches), location
-- (JSON: a place path or an area {lat, lng, radius_km}), environment (conditions it works in),
-- places (executor_places: its access and text location, as routing compares them), area
-- (area_of its location), capability_facts (what its capability metadata states, as routing
-- compares it: capability_facts),
-- notify (JSON), source (config | registration), registered_by.
-- Depends on: read_yaml_auto, capability_id, capability_facts, text_list, executor_places,
-- area_of, the json extension.
CREATE OR REPLACE VIEW executors AS
WITH config_file AS (
    SELECT to_json(c) AS j
    FROM read_yaml_auto('{{home}}/config.yaml', allow_empty := true, filename := true) c
),
from_config AS (
    -- Entries as map entries, so no id is ever pasted into a JSON path.
    SELECT exec_kv.key AS id, exec_kv.value AS e, 'config' AS source, 2 AS rank
    FROM (SELECT unnest(map_entries(from_json(json_extract(j, '$.executors'), '"MAP(VARCHAR, JSON)"'))) AS exec_kv
          FROM config_file
          WHERE json_type(j, '$.executors') = 'OBJECT')
),
from_list AS (
    SELECT e ->> '$.id' AS id, e, 'config' AS source, 2 AS rank
    FROM (SELECT unnest(from_json(json_extract(j, '$.executors'), '["JSON"]')) AS e FROM config_file
          WHERE json_type(j, '$.executors') = 'ARRAY')
),
from_registrations AS (
    SELECT j ->> '$.id' AS id, j AS e, 'registration' AS source, 1 AS rank
    FROM (SELECT to_json(r) AS j
          FROM read_yaml_auto('{{home}}/executors/*.yaml', allow_empty := true, filename := true, ignore_errors := true) r)
    WHERE j ->> '$.id' IS NOT NULL
),
chosen AS (
    SELECT * FROM (
        SELECT * FROM from_config UNION ALL SELECT * FROM from_list UNION ALL SELECT * FROM from_registrations
    )
    WHERE id IS NOT NULL AND regexp_full_match(id, '[A-Za-z0-9][A-Za-z0-9._:-]*')
    QUALIFY row_number() OVER (PARTITION BY id ORDER BY rank) = 1
),
entries AS (
    -- Each capability entry as text: a plain id, or the JSON of `{id: metadata}`.
    SELECT id, e, source,
           list_transform(
               CASE json_type(e, '$.capabilities')
                   WHEN 'ARRAY' THEN from_json(json_extract(e, '$.capabilities'), '["JSON"]')
                   WHEN 'VARCHAR' THEN [json_extract(e, '$.capabilities')]
                   ELSE []::JSON[]
               END,
               lambda cap_json: CASE json_type(cap_json) WHEN 'OBJECT' THEN cap_json::VARCHAR ELSE cap_json ->> '$' END
           ) AS caps
    FROM chosen
),
shaped AS (
    SELECT id,
           e ->> '$.name' AS name,
           list_transform(caps, lambda cap_entry: capability_id(cap_entry)) AS capabilities,
           map_from_entries(list_filter(
               list_transform(caps, lambda cap_entry: {
                   'k': capability_id(cap_entry),
                   'v': CASE WHEN starts_with(trim(cap_entry), '{') AND json_valid(cap_entry)
                                  AND json_type(cap_entry::JSON) = 'OBJECT' THEN
                            from_json(cap_entry::JSON, '"MAP(VARCHAR, JSON)"')[capability_id(cap_entry)]
                        END}),
               -- Metadata only, and the first entry of an id listed twice (map keys are unique).
               lambda meta_entry, i: meta_entry.v IS NOT NULL AND json_type(meta_entry.v) <> 'NULL'
                   AND list_position(list_transform(caps, lambda other: capability_id(other)), meta_entry.k) = i))
               AS capability_meta,
           coalesce(e ->> '$.availability', 'always') AS availability,
           e ->> '$.schedule' AS schedule,
           coalesce(e ->> '$.timezone', (SELECT max(j ->> '$.timezone') FROM config_file), 'UTC') AS timezone,
           text_list(json_extract(e, '$.access')) AS access,
           CASE WHEN coalesce(json_type(e, '$.location'), 'NULL') <> 'NULL' THEN json_extract(e, '$.location') END AS location,
           text_list(json_extract(e, '$.environment')) AS environment,
           executor_places(text_list(json_extract(e, '$.access')), json_extract(e, '$.location')) AS places,
           area_of(json_extract(e, '$.location')) AS area,
           json_extract(e, '$.notify') AS notify,
           source,
           e ->> '$.registered_by' AS registered_by
    FROM entries
)
SELECT *, capability_facts(capability_meta) AS capability_facts
FROM shaped;
