-- cron_field_matches(field, value, lowest): whether one cron field ('*', '5', '8-22',
-- '1,3,5', '*/15', '8-22/2') allows `value`; `lowest` is the field's first value (0 for hours
-- and days of the week, 1 for days of the month and months), where a `*/n` step starts. A
-- field with a part that is not one of these forms (a zero step, a name) allows nothing:
-- NULL, never an error, so one bad schedule cannot stop a routing pass.
-- Depends on: cron_parse, cron_ranges_match.
CREATE OR REPLACE MACRO cron_field_matches(field, value, lowest) AS
    cron_ranges_match(cron_parse(field, lowest), value);
