-- executor_stats: per executor, from every thread's history: claimed, completed, failed,
-- declined (threads it moved to those statuses), median_time_to_claim and
-- median_time_to_complete (seconds; created -> claimed, claimed -> completed),
-- completions_per_day (completions over the days from its first claim to its last
-- completion, at least one).
-- Depends on: thread_history.
CREATE OR REPLACE VIEW executor_stats AS
WITH h AS (
    SELECT ref, "action", "at"::TIMESTAMP AS at_utc, "by" FROM thread_history
),
created AS (SELECT ref, min(at_utc) AS at_utc FROM h WHERE "action" = 'created' GROUP BY ref),
claims AS (SELECT ref, "by" AS executor, min(at_utc) AS at_utc FROM h WHERE "action" = 'claimed' GROUP BY ref, "by"),
ends AS (
    SELECT ref, "by" AS executor, "action", min(at_utc) AS at_utc FROM h
    WHERE "action" IN ('completed', 'failed', 'declined') GROUP BY ref, "by", "action"
),
per_executor AS (
    SELECT c.executor,
           count(DISTINCT c.ref) AS claimed,
           count(DISTINCT CASE WHEN e."action" = 'completed' THEN e.ref END) AS completed,
           count(DISTINCT CASE WHEN e."action" = 'failed' THEN e.ref END) AS failed,
           count(DISTINCT CASE WHEN e."action" = 'declined' THEN e.ref END) AS declined,
           median(epoch(c.at_utc) - epoch(cr.at_utc)) AS median_time_to_claim,
           median(CASE WHEN e."action" = 'completed' THEN epoch(e.at_utc) - epoch(c.at_utc) END) AS median_time_to_complete,
           min(c.at_utc) AS first_claim,
           max(CASE WHEN e."action" = 'completed' THEN e.at_utc END) AS last_completion
    FROM claims c
    LEFT JOIN created cr ON cr.ref = c.ref
    LEFT JOIN ends e ON e.ref = c.ref AND e.executor = c.executor
    GROUP BY c.executor
)
SELECT executor, claimed, completed, failed, declined, median_time_to_claim, median_time_to_complete,
       completed / greatest(1.0, (epoch(coalesce(last_completion, first_claim)) - epoch(first_claim)) / 86400.0)
           AS completions_per_day
FROM per_executor
ORDER BY executor;
