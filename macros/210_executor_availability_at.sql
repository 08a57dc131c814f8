-- executor_availability_at(instant): per executor, whether it is available at `instant` and how
-- much it is already doing. Columns: id, availability, schedule, available (always and
-- on_demand executors are; schedule ones when the schedule allows `instant`; any other
-- availability never is), active_claims
-- (threads in state=executing it claimed).
-- Depends on: executors, schedule_allows, active_claims.
CREATE OR REPLACE MACRO executor_availability_at(instant) AS TABLE
SELECT e.id, e.availability, e.schedule,
       CASE e.availability
           WHEN 'schedule' THEN schedule_allows(schedule_fields(e.schedule), instant)
           WHEN 'always' THEN true
           WHEN 'on_demand' THEN true
           -- An availability the protocol does not define (reported as a config problem).
           ELSE false
       END AS available,
       coalesce(w.active, 0) AS active_claims
FROM executors e LEFT JOIN active_claims() w ON w.executor = e.id
ORDER BY e.id;
