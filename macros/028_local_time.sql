-- local_time(instant, tz_name): the wall-clock time (TIMESTAMP) in time zone `tz_name` at
-- `instant` (TIMESTAMPTZ, or a TIMESTAMP read as UTC); NULL for an unknown zone.
-- Depends on: utc_offset.
CREATE OR REPLACE MACRO local_time(instant, tz_name) AS
    make_timestamp(epoch_us(instant) + utc_offset(tz_name, instant)::BIGINT * 1000000);
