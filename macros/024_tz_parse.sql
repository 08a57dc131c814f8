-- tz_parse(rule): a POSIX TZ rule (`CET-1CEST,M3.5.0,M10.5.0/3`, `<+0530>-5:30`) as a
-- struct: std_offset and dst_offset (seconds east of UTC; dst_offset NULL without daylight
-- saving time), dst_start and dst_end ({month, week, weekday, at}: the `week`th `weekday`
-- (0 = Sunday) of `month`, week 5 being the last, at `at` seconds after midnight of the
-- local time then in force; NULL without daylight saving time). Every zone of time_zones has
-- this form; NULL fields for other text.
-- Depends on: clock_seconds.
CREATE OR REPLACE MACRO tz_parse(rule) AS
    list_transform(
        [regexp_extract(rule,
            '^(<[^>]*>|[A-Za-z]+)([+-]?[0-9:]+)(?:(<[^>]*>|[A-Za-z]+)([+-]?[0-9:]+)?,M([0-9]+)\.([0-9])\.([0-9])(?:/([+-]?[0-9:]+))?,M([0-9]+)\.([0-9])\.([0-9])(?:/([+-]?[0-9:]+))?)?$',
            ['std_name', 'std', 'dst_name', 'dst', 'sm', 'sw', 'sd', 'st', 'em', 'ew', 'ed', 'et'])],
        lambda tz_p: {
            -- POSIX offsets count west of UTC (EST5 is UTC-5).
            'std_offset': -clock_seconds(tz_p.std),
            -- Without its own offset, daylight saving time is one hour ahead of standard time.
            'dst_offset': CASE WHEN tz_p.dst_name <> ''
                               THEN coalesce(-clock_seconds(tz_p.dst), -clock_seconds(tz_p.std) + 3600) END,
            'dst_start': CASE WHEN tz_p.dst_name <> '' THEN
                {'month': TRY_CAST(tz_p.sm AS INTEGER), 'week': TRY_CAST(tz_p.sw AS INTEGER),
                 'weekday': TRY_CAST(tz_p.sd AS INTEGER), 'at': coalesce(clock_seconds(tz_p.st), 7200)} END,
            'dst_end': CASE WHEN tz_p.dst_name <> '' THEN
                {'month': TRY_CAST(tz_p.em AS INTEGER), 'week': TRY_CAST(tz_p.ew AS INTEGER),
                 'weekday': TRY_CAST(tz_p.ed AS INTEGER), 'at': coalesce(clock_seconds(tz_p.et), 7200)} END
        })[1];
