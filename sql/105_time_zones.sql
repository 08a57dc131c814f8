-- time_zones: the IANA time zones a schedule may be read in (tz_rules), one row each: zone,
-- rule (POSIX TZ), and the rule read by tz_parse: std_offset, dst_offset (seconds east of
-- UTC), dst_start, dst_end.
-- Depends on: tz_rules, tz_parse.
CREATE OR REPLACE VIEW time_zones AS
SELECT zone, rule, tz.std_offset, tz.dst_offset, tz.dst_start, tz.dst_end
FROM (
    SELECT zone_kv.key AS zone, zone_kv.value AS rule, tz_parse(zone_kv.value) AS tz
    FROM (SELECT unnest(map_entries(tz_rules())) AS zone_kv)
)
ORDER BY zone;
