-- schedule_allows(schedule, instant): whether an executor with cron `schedule`
-- ('minute hour day-of-month month day-of-week') is available at `instant` (UTC).
-- Availability is per hour, as in the spec's "0 8-22 * * *" (8am-10pm): the minute field is
-- ignored; a malformed schedule allows nothing.
-- Depends on: cron_field_matches.
CREATE OR REPLACE MACRO schedule_allows(schedule, instant) AS
    CASE WHEN len(string_split(trim(regexp_replace(coalesce(schedule, ''), '\s+', ' ', 'g')), ' ')) <> 5 THEN false
    ELSE coalesce(
        cron_field_matches(string_split(trim(regexp_replace(schedule, '\s+', ' ', 'g')), ' ')[2], hour(instant::TIMESTAMP))
        AND cron_field_matches(string_split(trim(regexp_replace(schedule, '\s+', ' ', 'g')), ' ')[3], day(instant::TIMESTAMP))
        AND cron_field_matches(string_split(trim(regexp_replace(schedule, '\s+', ' ', 'g')), ' ')[4], month(instant::TIMESTAMP))
        AND cron_field_matches(string_split(trim(regexp_replace(schedule, '\s+', ' ', 'g')), ' ')[5], dayofweek(instant::TIMESTAMP)),
        false)
    END;
