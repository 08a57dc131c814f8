-- executor_availability_at(instant): per executor, whether it is available at `instant` and how
-- much it is already doing. Columns: id, availability, schedule, timezone (the zone its
-- schedule is read in), available (see available_at), active_claims (threads in
-- state=executing it claimed).
-- Depends on: executors, available_at, active_claims.
CREATE OR REPLACE MACRO executor_availability_at(instant) AS TABLE
SELECT e.id, e.availability, e.schedule, e.timezone,
       available_at(e.availability, e.schedule, instant, tz_name := e.timezone) AS available,
       coalesce(w.active, 0) AS active_claims
FROM executors e LEFT JOIN active_claims() w ON w.executor = e.id
ORDER BY e.id;
