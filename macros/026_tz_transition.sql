-- tz_transition(y, change): the local wall-clock time (TIMESTAMP) in year `y` of a daylight
-- saving change `change` ({month, week, weekday, at}, as in time_zones.dst_start): the
-- `week`th `weekday` of `month` (week 5 is the last such day of the month), plus `at` seconds.
CREATE OR REPLACE MACRO tz_transition(y, change) AS
    make_date(y, change.month, 1)::TIMESTAMP
    + to_days(CAST(
        (change.weekday - dayofweek(make_date(y, change.month, 1)) + 7) % 7 + 7 * (change.week - 1)
        -- A fifth week that the month does not have is its last.
        - CASE WHEN 1 + (change.weekday - dayofweek(make_date(y, change.month, 1)) + 7) % 7 + 7 * (change.week - 1)
                    > day(last_day(make_date(y, change.month, 1))) THEN 7 ELSE 0 END AS INTEGER))
    + to_seconds(change.at);
