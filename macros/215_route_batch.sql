-- route_batch(reqs, instant): route_for for many requests at once (the exchange's dispatcher
-- routes every waiting thread in one statement: binding the routing SQL costs far more than
-- running it). `reqs` is a list of structs {ref, requires (VARCHAR[]), precision, urgency};
-- each is routed exactly as route_for routes it alone. Columns: i (1-based position in `reqs`),
-- ref, executor, rank, rule, reason; ordered by i, then rank.
-- Eligibility is match_capabilities over the executors' capability ids, written as
-- list_has_all.
-- Depends on: executors, executor_availability_at, routing_rules, capability_id.
CREATE OR REPLACE MACRO route_batch(reqs, instant) AS TABLE
WITH wanted AS (
    -- Capability ids once per request (`executors` already holds ids): every later test is
    -- plain list logic, which keeps this statement cheap to bind.
    SELECT i, ref, requires, list_transform(requires, lambda needed: capability_id(needed)) AS req_ids, want_precision, want_urgency
    FROM (
        SELECT i, w.ref AS ref, coalesce(w.requires, []::VARCHAR[]) AS requires,
               w.precision AS want_precision, w.urgency AS want_urgency
        FROM (SELECT unnest(reqs) AS w, generate_subscripts(reqs, 1) AS i)
    )
),
available AS (
    SELECT e.id, e.capabilities, a.active_claims
    FROM executors e JOIN executor_availability_at(instant) a ON a.id = e.id
    WHERE a.available
),
eligible AS (
    SELECT w.i, x.id, x.active_claims
    FROM wanted w, available x
    WHERE list_has_all(coalesce(x.capabilities, []::VARCHAR[]), w.req_ids)
),
matching AS (
    SELECT w.i, r.position, r.is_default, r.prefer, r.strategy,
           CASE WHEN r.is_default THEN 'default'
                ELSE 'match ' || concat_ws(', ', 'capability ' || r.match_capability, 'urgency ' || r.match_urgency,
                                           'precision ' || r.match_precision) END AS what
    FROM wanted w, routing_rules r
    WHERE r.is_default
       OR (len(r.match_unsupported) = 0
           AND (r.match_capability IS NULL
            OR list_contains(w.req_ids, r.match_capability))
           AND (r.match_urgency IS NULL OR r.match_urgency = w.want_urgency)
           AND (r.match_precision IS NULL OR r.match_precision = w.want_precision))
),
preferred AS (
    SELECT i, position, is_default, what, strategy, unnest(prefer) AS id, generate_subscripts(prefer, 1) AS pref
    FROM matching
    WHERE strategy IS NULL
),
candidates AS (
    SELECT p.i, p.position, p.is_default, p.what, p.strategy, p.id, p.pref
    FROM preferred p JOIN eligible e ON e.i = p.i AND e.id = p.id
    UNION ALL
    SELECT m.i, m.position, m.is_default, m.what, m.strategy, e.id, e.active_claims AS pref
    FROM matching m JOIN eligible e ON e.i = m.i
    WHERE m.strategy IS NOT NULL
),
winner AS (
    SELECT DISTINCT ON (i) i, position FROM candidates ORDER BY i, is_default, position
),
by_rule AS (
    SELECT c.i, c.id AS executor,
           row_number() OVER (PARTITION BY c.i ORDER BY c.pref, c.id) AS rank,
           c.position AS rule,
           CASE WHEN c.strategy IS NULL THEN 'rule ' || c.position || ' (' || c.what || ') prefers ' || c.id
                ELSE 'rule ' || c.position || ' (' || c.what || ') strategy ' || c.strategy || ': all eligible' END AS reason
    FROM candidates c JOIN winner w ON w.i = c.i AND w.position = c.position
),
by_capability AS (
    SELECT e.i, e.id AS executor,
           row_number() OVER (PARTITION BY e.i ORDER BY e.active_claims, e.id) AS rank,
           NULL::BIGINT AS rule,
           CASE WHEN len(w.requires) = 0 THEN 'no capability required'
                ELSE 'holds ' || array_to_string(w.req_ids, ', ') END AS reason
    FROM eligible e JOIN wanted w ON w.i = e.i
    WHERE e.i NOT IN (SELECT i FROM winner)
)
SELECT r.i, w.ref, r.executor, r.rank, r.rule, r.reason
FROM (SELECT * FROM by_rule UNION ALL SELECT * FROM by_capability) r JOIN wanted w ON w.i = r.i
ORDER BY r.i, r.rank;
