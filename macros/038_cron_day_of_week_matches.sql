-- cron_day_of_week_matches(field, wall): whether a cron day-of-week field (numbers, names
-- already numbers) allows the day of wall-clock time `wall`; Sunday is 0, and 7 as well.
-- Depends on: cron_field_matches.
CREATE OR REPLACE MACRO cron_day_of_week_matches(field, wall) AS
    cron_field_matches(field, dayofweek(wall), 0)
    OR (dayofweek(wall) = 0 AND cron_field_matches(field, 7, 0));
