-- time_zones: the IANA time zones a schedule may be read in (an executor's `timezone:`, or
-- config.yaml's top-level default), one row each: zone, rule (its present rule as a POSIX TZ
-- string, from tzdata: `CET-1CEST,M3.5.0,M10.5.0/3`), and the rule read by tz_parse:
-- std_offset, dst_offset (seconds east of UTC), dst_start, dst_end. The list is
-- `protocol::tz::ZONES` in the exchange's source, which the exchange fills in below. A
-- table, read once: the rules are constant, and parsing them at every verdict made every
-- statement that reads a schedule slower to bind.
-- Depends on: tz_parse.
CREATE OR REPLACE TABLE time_zones AS
SELECT zone, rule, tz.std_offset, tz.dst_offset, tz.dst_start, tz.dst_end
-- The list arrives as one JSON text: binding 597 rows of VALUES cost more than the rest of
-- the table.
FROM (SELECT z.zone, z.rule, tz_parse(z.rule) AS tz
      FROM (SELECT unnest(from_json('{{time_zones}}', '[{"zone": "VARCHAR", "rule": "VARCHAR"}]')) AS z))
ORDER BY zone;
