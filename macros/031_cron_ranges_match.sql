-- cron_ranges_match(ranges, value): whether `value` is in one of a cron field's ranges
-- (cron_parse): between lo and hi, a whole number of steps from lo. NULL for a malformed
-- field (NULL ranges).
CREATE OR REPLACE MACRO cron_ranges_match(ranges, value) AS
    list_bool_or(list_transform(ranges, lambda cron_r:
        value BETWEEN cron_r.lo AND cron_r.hi AND (value - cron_r.lo) % cron_r.step = 0));
