-- route_batch(reqs, instant): route_for for many requests at once (the exchange's dispatcher
-- routes every waiting thread in one statement: binding the routing SQL costs far more than
-- running it). `reqs` is a list of structs {ref, requires (VARCHAR[]: ids, or JSON text of
-- `{id: metadata}`), precision, urgency, location (JSON: the request's
-- constraints.location), environment (VARCHAR[])}; each is routed exactly as route_for routes
-- it alone. Columns: i (1-based position in `reqs`), ref, executor, rank, rule, reason;
-- ordered by i, then rank.
-- Eligible: available at `instant` (executor_availability_at), holding every required
-- capability with metadata that satisfies the request's (meta_satisfies, here over the
-- executors' `capability_facts`), covering its
-- location (location_covered, here over the executors' `places` and `area`) and, when the
-- executor lists environments, every environment the request names (in any letter case).
-- `on_demand` executors are eligible only when no other executor is. A `prefer` list ranks in
-- its order; a strategy ranks every eligible executor: lower_latency by the shortest median
-- time to claim plus median time to complete (executor_stats), higher_precision by the
-- highest share of its finished work that it completed (completed / (completed + failed)),
-- then by more completions, best_rated by the highest reputation score (executor_reputation:
-- the mean stars of its reviews with three reviews' worth of 4 stars added, so an executor
-- nobody reviewed yet ranks as 4.0 and still gets work), then by more reviews; executors not
-- yet measured come after the measured ones (for best_rated they are measured at 4.0), and
-- ties go to the least loaded.
-- Depends on: executors, executor_availability_at, executor_stats, executor_reputation, routing_rules,
-- capability_id, capability_needs, place_path, area_of, place_covered, area_covered.
CREATE OR REPLACE MACRO route_batch(reqs, instant) AS TABLE
WITH wanted AS MATERIALIZED (
    -- Capability ids, needs and location once per request (`executors` already holds ids):
    -- every later test is plain list logic, which keeps this statement cheap to bind.
    -- Materialized: it is read four times, and each inlined copy would be bound again.
    SELECT i, ref, requires, list_transform(requires, lambda needed: capability_id(needed)) AS req_ids,
           capability_needs(requires) AS req_needs, want_precision, want_urgency,
           place_path(want_location) AS want_place, area_of(want_location) AS want_area,
           list_transform(want_environment, lambda env_name: lower(trim(env_name))) AS want_env
    FROM (
        SELECT i, w.ref AS ref, coalesce(w.requires, []::VARCHAR[]) AS requires,
               w.precision AS want_precision, w.urgency AS want_urgency,
               w.location::JSON AS want_location,
               coalesce(w.environment, []::VARCHAR[]) AS want_environment
        FROM (SELECT unnest(reqs) AS w, generate_subscripts(reqs, 1) AS i)
    )
),
available AS (
    SELECT e.id, e.capabilities, e.capability_facts, e.places, e.area,
           list_transform(coalesce(e.environment, []::VARCHAR[]), lambda env_name: lower(trim(env_name))) AS environment,
           e.availability = 'on_demand' AS on_demand, a.active_claims,
           s.median_time_to_claim + s.median_time_to_complete AS latency,
           s.completed, s.completed + s.failed AS finished,
           coalesce(rep.score, 4.0) AS rating_score, coalesce(rep.rated, 0) AS rated, rep.avg_rating
    FROM executors e JOIN executor_availability_at(instant) a ON a.id = e.id
    LEFT JOIN executor_stats s ON s.executor = e.id
    LEFT JOIN executor_reputation rep ON rep.executor = e.id AND rep.capability IS NULL
    WHERE a.available
),
capable AS (
    SELECT w.i, x.*
    FROM wanted w, available x
    WHERE list_has_all(coalesce(x.capabilities, []::VARCHAR[]), w.req_ids)
      AND list_has_all(x.capability_facts, w.req_needs)
      AND place_covered(x.places, w.want_place)
      AND area_covered(x.area, w.want_area)
      AND (len(x.environment) = 0 OR list_has_all(x.environment, w.want_env))
),
eligible AS (
    SELECT * FROM capable
    -- On-demand executors only where nobody else is eligible.
    QUALIFY NOT on_demand OR bool_and(on_demand) OVER (PARTITION BY i)
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
    SELECT p.i, p.position, p.is_default, p.what, p.strategy, p.id, e.on_demand,
           p.pref::DOUBLE AS score, 0::DOUBLE AS tiebreak, 0::BIGINT AS load, NULL::VARCHAR AS measured
    FROM preferred p JOIN eligible e ON e.i = p.i AND e.id = p.id
    UNION ALL
    SELECT m.i, m.position, m.is_default, m.what, m.strategy, e.id, e.on_demand,
           CASE m.strategy WHEN 'lower_latency' THEN e.latency
                           WHEN 'higher_precision' THEN -(e.completed / nullif(e.finished, 0))
                           WHEN 'best_rated' THEN -e.rating_score END AS score,
           CASE m.strategy WHEN 'higher_precision' THEN -e.completed
                           WHEN 'best_rated' THEN -e.rated ELSE 0 END AS tiebreak,
           e.active_claims AS load,
           CASE m.strategy
               WHEN 'lower_latency' THEN coalesce('median ' || round(e.latency)::BIGINT || ' s to claim and complete',
                                                  'not measured yet')
               WHEN 'higher_precision' THEN coalesce('completed ' || e.completed || ' of ' || nullif(e.finished, 0) || ' finished',
                                                     'no finished work yet')
               WHEN 'best_rated' THEN CASE WHEN e.rated > 0
                   THEN 'score ' || printf('%.2f', e.rating_score) || ' (' || e.rated || ' rated, mean ' || printf('%.2f', e.avg_rating) || ')'
                   ELSE 'not rated yet: scored 4.00' END
           END AS measured
    FROM matching m JOIN eligible e ON e.i = m.i
    WHERE m.strategy IS NOT NULL
),
winner AS (
    SELECT DISTINCT ON (i) i, position FROM candidates ORDER BY i, is_default, position
),
by_rule AS (
    SELECT c.i, c.id AS executor,
           row_number() OVER (PARTITION BY c.i ORDER BY c.score NULLS LAST, c.tiebreak, c.load, c.id) AS rank,
           c.position AS rule,
           CASE WHEN c.strategy IS NULL THEN 'rule ' || c.position || ' (' || c.what || ') prefers ' || c.id
                ELSE 'rule ' || c.position || ' (' || c.what || ') strategy ' || c.strategy || ': ' || c.measured END
           || CASE WHEN c.on_demand THEN ' (on demand: no other executor is eligible)' ELSE '' END AS reason
    FROM candidates c JOIN winner w ON w.i = c.i AND w.position = c.position
),
by_capability AS (
    SELECT e.i, e.id AS executor,
           row_number() OVER (PARTITION BY e.i ORDER BY e.active_claims, e.id) AS rank,
           NULL::BIGINT AS rule,
           CASE WHEN len(w.requires) = 0 THEN 'no capability required'
                ELSE 'holds ' || array_to_string(w.req_ids, ', ') END
           || CASE WHEN e.on_demand THEN ' (on demand: no other executor is eligible)' ELSE '' END AS reason
    FROM eligible e JOIN wanted w ON w.i = e.i
    WHERE e.i NOT IN (SELECT i FROM winner)
)
SELECT r.i, w.ref, r.executor, r.rank, r.rule, r.reason
FROM (SELECT * FROM by_rule UNION ALL SELECT * FROM by_capability) r JOIN wanted w ON w.i = r.i
ORDER BY r.i, r.rank;
