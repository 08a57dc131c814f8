-- available_at(availability, schedule, instant): whether an executor with this availability
-- (always | schedule | on_demand) and cron schedule is available at `instant` (UTC): always and
-- on_demand executors are; schedule ones when the schedule allows `instant` (a malformed
-- schedule allows nothing); any other availability never is.
-- Depends on: schedule_allows, schedule_fields.
CREATE OR REPLACE MACRO available_at(availability, schedule, instant) AS
    CASE availability
        WHEN 'schedule' THEN schedule_allows(schedule_fields(schedule), instant)
        WHEN 'always' THEN true
        WHEN 'on_demand' THEN true
        -- An availability the protocol does not define (reported as a config problem).
        ELSE false
    END;
