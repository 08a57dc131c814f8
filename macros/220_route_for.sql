-- route_for(req, prec, urg, instant, loc := NULL, env := NULL): the executors a request with
-- required capabilities `req` (VARCHAR[]: ids, or JSON text of `{id: metadata}`), precision
-- `prec`, urgency `urg`, constraints.location `loc` (JSON: a place path or an area) and
-- constraints.environment `env` (VARCHAR[]) goes to at `instant`, ranked. Eligible executors
-- are available at `instant`, hold every required capability (with metadata that satisfies
-- the request's) and cover its location and environment; on-demand executors only when
-- nobody else is. Routing rules are tried in order (`match` rules first, then `default`);
-- the first rule that prefers an eligible executor decides, in its `prefer` order (a
-- strategy rule ranks every eligible executor: lower_latency fastest first, higher_precision
-- most successful first). With no such rule, every eligible executor is chosen, least loaded
-- first. Columns: executor, rank (1 = first choice), rule (position, NULL without one),
-- reason.
-- Depends on: route_batch (which holds the rules above for many requests at once).
CREATE OR REPLACE MACRO route_for(req, prec, urg, instant, loc := NULL, env := NULL) AS TABLE
SELECT executor, rank, rule, reason
FROM route_batch([{'ref': NULL::VARCHAR, 'requires': req::VARCHAR[], 'precision': prec::VARCHAR,
                   'urgency': urg::VARCHAR, 'location': loc::JSON, 'environment': env::VARCHAR[]}], instant)
ORDER BY rank;
