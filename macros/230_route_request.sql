-- route_request(thread_ref, instant): the ranked executors for thread `thread_ref` (a ref) at `instant` (pass
-- now() for the present): route_for over the thread's required capabilities and its
-- request's precision and urgency. Columns: executor, rank, rule, reason.
-- Depends on: route_for, threads, messages.
CREATE OR REPLACE MACRO route_request(thread_ref, instant := NULL) AS TABLE
SELECT * FROM route_for(
    (SELECT requires FROM threads WHERE ref = thread_ref),
    (SELECT json_extract_string(list_filter(list_transform("MESS", lambda payload: to_json(payload)),
                                             lambda payload_json: json_type(payload_json, '$.request') = 'OBJECT')[1], '$.request.precision')
     FROM messages WHERE ref = thread_ref ORDER BY seq LIMIT 1),
    (SELECT json_extract_string(list_filter(list_transform("MESS", lambda payload: to_json(payload)),
                                             lambda payload_json: json_type(payload_json, '$.request') = 'OBJECT')[1],
                                '$.request.constraints.timing.urgency')
     FROM messages WHERE ref = thread_ref ORDER BY seq LIMIT 1),
    coalesce(instant, get_current_timestamp())
);
