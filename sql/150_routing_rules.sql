-- routing_rules: the routing rules in effect, in order: routing.yaml's (written by config
-- messages) if it exists, else config.yaml's `routing:` (a list, or `{rules: [...]}`).
-- Columns: position (1-based), is_default, match_capability, match_urgency, match_precision,
-- match_unsupported (match keys other than those three: such a rule never matches, and the
-- exchange warns about it), prefer (executor ids), strategy (lower_latency |
-- higher_precision | best_rated). A `default:` rule may carry `prefer` beside it or nested under it, as
-- the seed config writes it.
-- Depends on: read_yaml_auto, the json extension.
CREATE OR REPLACE VIEW routing_rules AS
WITH sources AS (
    SELECT 1 AS rank, to_json(r) AS j FROM read_yaml_auto('{{home}}/routing.yaml', allow_empty := true, filename := true) r
    UNION ALL
    SELECT 2 AS rank, to_json(c) AS j FROM read_yaml_auto('{{home}}/config.yaml', allow_empty := true, filename := true) c
),
lists AS (
    SELECT rank, CASE
        WHEN rank = 1 THEN json_extract(j, '$.rules')
        WHEN json_type(j, '$.routing') = 'ARRAY' THEN json_extract(j, '$.routing')
        ELSE json_extract(j, '$.routing.rules') END AS rules
    FROM sources
),
chosen AS (
    SELECT rules FROM lists WHERE json_type(rules) = 'ARRAY' ORDER BY rank LIMIT 1
),
rules AS (
    SELECT unnest(from_json(rules, '["JSON"]')) AS r, generate_subscripts(from_json(rules, '["JSON"]'), 1) AS position
    FROM chosen
),
shaped AS (
    SELECT position, r,
           -- Rules of one list share one union shape, so every rule shows every key; a rule
           -- without a `match` object is the default.
           coalesce(json_type(r, '$.match'), 'NULL') <> 'OBJECT' AS is_default,
           coalesce(json_extract(r, '$.prefer'), json_extract(r, '$.default.prefer')) AS p
    FROM rules
),
-- A `prefer` list in a file where another rule prefers a strategy word arrives as the JSON
-- text of the list (read_yaml_auto types mixed values as text).
decoded AS (
    SELECT * REPLACE (
        CASE WHEN json_type(p) = 'VARCHAR' AND starts_with(trim(p ->> '$'), '[') AND json_valid(p ->> '$')
             THEN (p ->> '$')::JSON ELSE p END AS p)
    FROM shaped
)
SELECT position,
       is_default,
       r ->> '$.match.capability' AS match_capability,
       r ->> '$.match.urgency' AS match_urgency,
       r ->> '$.match.precision' AS match_precision,
       CASE WHEN is_default THEN []::VARCHAR[] ELSE list_transform(list_filter(
           map_entries(from_json(json_extract(r, '$.match'), '"MAP(VARCHAR, JSON)"')),
           lambda match_kv: match_kv.key NOT IN ('capability', 'urgency', 'precision')
               AND match_kv.value IS NOT NULL AND json_type(match_kv.value) <> 'NULL'),
           lambda match_kv: match_kv.key) END AS match_unsupported,
       CASE WHEN json_type(p) = 'ARRAY' THEN from_json(p, '["VARCHAR"]')
            WHEN json_type(p) = 'VARCHAR' AND (p ->> '$') NOT IN ('lower_latency', 'higher_precision', 'best_rated') THEN [p ->> '$']
            ELSE []::VARCHAR[] END AS prefer,
       CASE WHEN json_type(p) = 'VARCHAR' AND (p ->> '$') IN ('lower_latency', 'higher_precision', 'best_rated') THEN p ->> '$' END AS strategy
FROM decoded;
