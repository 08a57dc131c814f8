-- tz_rules(): the IANA time zones a schedule may be read in (an executor's `timezone:`, or
-- config.yaml's top-level default), as a MAP of zone name -> its present rule as a POSIX TZ
-- string (from tzdata: `CET-1CEST,M3.5.0,M10.5.0/3`). The list is `protocol::tz::ZONES` in
-- the exchange's source, whose entries the exchange fills in below. A constant map rather
-- than a table, so that a zone's rule is read without a subquery (DuckDB allows none inside
-- the lambdas of the cron macros). The view time_zones shows it as rows.
CREATE OR REPLACE MACRO tz_rules() AS MAP {
    {{time_zones}}
};
