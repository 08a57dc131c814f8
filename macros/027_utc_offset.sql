-- utc_offset(tz_name, instant): the offset from UTC, in seconds east, of time zone `tz_name`
-- (a tz_rules zone) at `instant` (TIMESTAMPTZ, or a TIMESTAMP read as UTC), by the zone's
-- present rule: standard time, or daylight saving time between the rule's changes (each in
-- the `at` of the local time then in force; a rule whose daylight saving time spans the new
-- year, south of the equator or as Dublin's winter time, as well). NULL for an unknown zone.
-- Depends on: tz_rules, tz_parse, tz_transition.
CREATE OR REPLACE MACRO utc_offset(tz_name, instant) AS
    -- The lambdas read the rule and the instant once.
    list_transform([{'tz': tz_parse(tz_rules()[tz_name]), 'utc': make_timestamp(epoch_us(instant))}], lambda tz_at:
        CASE
            WHEN tz_at.tz.dst_start IS NULL THEN tz_at.tz.std_offset
            WHEN list_transform([{
                     'begins': tz_transition(year(tz_at.utc), tz_at.tz.dst_start) - to_seconds(tz_at.tz.std_offset),
                     'ends': tz_transition(year(tz_at.utc), tz_at.tz.dst_end) - to_seconds(tz_at.tz.dst_offset)}],
                     lambda dst: CASE WHEN dst.begins < dst.ends THEN tz_at.utc >= dst.begins AND tz_at.utc < dst.ends
                                      ELSE tz_at.utc >= dst.begins OR tz_at.utc < dst.ends END)[1]
            THEN tz_at.tz.dst_offset
            ELSE tz_at.tz.std_offset
        END)[1];
