-- route_request(thread_ref, instant): the ranked executors for thread `thread_ref` (a ref) at
-- `instant` (pass now() for the present): route_for over its request's required capabilities
-- (with their metadata; the envelope's `requires` when the request document is missing),
-- precision, urgency, constraints.location and constraints.environment. Columns: executor,
-- rank, rule, reason.
-- Depends on: route_for, threads, messages, text_list.
CREATE OR REPLACE MACRO route_request(thread_ref, instant := NULL) AS TABLE
WITH first_request AS (
    SELECT list_filter(list_transform("MESS", lambda payload: to_json(payload)),
                       lambda payload_json: json_type(payload_json, '$.request') = 'OBJECT')[1] AS r
    FROM messages WHERE ref = thread_ref ORDER BY seq LIMIT 1
),
asked AS (
    SELECT
        -- Entries as route_for takes them: an id, or JSON text of `{id: metadata}`.
        CASE WHEN json_type(r, '$.request.requires') = 'ARRAY' THEN
            list_transform(from_json(json_extract(r, '$.request.requires'), '["JSON"]'),
                           lambda req_entry: CASE json_type(req_entry) WHEN 'OBJECT' THEN req_entry::VARCHAR
                                                 ELSE req_entry ->> '$' END)
        END AS requires,
        r ->> '$.request.precision' AS precision,
        r ->> '$.request.constraints.timing.urgency' AS urgency,
        -- A location that files of other shapes made text is read back as JSON.
        CASE WHEN json_type(r, '$.request.constraints.location') = 'VARCHAR'
                  AND json_valid(r ->> '$.request.constraints.location')
                  AND json_type((r ->> '$.request.constraints.location')::JSON) = 'OBJECT'
             THEN (r ->> '$.request.constraints.location')::JSON
             WHEN coalesce(json_type(r, '$.request.constraints.location'), 'NULL') <> 'NULL'
             THEN json_extract(r, '$.request.constraints.location') END AS location,
        text_list(json_extract(r, '$.request.constraints.environment')) AS environment
    FROM first_request
)
SELECT * FROM route_for(
    coalesce((SELECT requires FROM asked), (SELECT requires FROM threads WHERE ref = thread_ref)),
    (SELECT precision FROM asked),
    (SELECT urgency FROM asked),
    coalesce(instant, get_current_timestamp()),
    loc := (SELECT location FROM asked),
    env := (SELECT environment FROM asked)
);
