-- route_for(req, prec, urg, instant): the executors a request with required capabilities `req`
-- (VARCHAR[]), precision `prec` and urgency `urg` goes to at `instant`, ranked. Eligible
-- executors hold every required capability and are available at `instant`. Routing rules are
-- tried in order (`match` rules first, then `default`); the first rule that prefers an
-- eligible executor decides, in its `prefer` order (a strategy rule offers every eligible
-- executor, least loaded first). With no such rule, every eligible executor is chosen, least
-- loaded first. Columns: executor, rank (1 = first choice), rule (position, NULL without
-- one), reason.
-- Depends on: executors, executor_availability_at, routing_rules, match_capabilities,
-- capability_id.
CREATE OR REPLACE MACRO route_for(req, prec, urg, instant) AS TABLE
WITH eligible AS (
    SELECT e.id, a.active_claims
    FROM executors e JOIN executor_availability_at(instant) a ON a.id = e.id
    WHERE match_capabilities(req, e.capabilities) AND a.available
),
matching AS (
    SELECT position, is_default, prefer, strategy,
           CASE WHEN is_default THEN 'default'
                ELSE 'match ' || concat_ws(', ', 'capability ' || match_capability, 'urgency ' || match_urgency,
                                           'precision ' || match_precision) END AS what
    FROM routing_rules
    WHERE is_default
       OR (len(match_unsupported) = 0
           AND (match_capability IS NULL
            OR list_contains(list_transform(coalesce(req, []::VARCHAR[]), lambda needed: capability_id(needed)), match_capability))
           AND (match_urgency IS NULL OR match_urgency = urg)
           AND (match_precision IS NULL OR match_precision = prec))
),
candidates AS (
    SELECT m.position, m.is_default, m.what, m.strategy, p.id, p.pref, e.active_claims
    FROM matching m,
         LATERAL (SELECT unnest(m.prefer) AS id, generate_subscripts(m.prefer, 1) AS pref) p
         JOIN eligible e ON e.id = p.id
    WHERE m.strategy IS NULL
    UNION ALL
    SELECT m.position, m.is_default, m.what, m.strategy, e.id, e.active_claims AS pref, e.active_claims
    FROM matching m, eligible e
    WHERE m.strategy IS NOT NULL
),
winner AS (
    SELECT position FROM candidates ORDER BY is_default, position LIMIT 1
),
by_rule AS (
    SELECT c.id AS executor,
           row_number() OVER (ORDER BY c.pref, c.id) AS rank,
           c.position AS rule,
           CASE WHEN c.strategy IS NULL THEN 'rule ' || c.position || ' (' || c.what || ') prefers ' || c.id
                ELSE 'rule ' || c.position || ' (' || c.what || ') strategy ' || c.strategy || ': all eligible' END AS reason
    FROM candidates c JOIN winner w ON w.position = c.position
),
by_capability AS (
    SELECT id AS executor,
           row_number() OVER (ORDER BY active_claims, id) AS rank,
           NULL::BIGINT AS rule,
           CASE WHEN len(coalesce(req, []::VARCHAR[])) = 0 THEN 'no capability required'
                ELSE 'holds ' || array_to_string(list_transform(req, lambda needed: capability_id(needed)), ', ') END AS reason
    FROM eligible
    WHERE NOT EXISTS (SELECT 1 FROM winner)
)
SELECT * FROM by_rule
UNION ALL
SELECT * FROM by_capability
ORDER BY rank;
