-- route_for(req, prec, urg, instant): the executors a request with required capabilities `req`
-- (VARCHAR[]), precision `prec` and urgency `urg` goes to at `instant`, ranked. Eligible
-- executors hold every required capability and are available at `instant`. Routing rules are
-- tried in order (`match` rules first, then `default`); the first rule that prefers an
-- eligible executor decides, in its `prefer` order (a strategy rule offers every eligible
-- executor, least loaded first). With no such rule, every eligible executor is chosen, least
-- loaded first. Columns: executor, rank (1 = first choice), rule (position, NULL without
-- one), reason.
-- Depends on: route_batch (which holds the rules above for many requests at once).
CREATE OR REPLACE MACRO route_for(req, prec, urg, instant) AS TABLE
SELECT executor, rank, rule, reason
FROM route_batch([{'ref': NULL::VARCHAR, 'requires': req::VARCHAR[], 'precision': prec::VARCHAR,
                   'urgency': urg::VARCHAR}], instant)
ORDER BY rank;
