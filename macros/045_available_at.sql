-- available_at(availability, schedule, instant, tz_name := 'UTC'): whether an executor with
-- this availability (always | schedule | on_demand), cron schedule and time zone (a
-- tz_rules zone) is available at `instant`: always and on_demand executors are; schedule
-- ones when the schedule allows the wall-clock time of `instant` in `tz_name` (a malformed
-- schedule or an unknown zone allows nothing); any other availability never is.
-- Depends on: schedule_allows, schedule_fields, local_time.
CREATE OR REPLACE MACRO available_at(availability, schedule, instant, tz_name := 'UTC') AS
    CASE availability
        -- The lambda reads the wall-clock time once.
        WHEN 'schedule' THEN coalesce(list_transform([local_time(instant, tz_name)],
                                                     lambda wall_time: schedule_allows(schedule_fields(schedule), wall_time))[1],
                                      false)
        WHEN 'always' THEN true
        WHEN 'on_demand' THEN true
        -- An availability the protocol does not define (reported as a config problem).
        ELSE false
    END;
