-- executor_availability: executor_availability_at(now): per executor, available now and active
-- claims. Columns: id, availability, schedule, timezone, available, active_claims.
-- Depends on: executor_availability_at.
CREATE OR REPLACE VIEW executor_availability AS
SELECT * FROM executor_availability_at(get_current_timestamp());
