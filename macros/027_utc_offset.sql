-- utc_offset(tz_name, instant): the offset from UTC, in seconds east, of time zone `tz_name`
-- (a time_zones zone) at `instant` (TIMESTAMPTZ, or a TIMESTAMP read as UTC), by the zone's
-- present rule: standard time, or daylight saving time between the rule's changes (each in
-- the `at` of the local time then in force; a rule whose daylight saving time spans the new
-- year, south of the equator or as Dublin's winter time, as well). NULL for an unknown zone.
-- A subquery: DuckDB refuses it inside a lambda, so the cron macros take its result as a
-- value (see available_at).
-- Depends on: time_zones, tz_transition.
CREATE OR REPLACE MACRO utc_offset(tz_name, instant) AS (
    SELECT CASE
        WHEN z.dst_start IS NULL THEN z.std_offset
        WHEN CASE WHEN z.dst_begins < z.dst_ends THEN z.utc >= z.dst_begins AND z.utc < z.dst_ends
                  ELSE z.utc >= z.dst_begins OR z.utc < z.dst_ends END THEN z.dst_offset
        ELSE z.std_offset
    END
    FROM (
        SELECT tz.std_offset, tz.dst_offset, tz.dst_start, at_utc.utc,
               tz_transition(year(at_utc.utc), tz.dst_start) - to_seconds(tz.std_offset) AS dst_begins,
               tz_transition(year(at_utc.utc), tz.dst_end) - to_seconds(tz.dst_offset) AS dst_ends
        FROM time_zones tz, (SELECT make_timestamp(epoch_us(instant)) AS utc) at_utc
        WHERE tz.zone = tz_name
    ) z
);
