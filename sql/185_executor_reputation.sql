-- executor_reputation: how each executor's work went, overall (capability NULL) and per
-- capability it worked on. Columns: executor, capability, worked (threads it held), completed,
-- failed, reviews, rated (reviews with stars), avg_rating (mean stars; accept = 5, reject = 1),
-- accepted (reviews that accept: `accept` or 4-5 stars, no redo), rejected (`reject`, 1-2
-- stars, or a redo), acceptance_rate (accepted / (accepted + rejected)), redo_rate (completed
-- threads with a redo / completed threads), on_time_rate (completed threads with a needed_by
-- completed by it / those with one), on_estimate_rate (completed threads whose claim carried an
-- estimate, done from claim to completion within it / those with one), median_time_to_claim and
-- median_time_to_complete (seconds), score (what `strategy: best_rated` ranks by: the mean
-- stars with three reviews' worth of 4 stars added, so a new executor starts at 4.0).
-- Depends on: threads, thread_history, reviews, claims, iso_seconds.
CREATE OR REPLACE VIEW executor_reputation AS
WITH h AS (
    SELECT ref,
           min(CASE WHEN "action" = 'created' THEN "at"::TIMESTAMP END) AS created_at,
           min(CASE WHEN "action" = 'claimed' THEN "at"::TIMESTAMP END) AS claimed_at,
           max(CASE WHEN "action" = 'completed' THEN "at"::TIMESTAMP END) AS completed_at,
           count(*) FILTER (WHERE "action" = 'redo') AS redos
    FROM thread_history
    GROUP BY ref
),
estimates AS (
    SELECT ref, executor, arg_max(estimate, seq) AS estimate
    FROM claims WHERE estimate IS NOT NULL GROUP BY ref, executor
),
rated AS (
    SELECT ref,
           count(*) AS reviews,
           count(stars) AS rated,
           sum(stars) AS stars_sum,
           count(*) FILTER (WHERE NOT request_redo AND (verdict = 'accept' OR (verdict IS NULL AND stars >= 4))) AS accepted,
           count(*) FILTER (WHERE request_redo OR verdict = 'reject' OR (verdict IS NULL AND stars <= 2)) AS rejected
    FROM reviews GROUP BY ref
),
work AS (
    SELECT t.ref, t.executor, t.status, t.needed_by::TIMESTAMP AS needed_by,
           h.created_at, h.claimed_at, h.completed_at, h.redos,
           iso_seconds(e.estimate) AS estimate_s,
           coalesce(r.reviews, 0) AS reviews, coalesce(r.rated, 0) AS rated, r.stars_sum,
           coalesce(r.accepted, 0) AS accepted, coalesce(r.rejected, 0) AS rejected,
           unnest(CASE WHEN len(coalesce(t.requires, []::VARCHAR[])) = 0 THEN [NULL::VARCHAR]
                       ELSE t.requires END) AS capability
    FROM threads t
    JOIN h ON h.ref = t.ref
    LEFT JOIN estimates e ON e.ref = t.ref AND e.executor = t.executor
    LEFT JOIN rated r ON r.ref = t.ref
    WHERE t.executor IS NOT NULL
),
grouped AS (
    SELECT executor, capability, grouping(capability) = 1 AS overall,
           count(DISTINCT ref) AS worked,
           count(DISTINCT ref) FILTER (WHERE status = 'completed') AS completed,
           count(DISTINCT ref) FILTER (WHERE status = 'failed') AS failed,
           sum(reviews)::BIGINT AS reviews,
           sum(rated)::BIGINT AS rated,
           sum(stars_sum)::BIGINT AS stars_sum,
           sum(accepted)::BIGINT AS accepted,
           sum(rejected)::BIGINT AS rejected,
           count(DISTINCT ref) FILTER (WHERE status = 'completed' AND redos > 0) AS redone,
           count(DISTINCT ref) FILTER (WHERE status = 'completed' AND needed_by IS NOT NULL) AS with_deadline,
           count(DISTINCT ref) FILTER (WHERE status = 'completed' AND completed_at <= needed_by) AS on_time,
           count(DISTINCT ref) FILTER (WHERE status = 'completed' AND estimate_s IS NOT NULL) AS with_estimate,
           count(DISTINCT ref) FILTER (WHERE status = 'completed'
                                       AND epoch(completed_at) - epoch(claimed_at) <= estimate_s) AS on_estimate,
           median(epoch(claimed_at) - epoch(created_at)) AS median_time_to_claim,
           median(CASE WHEN status = 'completed' THEN epoch(completed_at) - epoch(claimed_at) END) AS median_time_to_complete
    FROM work
    GROUP BY GROUPING SETS ((executor), (executor, capability))
)
SELECT executor,
       capability,
       worked,
       completed,
       failed,
       reviews,
       rated,
       round(stars_sum / nullif(rated, 0), 2) AS avg_rating,
       accepted,
       rejected,
       round(accepted / nullif(accepted + rejected, 0), 3) AS acceptance_rate,
       round(redone / nullif(completed, 0), 3) AS redo_rate,
       round(on_time / nullif(with_deadline, 0), 3) AS on_time_rate,
       round(on_estimate / nullif(with_estimate, 0), 3) AS on_estimate_rate,
       median_time_to_claim,
       median_time_to_complete,
       round((coalesce(stars_sum, 0) + 3 * 4.0) / (rated + 3), 2) AS score
FROM grouped
-- Work that requires nothing counts overall only.
WHERE overall OR capability IS NOT NULL
ORDER BY executor, capability NULLS FIRST;
