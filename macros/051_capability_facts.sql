-- capability_facts(capability_meta): what an executor's capability metadata
-- (`executors.capability_meta`: id -> JSON) states, as metadata_facts of every capability.
-- The executors view and the routing snapshot hold them as the column `capability_facts`.
-- Depends on: metadata_facts.
CREATE OR REPLACE MACRO capability_facts(capability_meta) AS
    coalesce(flatten(list_transform(map_entries(capability_meta), lambda cap_kv: metadata_facts(cap_kv.key, cap_kv.value))),
             []::VARCHAR[]);
