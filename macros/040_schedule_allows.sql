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
-- Depends on: cron_field_matches.
CREATE OR REPLACE MACRO schedule_allows(fields, wall) AS
    CASE WHEN len(fields) <> 5 THEN false
    ELSE coalesce(
        (CASE WHEN regexp_full_match(fields[1], '[0-9]{1,2}')
              THEN minute(make_timestamp(epoch_us(wall))) >= TRY_CAST(fields[1] AS INTEGER)
                   AND TRY_CAST(fields[1] AS INTEGER) <= 59
              ELSE cron_field_matches(fields[1], minute(make_timestamp(epoch_us(wall))), 0) END)
        AND cron_field_matches(fields[2], hour(make_timestamp(epoch_us(wall))), 0)
        AND cron_field_matches(fields[4], month(make_timestamp(epoch_us(wall))), 1)
        AND (CASE WHEN starts_with(fields[3], '*') OR starts_with(fields[5], '*')
                  THEN cron_field_matches(fields[3], day(make_timestamp(epoch_us(wall))), 1)
                       AND cron_day_of_week_matches(fields[5], make_timestamp(epoch_us(wall)))
                  ELSE (cron_field_matches(fields[3], day(make_timestamp(epoch_us(wall))), 1)
                        OR cron_day_of_week_matches(fields[5], make_timestamp(epoch_us(wall))))
                       -- A malformed field allows nothing, even beside one that matches.
                       AND cron_field_matches(fields[3], 1, 1) IS NOT NULL
                       AND cron_day_of_week_matches(fields[5], make_timestamp(epoch_us(wall))) IS NOT NULL
             END),
        false)
    END;

-- schedule_fields(schedule): the blank-separated fields of a cron schedule, in lower case,
-- with month and day names as numbers (cron_names).
CREATE OR REPLACE MACRO schedule_fields(schedule) AS
    list_transform(string_split(trim(regexp_replace(lower(coalesce(schedule, '')), '\s+', ' ', 'g')), ' '),
                   lambda cron_text, cron_i: cron_names(cron_text, cron_i));
