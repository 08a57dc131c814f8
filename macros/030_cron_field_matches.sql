-- cron_field_matches(field, value, lowest): whether one cron field ('*', '5', '8-22',
-- '1,3,5', '*/15', '8-22/2') allows `value`; `lowest` is the field's first value (0 for hours
-- and days of the week, 1 for days of the month and months), where a `*/n` step starts. A
-- part that is not one of these forms (a zero step, a name) allows nothing: NULL, never an
-- error, so one bad schedule cannot stop a routing pass.
CREATE OR REPLACE MACRO cron_field_matches(field, value, lowest) AS
    list_bool_or(list_transform(string_split(trim(field), ','), lambda cron_part:
        CASE
            WHEN cron_part = '*' THEN true
            WHEN contains(cron_part, '/') THEN
                (CASE
                    WHEN split_part(cron_part, '/', 1) = '*' THEN
                        (value - lowest) % NULLIF(TRY_CAST(split_part(cron_part, '/', 2) AS INTEGER), 0) = 0
                    WHEN contains(split_part(cron_part, '/', 1), '-') THEN
                        value BETWEEN TRY_CAST(split_part(split_part(cron_part, '/', 1), '-', 1) AS INTEGER)
                                  AND TRY_CAST(split_part(split_part(cron_part, '/', 1), '-', 2) AS INTEGER)
                        AND (value - TRY_CAST(split_part(split_part(cron_part, '/', 1), '-', 1) AS INTEGER))
                            % NULLIF(TRY_CAST(split_part(cron_part, '/', 2) AS INTEGER), 0) = 0
                    ELSE NULL
                END)
            WHEN contains(cron_part, '-') THEN
                value BETWEEN TRY_CAST(split_part(cron_part, '-', 1) AS INTEGER) AND TRY_CAST(split_part(cron_part, '-', 2) AS INTEGER)
            ELSE value = TRY_CAST(cron_part AS INTEGER)
        END));
