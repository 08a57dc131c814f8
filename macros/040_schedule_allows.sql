-- schedule_allows(fields, wall): whether a cron schedule, given as its five fields
-- ('minute hour day-of-month month day-of-week', split on blanks with names as numbers: see
-- schedule_fields), allows the wall-clock time `wall` (a TIMESTAMP of the executor's time
-- zone: see local_time; a TIMESTAMPTZ is read in UTC). An availability needs a span where a
-- cron line names the minutes it fires at, so a minute field of one number (the `0` of the
-- spec's "0 8-22 * * *  # 8am-10pm") allows the hour from that minute on (8:00 to 22:59);
-- any other minute field (`*`, `0-29`, `*/15`, `5,35`) lists the minutes allowed. Days
-- follow Vixie cron: when both day of month and day of week are restricted (neither starts
-- with `*`), a day matching either is allowed; otherwise both must match. A malformed
-- schedule allows nothing (false, never an error: one bad schedule cannot stop a routing
-- pass).
-- Depends on: cron_parse, cron_ranges_match.
CREATE OR REPLACE MACRO schedule_allows(fields, wall) AS
    CASE WHEN len(fields) <> 5 THEN false
    -- Each field is parsed once and the wall-clock time read once (the lambda holds them).
    ELSE list_transform([{'ranges': list_transform(fields, lambda cron_f, cron_i: cron_parse(cron_f, CASE WHEN cron_i IN (3, 4) THEN 1 ELSE 0 END)),
                          'fields': fields, 'at': make_timestamp(epoch_us(wall))}],
        lambda cron_s: coalesce(
            CASE WHEN regexp_full_match(cron_s.fields[1], '[0-9]{1,2}')
                 THEN minute(cron_s.at) >= TRY_CAST(cron_s.fields[1] AS INTEGER)
                 ELSE cron_ranges_match(cron_s.ranges[1], minute(cron_s.at)) END
            AND cron_ranges_match(cron_s.ranges[2], hour(cron_s.at))
            AND cron_ranges_match(cron_s.ranges[4], month(cron_s.at))
            AND CASE WHEN NOT starts_with(cron_s.fields[3], '*') AND NOT starts_with(cron_s.fields[5], '*')
                     -- A malformed field allows nothing, even beside one that matches.
                     THEN (cron_ranges_match(cron_s.ranges[3], day(cron_s.at))
                           OR cron_ranges_match(cron_s.ranges[5], dayofweek(cron_s.at))
                           -- Sunday is 0, and 7 as well.
                           OR (dayofweek(cron_s.at) = 0 AND cron_ranges_match(cron_s.ranges[5], 7)))
                          AND cron_s.ranges[3] IS NOT NULL AND cron_s.ranges[5] IS NOT NULL
                     ELSE cron_ranges_match(cron_s.ranges[3], day(cron_s.at))
                          AND (cron_ranges_match(cron_s.ranges[5], dayofweek(cron_s.at))
                               OR (dayofweek(cron_s.at) = 0 AND cron_ranges_match(cron_s.ranges[5], 7))) END,
            false))[1]
    END;

-- schedule_fields(schedule): the blank-separated fields of a cron schedule, in lower case,
-- with month and day names as numbers (cron_names).
CREATE OR REPLACE MACRO schedule_fields(schedule) AS
    list_transform(string_split(trim(regexp_replace(lower(coalesce(schedule, '')), '\s+', ' ', 'g')), ' '),
                   lambda cron_text, cron_i: cron_names(cron_text, cron_i));
