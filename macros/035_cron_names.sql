-- cron_names(field, field_no): cron field `field` (lower case) with its names as numbers:
-- months (position 4: jan = 1 .. dec = 12) and days of the week (position 5: sun = 0 ..
-- sat = 6, and 7 for `sun` ending a range, so `fri-sun` runs forward). Other fields, and text
-- that is no name, are left as they are (and then allow nothing).
CREATE OR REPLACE MACRO cron_names(field, field_no) AS
    CASE field_no
        WHEN 4 THEN
            replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(field,
                'jan', '1'), 'feb', '2'), 'mar', '3'), 'apr', '4'), 'may', '5'), 'jun', '6'),
                'jul', '7'), 'aug', '8'), 'sep', '9'), 'oct', '10'), 'nov', '11'), 'dec', '12')
        WHEN 5 THEN
            replace(replace(replace(replace(replace(replace(replace(replace(field,
                '-sun', '-7'), 'sun', '0'), 'mon', '1'), 'tue', '2'), 'wed', '3'), 'thu', '4'),
                'fri', '5'), 'sat', '6')
        ELSE field
    END;
