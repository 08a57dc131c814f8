-- clock_seconds(text): seconds in a POSIX TZ offset or time of day ('5', '-1', '+3:30',
-- '2:45', '26', '-10:30:15'): [+|-]hours[:minutes[:seconds]]; NULL for empty text.
CREATE OR REPLACE MACRO clock_seconds(text) AS
    CASE WHEN coalesce(text, '') = '' THEN NULL
    ELSE (CASE WHEN starts_with(text, '-') THEN -1 ELSE 1 END)
         * (TRY_CAST(split_part(ltrim(text, '+-'), ':', 1) AS INTEGER) * 3600
            + coalesce(TRY_CAST(nullif(split_part(ltrim(text, '+-'), ':', 2), '') AS INTEGER), 0) * 60
            + coalesce(TRY_CAST(nullif(split_part(ltrim(text, '+-'), ':', 3), '') AS INTEGER), 0))
    END;
