-- meta_satisfies(offered_meta, needs): whether an executor's capability metadata
-- (`executors.capability_meta`) satisfies a request's capability_needs: for every capability
-- the request's metadata names, the executor's metadata for it holds every key asked for,
-- and its value (a list, or one value) contains every value asked for (`areas: [kitchen]` is
-- satisfied by `areas: [kitchen, living-room]`, `camera: rear` by `camera: rear` or
-- `camera: [rear, front]`; a mapping value must be equal). No needs: true. route_batch tests
-- the same over the column `capability_facts`.
-- Depends on: capability_facts.
CREATE OR REPLACE MACRO meta_satisfies(offered_meta, needs) AS
    list_has_all(capability_facts(offered_meta), coalesce(needs, []::VARCHAR[]));
