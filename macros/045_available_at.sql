-- available_at(availability, schedule, instant, tz_name := 'UTC'): whether an executor with
-- this availability (always | schedule | on_demand), cron schedule and time zone (a
-- time_zones zone) is available at `instant`: always and on_demand executors are; schedule
-- ones when the schedule allows the wall-clock time of `instant` in `tz_name` (a malformed
-- schedule or an unknown zone allows nothing); any other availability never is.
-- Depends on: schedule_allows, schedule_fields, local_time.
CREATE OR REPLACE MACRO available_at(availability, schedule, instant, tz_name := 'UTC') AS
    CASE availability
        -- The fields and the wall-clock time enter the cron macros' lambdas as values, read
        -- once: the wall-clock time is a subquery, and each field is read many times.
        WHEN 'schedule' THEN coalesce(list_transform([{'fields': schedule_fields(schedule), 'wall': local_time(instant, tz_name)}],
                                                     lambda cron_at: schedule_allows(cron_at.fields, cron_at.wall))[1],
                                      false)
        WHEN 'always' THEN true
        WHEN 'on_demand' THEN true
        -- An availability the protocol does not define (reported as a config problem).
        ELSE false
    END;
