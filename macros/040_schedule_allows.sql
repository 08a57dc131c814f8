-- schedule_allows(fields, instant): whether a cron schedule, given as its five fields
-- ('minute hour day-of-month month day-of-week', split on blanks: see schedule_fields), allows
-- instant `instant` (UTC). Availability is per hour, as in the spec's "0 8-22 * * *" (8am-10pm):
-- the minute field is ignored; a malformed schedule allows nothing.
-- Depends on: cron_field_matches.
CREATE OR REPLACE MACRO schedule_allows(fields, instant) AS
    CASE WHEN len(fields) <> 5 THEN false
    ELSE coalesce(
        cron_field_matches(fields[2], hour(instant::TIMESTAMP), 0)
        AND cron_field_matches(fields[3], day(instant::TIMESTAMP), 1)
        AND cron_field_matches(fields[4], month(instant::TIMESTAMP), 1)
        -- Sunday is 0, and 7 as well.
        AND (cron_field_matches(fields[5], dayofweek(instant::TIMESTAMP), 0)
             OR (dayofweek(instant::TIMESTAMP) = 0 AND cron_field_matches(fields[5], 7, 0))),
        false)
    END;

-- schedule_fields(schedule): the blank-separated fields of a cron schedule.
CREATE OR REPLACE MACRO schedule_fields(schedule) AS
    string_split(trim(regexp_replace(coalesce(schedule, ''), '\s+', ' ', 'g')), ' ');
