-- cron_parse(field, lowest): one cron field ('*', '5', '8-22', '1,3,5', '*/15', '8-22/2',
-- names already numbers) as the ranges it allows: a list of {lo, hi, step}, where `*` runs
-- from `lowest` (the field's first value: 0 for minutes, hours and days of the week, 1 for
-- days of the month and months, where a `*/n` step starts) on. NULL when any part is not one
-- of these forms (a zero step, a name, `5/2`): such a field allows nothing, never an error,
-- so one bad schedule cannot stop a routing pass. Parsed once, matched by
-- cron_ranges_match: a statement binds each lambda it holds, and matching parsed ranges is a
-- small one.
CREATE OR REPLACE MACRO cron_parse(field, lowest) AS
    list_transform([list_transform(string_split(trim(field), ','), lambda cron_part:
        list_transform([{'range': split_part(cron_part, '/', 1),
                         'step': CASE WHEN contains(cron_part, '/') THEN TRY_CAST(split_part(cron_part, '/', 2) AS INTEGER) ELSE 1 END,
                         'stepped': contains(cron_part, '/'),
                         'slashes': len(string_split(cron_part, '/'))}],
            lambda cron_p: CASE
                WHEN cron_p.slashes > 2 OR cron_p.step IS NULL OR cron_p.step < 1 THEN NULL
                WHEN cron_p.range = '*' THEN {'lo': lowest, 'hi': 9999, 'step': cron_p.step}
                WHEN contains(cron_p.range, '-') THEN {'lo': TRY_CAST(split_part(cron_p.range, '-', 1) AS INTEGER),
                                                      'hi': TRY_CAST(split_part(cron_p.range, '-', 2) AS INTEGER),
                                                      'step': cron_p.step}
                -- A step needs `*` or a range.
                WHEN cron_p.stepped THEN NULL
                ELSE {'lo': TRY_CAST(cron_p.range AS INTEGER), 'hi': TRY_CAST(cron_p.range AS INTEGER), 'step': 1}
            END)[1])],
        lambda cron_parts: CASE WHEN list_bool_and(list_transform(cron_parts, lambda cron_r: cron_r.lo IS NOT NULL AND cron_r.hi IS NOT NULL))
                                THEN cron_parts END)[1];
